"""/readyz: alive and every readiness gate open (the injection webhook's: a replica joins the
webhook's Service only once it serves it); /healthz ignores the gates."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

from kafka_rebalance_operator import health


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_ready_only_once_the_webhook_serves() -> None:
    serving = threading.Event()
    server = health.serve(
        health.Liveness(60), 0, "127.0.0.1", ready=lambda: {"webhook": serving.is_set()}
    )
    port = server.server_address[1]
    try:
        status, body = _get(port, "/readyz")
        assert status == 503 and body["ready"] == {"webhook": False}
        assert _get(port, "/healthz")[0] == 200
        serving.set()
        status, body = _get(port, "/readyz")
        assert status == 200 and body["ready"] == {"webhook": True}
    finally:
        server.shutdown()
        server.server_close()


def test_without_gates_ready_is_alive() -> None:
    live = health.Liveness(60)
    live.woke("ns/stuck", now=0.0)  # a timer that has not woken since: not alive
    server = health.serve(live, 0, "127.0.0.1")
    port = server.server_address[1]
    try:
        assert _get(port, "/readyz")[0] == 503
        assert _get(port, "/healthz")[0] == 503
        live.forget("ns/stuck")
        status, body = _get(port, "/readyz")
        assert status == 200 and body["ready"] == {}
    finally:
        server.shutdown()
        server.server_close()
