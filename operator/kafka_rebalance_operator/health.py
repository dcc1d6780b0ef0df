"""Liveness: the operator's loops run (readiness, /readyz: that, and the injection webhook
serves). Liveness fails only when a policy's timer stops waking (the event
loop is blocked) or one poll has not returned for longer than a threshold (a stuck worker).
A poll queued for a free worker thread (many policies polling at once) is waiting, not stuck:
its age counts from when a worker starts it, and until then it is reported as queued.

A policy whose polls fail is alive: its failure shows in its own status (Stalled and a reason),
Events and metrics (`kafka_rebalance_poll_errors_total`, the last-success gauge), where it can
be alerted on. Restarting the process would not fix it and would cost every other policy its
rate history and capacity estimates. kopf's own probe only says its probe task runs; this one
watches the timers and the poll threads. Served from a thread so that a blocked event loop still
gets an honest answer (the answer then turns to failure as the timers stop waking).

Why the standard library's ThreadingHTTPServer and not a library: kopf's own health endpoint
(aiohttp) runs on the event loop it would have to judge, and prometheus_client's server serves
/metrics only. One GET route on a daemon thread is all this needs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Liveness:
    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._woke: dict[str, float] = {}  # policy -> its timer's last wake-up
        self._running: dict[str, float] = {}  # policy -> when its running poll started
        self._queued: dict[str, float] = {}  # policy -> since when its poll waits for a worker

    def woke(self, key: str, now: float | None = None) -> None:
        """The policy's timer ran (whether or not a poll was due): the event loop turns."""
        with self._lock:
            self._woke[key] = now if now is not None else time.monotonic()

    def poll_queued(self, key: str, now: float | None = None) -> None:
        """A poll is handed to the worker pool; it may wait there for a free thread."""
        with self._lock:
            self._queued[key] = now if now is not None else time.monotonic()

    def poll_started(self, key: str, now: float | None = None) -> None:
        """A worker thread runs the poll now."""
        with self._lock:
            self._queued.pop(key, None)
            self._running[key] = now if now is not None else time.monotonic()

    def poll_finished(self, key: str, now: float | None = None) -> None:
        """The poll returned, successful or not."""
        with self._lock:
            self._queued.pop(key, None)
            self._running.pop(key, None)
            self._woke[key] = now if now is not None else time.monotonic()

    def forget(self, key: str) -> None:
        with self._lock:
            self._woke.pop(key, None)
            self._running.pop(key, None)
            self._queued.pop(key, None)

    def check(self, now: float | None = None) -> tuple[bool, dict[str, float]]:
        """(alive, per policy: how long its poll has been running, else since its timer woke).
        Policies whose poll is queued are left out (`queued` has them)."""
        now = now if now is not None else time.monotonic()
        with self._lock:
            ages = {
                key: now - self._running.get(key, woke)
                for key, woke in self._woke.items()
                if key not in self._queued
            }
            ages.update({key: now - t for key, t in self._running.items() if key not in ages})
        return all(age <= self.max_age_s for age in ages.values()), ages

    def queued(self, now: float | None = None) -> dict[str, float]:
        """Per policy whose poll waits for a worker thread: for how long."""
        now = now if now is not None else time.monotonic()
        with self._lock:
            return {key: now - t for key, t in self._queued.items()}


def serve(
    liveness: Liveness,
    port: int,
    address: str = "0.0.0.0",
    ready: Callable[[], dict[str, bool]] = dict,
) -> ThreadingHTTPServer:
    """/healthz and /livez: liveness. /readyz: alive and every gate of `ready()` open (the
    injection webhook's: a replica joins its Service only once it serves it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path not in ("/healthz", "/livez", "/readyz"):
                self.send_error(404)
                return
            alive, ages = liveness.check()
            answer: dict[str, object] = {
                "alive": alive,
                "maxAgeSeconds": liveness.max_age_s,
                "policies": {k: round(v, 1) for k, v in sorted(ages.items())},
                "queued": {k: round(v, 1) for k, v in sorted(liveness.queued().items())},
            }
            ok = alive
            if path == "/readyz":
                gates = ready()
                answer["ready"] = gates
                ok = alive and all(gates.values())
            body = json.dumps(answer).encode()
            self.send_response(200 if ok else 503)
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
