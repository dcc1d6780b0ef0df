"""Liveness: fails when a policy's last successful poll is older than a threshold.

kopf's own probe only says its probe task runs; it cannot see a poll loop that stopped making
progress. This endpoint tracks, per active policy, when its poll last succeeded. With no
policies the operator is alive. Served from a thread so that a blocked event loop still gets an
honest answer (the answer then turns to failure as polls stop).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Liveness:
    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}  # policy -> when it was first seen
        self._success: dict[str, float] = {}

    def seen(self, key: str, now: float | None = None) -> None:
        with self._lock:
            self._started.setdefault(key, now if now is not None else time.monotonic())

    def succeeded(self, key: str, now: float | None = None) -> None:
        now = now if now is not None else time.monotonic()
        with self._lock:
            self._started.setdefault(key, now)
            self._success[key] = now

    def forget(self, key: str) -> None:
        with self._lock:
            self._started.pop(key, None)
            self._success.pop(key, None)

    def check(self, now: float | None = None) -> tuple[bool, dict[str, float]]:
        """(alive, age of the last success per policy; age since first seen if none yet)."""
        now = now if now is not None else time.monotonic()
        with self._lock:
            ages = {
                key: now - self._success.get(key, started) for key, started in self._started.items()
            }
        return all(age <= self.max_age_s for age in ages.values()), ages


def serve(liveness: Liveness, port: int, address: str = "0.0.0.0") -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/healthz", "/livez"):
                self.send_error(404)
                return
            alive, ages = liveness.check()
            body = json.dumps(
                {
                    "alive": alive,
                    "maxAgeSeconds": liveness.max_age_s,
                    "policies": {k: round(v, 1) for k, v in sorted(ages.items())},
                }
            ).encode()
            self.send_response(200 if alive else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet probes
            return

    server = ThreadingHTTPServer((address, port), Handler)
    thread = threading.Thread(target=server.serve_forever, name="healthz", daemon=True)
    thread.start()
    return server
