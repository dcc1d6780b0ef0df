"""A real HTTP application that fails the way applications do: answers a status, hangs past the
sidecar's timeout, or resets the connection, as a test's `fault(records)` says per request.

Used by the failure-class tests (unit: tests/unit/sidecar/test_sidecar_failure_classes.py; against
the broker:
tests/integration/test_sidecar_faults.py). It records every request's body size and every record
it accepted (2xx), so a test counts records lost and delivered twice from what the application
actually took.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What to do with one request: ("ok",), ("status", code), ("hang", seconds), ("reset",).
Fault = tuple[Any, ...]
Key = tuple[str, int, int]  # (topic, partition, offset)


class FaultyApp:
    """`fault(keys)` decides each request from its records' (topic, partition, offset); the
    default accepts everything. `taken` lists every accepted record in arrival order
    (duplicates included); `bodies` the Content-Length of every request."""

    def __init__(self, fault: Callable[[list[Key]], Fault] | None = None) -> None:
        self.fault: Callable[[list[Key]], Fault] = fault or (lambda keys: ("ok",))
        self.taken: list[Key] = []
        self.bodies: list[int] = []
        self.answers: dict[str, int] = {}
        self.lock = threading.Lock()
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                keys = [(r["topic"], r["partition"], r["offset"]) for r in body["records"]]
                action = app.fault(keys)
                with app.lock:
                    app.bodies.append(length)
                    app.answers[action[0]] = app.answers.get(action[0], 0) + 1
                if action[0] == "hang":
                    time.sleep(action[1])  # the sidecar gave up meanwhile: nothing is taken
                    self.close_connection = True
                    return
                if action[0] == "reset":  # RST instead of an answer
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.close_connection = True
                    return
                status = 204 if action[0] == "ok" else action[1]
                if 200 <= status < 300:
                    with app.lock:
                        app.taken.extend(keys)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/records"

    def unique(self) -> set[Key]:
        with self.lock:
            return set(self.taken)

    def duplicates(self) -> int:
        with self.lock:
            return len(self.taken) - len(set(self.taken))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def during(seconds: float, fault: Fault) -> Callable[[list[Key]], Fault]:
    """`fault` for every request from the first one on for `seconds`, then accept."""
    started: list[float] = []

    def decide(keys: list[Key]) -> Fault:
        if not started:
            started.append(time.monotonic())
        return fault if time.monotonic() - started[0] < seconds else ("ok",)

    return decide
