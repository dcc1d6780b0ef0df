"""Delivery to the application: retries, bisection to the poison record, dead-letter/skip, HTTP.

Also the parts of the sidecar a user meets before any broker: the handler spec, the one-line usage
errors of `kafka-rebalance sidecar`, and the probe/metrics endpoints.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kafka_rebalance_dev.devenv.ports import free_ports
from kafka_rebalance_sidecar.delivery import (
    HEADER_ERROR,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
    AppUnavailable,
    BackPressure,
    Deliverer,
    DeliveryRefused,
    HandlerSpecError,
    HttpDelivery,
    InProcessDelivery,
    RetryPolicy,
    TransientFailure,
    batch_json,
    load_handler,
)
from kafka_rebalance_sidecar.health import Health, SidecarMetrics, serve
from kafka_rebalance_sidecar.records import Batch, Record, record

ROOT = Path(__file__).resolve().parents[3]


def records(n: int, poison: set[int] = frozenset(), topic: str = "t") -> tuple[Record, ...]:
    return tuple(
        Record(
            topic,
            i % 3,
            100 + i,
            f"k{i}".encode(),
            b"poison" if i in poison else f"v{i}".encode(),
            1_700_000_000_000 + i,
            (("h", b"x"),),
        )
        for i in range(n)
    )


class Recorder:
    """A handler that refuses any batch containing a poison value; remembers what it accepted."""

    def __init__(self, fail_first: int = 0) -> None:
        self.accepted: list[tuple[Record, ...]] = []
        self.calls = 0
        self.fail_first = fail_first

    def __call__(self, batch: Batch) -> None:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise RuntimeError("not yet")
        if any(r.value == b"poison" for r in batch.records):
            raise ValueError("cannot parse")
        self.accepted.append(batch.records)


class DeadLetters:
    def __init__(self, fail_first: int = 0) -> None:
        self.sent: list[tuple[Record, str, str, list[tuple[str, bytes]]]] = []
        self.fail_first = fail_first
        self.calls = 0

    def __call__(self, record: Record, topic: str, error: str, headers) -> None:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise OSError("broker away")
        self.sent.append((record, topic, error, headers))


def deliverer(sink, *, max_attempts=3, on_poison="dead-letter", dead=None, sleeps=None, stop=None):
    return Deliverer(
        sink,
        retry=RetryPolicy(max_attempts=max_attempts, initial_backoff_s=0.1, max_backoff_s=0.4),
        on_poison=on_poison,
        dead_letter_topic="dlq" if on_poison == "dead-letter" else None,
        dead_letter_send=(dead or DeadLetters()) if on_poison == "dead-letter" else None,
        sleep=(sleeps.append if sleeps is not None else (lambda s: None)),
        stop=stop,
    )


# ---- handler spec --------------------------------------------------------------------------------


def test_load_handler_resolves_a_module_function():
    assert load_handler("kafka_rebalance_dev.demo.ledger:record").__name__ == "record"
    assert load_handler("json:JSONDecoder.decode") is json.JSONDecoder.decode


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("kafka_rebalance_dev.demo.ledger", "expected module:function"),
        (":record", "expected module:function"),
        ("no_such_module_xyz:f", "cannot import"),
        ("kafka_rebalance_dev.demo.ledger:nope", "has no nope"),
        ("kafka_rebalance_dev.demo.ledger:LEDGER_DIR_ENV", "not callable"),
    ],
)
def test_bad_handler_specs_are_refused_with_the_reason(spec, fragment):
    with pytest.raises(HandlerSpecError, match=fragment):
        load_handler(spec)


# ---- retries and poison --------------------------------------------------------------------------


def test_a_good_batch_is_delivered_once():
    sink = Recorder()
    outcome = deliverer(sink).deliver(Batch("m", 3, records(5)))
    assert outcome.delivered == 5 and not outcome.dead_lettered and not outcome.skipped
    assert sink.accepted == [records(5)]


def test_refusals_are_retried_with_jittered_exponential_backoff():
    sink = Recorder(fail_first=3)
    sleeps: list[float] = []
    outcome = deliverer(InProcessDelivery(sink), max_attempts=5, sleeps=sleeps).deliver(
        Batch("m", 1, records(4))
    )
    assert outcome.delivered == 4
    # each wait a point in the upper half of the doubling window 0.1, 0.2, 0.4 (capped at 0.4)
    assert len(sleeps) == 3
    for wait, window in zip(sleeps, (0.1, 0.2, 0.4), strict=True):
        assert window / 2 <= wait <= window
    assert sink.accepted == [records(4)]


def test_bisection_dead_letters_only_the_poison_record_and_keeps_order():
    batch = records(13, poison={6})
    sink = Recorder()
    dead = DeadLetters()
    outcome = deliverer(InProcessDelivery(sink), dead=dead).deliver(Batch("m-0", 7, batch))
    assert [r.offset for r in outcome.dead_lettered] == [106]
    assert outcome.delivered == 12
    delivered = [r for part in sink.accepted for r in part]
    assert delivered == [r for r in batch if r.offset != 106]  # each once, in order
    record, topic, error, headers = dead.sent[0]
    assert record.offset == 106 and topic == "dlq"
    assert "ValueError: cannot parse" in error
    names = dict(headers)
    assert names[HEADER_TOPIC] == b"t"
    assert names[HEADER_PARTITION] == str(record.partition).encode()
    assert names[HEADER_OFFSET] == b"106"
    assert b"cannot parse" in names[HEADER_ERROR]
    assert ("h", b"x") in headers  # the record's own headers are kept


def test_two_poison_records_in_one_batch():
    sink = Recorder()
    dead = DeadLetters()
    outcome = deliverer(InProcessDelivery(sink), dead=dead).deliver(
        Batch("m", 1, records(20, poison={0, 19}))
    )
    assert sorted(r.offset for r in outcome.dead_lettered) == [100, 119]
    assert outcome.delivered == 18
    assert len([r for part in sink.accepted for r in part]) == 18


def test_poison_refused_exactly_max_attempts_times_when_alone():
    sink = Recorder()
    dead = DeadLetters()
    outcome = deliverer(InProcessDelivery(sink), max_attempts=4, dead=dead).deliver(
        Batch("m", 1, records(1, poison={0}))
    )
    assert sink.calls == 4
    assert len(outcome.dead_lettered) == 1


def test_skip_mode_skips_and_sends_nothing():
    sink = Recorder()
    outcome = deliverer(InProcessDelivery(sink), on_poison="skip").deliver(
        Batch("m", 1, records(6, poison={2}))
    )
    assert [r.offset for r in outcome.skipped] == [102]
    assert outcome.delivered == 5 and not outcome.dead_lettered


def test_a_failing_dead_letter_send_is_retried_until_it_lands():
    dead = DeadLetters(fail_first=2)
    outcome = deliverer(InProcessDelivery(Recorder()), dead=dead).deliver(
        Batch("m", 1, records(1, poison={0}))
    )
    assert dead.calls == 3 and len(dead.sent) == 1 and len(outcome.dead_lettered) == 1


def test_an_unreachable_app_is_handed_back_without_counting_attempts():
    calls = {"n": 0}

    def sink(batch: Batch) -> None:
        calls["n"] += 1
        if calls["n"] <= 7:
            raise AppUnavailable("connection refused")

    dead = DeadLetters()
    d = deliverer(sink, max_attempts=2, dead=dead)
    tries = []
    while True:  # the runner's part: hold the batch and offer it again
        try:
            outcome = d.deliver(Batch("m", 1, records(3)))
            break
        except BackPressure as pressure:
            assert pressure.done == 0 and "connection refused" in pressure.reason
            tries.append(pressure.tries)
    assert tries == [1, 2, 3, 4, 5, 6, 7]  # 7 failures > max_attempts, no poison
    assert outcome.delivered == 3 and not dead.sent


def test_an_in_process_handler_may_say_it_is_unavailable():
    calls = {"n": 0}

    def handler(batch: Batch) -> None:
        calls["n"] += 1
        if calls["n"] <= 4:
            raise AppUnavailable("database down", retry_after_s=3)

    dead = DeadLetters()
    d = deliverer(InProcessDelivery(handler), max_attempts=1, dead=dead)
    for _ in range(4):
        with pytest.raises(BackPressure) as pressure:
            d.deliver(Batch("m", 1, records(1)))
        assert pressure.value.delay_s == 3  # the handler's Retry-After
    outcome = d.deliver(Batch("m", 1, records(1)))
    assert outcome.delivered == 1 and not dead.sent and calls["n"] == 5


def test_configuration_errors():
    with pytest.raises(ValueError, match="on-poison"):
        Deliverer(Recorder(), on_poison="ignore")
    with pytest.raises(ValueError, match="dead-letter needs"):
        Deliverer(Recorder(), on_poison="dead-letter")
    with pytest.raises(ValueError, match="max-attempts"):
        Deliverer(Recorder(), on_poison="skip", retry=RetryPolicy(max_attempts=0))


# ---- HTTP delivery against a real local server ---------------------------------------------------


class _App:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.status = 200

        app = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                app.bodies.append(json.loads(self.rfile.read(length)))
                app.headers.append(dict(self.headers))
                self.send_response(app.status)
                self.end_headers()
                self.wfile.write(b"nope" if app.status >= 300 else b"ok")

            def log_message(self, format, *args):
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/records"


@pytest.fixture
def app() -> Iterator[_App]:
    server = _App()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_http_delivery_posts_the_batch_as_json(app):
    HttpDelivery(app.url)(Batch("orders-0", 12, records(2)))
    body = app.bodies[0]
    assert body["member"] == "orders-0" and body["epoch"] == 12
    first = body["records"][0]
    assert (first["topic"], first["partition"], first["offset"]) == ("t", 0, 100)
    assert base64.b64decode(first["value"]) == b"v0"
    assert base64.b64decode(first["key"]) == b"k0"
    assert first["headers"] == [["h", base64.b64encode(b"x").decode()]]
    assert app.headers[0]["X-Kafka-Rebalance-Epoch"] == "12"


def test_http_4xx_is_a_refusal_5xx_transient_and_a_closed_port_is_unavailable(app):
    app.status = 422
    with pytest.raises(DeliveryRefused, match="HTTP 422"):
        HttpDelivery(app.url)(Batch("m", 1, records(1)))
    for status in (500, 502, 504):
        app.status = status
        with pytest.raises(TransientFailure, match=f"HTTP {status}"):
            HttpDelivery(app.url)(Batch("m", 1, records(1)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AppUnavailable):
        HttpDelivery(f"http://127.0.0.1:{port}/records", timeout_s=2)(Batch("m", 1, records(1)))


def test_http_poison_is_bisected_like_in_process(app):
    # The app refuses (422) any batch that holds offset 104.
    refusing = HttpDelivery(app.url)
    seen: list[list[int]] = []

    def sink(batch: Batch) -> None:
        offsets = [r.offset for r in batch.records]
        app.status = 422 if 104 in offsets else 200
        refusing(batch)
        seen.append(offsets)

    dead = DeadLetters()
    outcome = deliverer(sink, dead=dead).deliver(Batch("m", 1, records(9)))
    assert [r.offset for r in outcome.dead_lettered] == [104]
    assert sorted(o for part in seen for o in part) == [100, 101, 102, 103, 105, 106, 107, 108]


# ---- the command line ----------------------------------------------------------------------------

BASE = ["--bootstrap-servers", "127.0.0.1:1", "--group", "g", "--topics", "t"]


def sidecar(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "sidecar", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([*BASE, "--member", "m", "--assignment", "x", "--handler", "nope_mod:f"], "cannot import"),
        ([*BASE, "--member", "m", "--assignment", "x", "--handler", "json"], "module:function"),
        ([*BASE, "--member", "m", "--handler", "json:dumps"], "--assignment"),
        (
            [
                *BASE,
                "--member",
                "m",
                "--assignment",
                "x",
                "--handler",
                "json:dumps",
                "--deliver-to",
                "http://127.0.0.1:1/",
            ],
            "not allowed with",
        ),
        ([*BASE, "--member", "m", "--assignment", "x", "--deliver-to", "ftp://x"], "http://"),
        (
            [
                *BASE,
                "--member",
                "m",
                "--assignment",
                "x",
                "--handler",
                "json:dumps",
                "--apply-mode",
                "manual",
            ],
            "invalid choice",
        ),
        (
            [
                *BASE,
                "--member",
                "m",
                "--assignment",
                "x",
                "--handler",
                "json:dumps",
                "--max-attempts",
                "0",
            ],
            "at least 1",
        ),
        (
            [*BASE, "--member", "m", "--assignment-configmap", "cm", "--handler", "json:dumps"],
            "namespace",
        ),
        ([*BASE, "--assignment", "x", "--handler", "json:dumps"], "--member is required"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, fragment):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("POD_NAME", "POD_NAMESPACE")}
    result = sidecar(*args, env=env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kafka-rebalance sidecar: error: ")
    assert fragment in lines[0]


# ---- probes and metrics --------------------------------------------------------------------------


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_probes_and_metrics_endpoints():
    health = Health(max_age_s=60)
    metrics = SidecarMetrics("g", "m-0")
    health_port, metrics_port = free_ports(2)
    servers = serve(health, metrics, health_port=health_port, metrics_port=metrics_port)
    try:
        probe_port = servers.servers[0].server_address[1]
        metrics_port = servers.servers[1].server_address[1]
        base = f"http://127.0.0.1:{probe_port}"
        assert _get(base + "/healthz")[0] == 200
        assert _get(base + "/readyz")[0] == 503  # the loop has not reported yet
        health.update(running=True, planned=[("t", 0), ("t", 1)], owned=[("t", 0)], epoch=4)
        status, body = _get(base + "/readyz")
        assert status == 503 and json.loads(body)["missing"] == ["t-1"]
        health.update(running=True, planned=[("t", 0)], owned=[("t", 0), ("t", 5)], epoch=4)
        assert _get(base + "/readyz")[0] == 200
        health.update(running=True, planned=None, owned=[], epoch=None)
        assert _get(base + "/readyz")[0] == 200  # no document yet: ready to be given one
        health.stopping()
        assert _get(base + "/readyz")[0] == 503
        metrics.delivered(7)
        metrics.dead_lettered(1)
        metrics.document_epoch.set(4)
        status, text = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200
        assert (
            b'kafka_rebalance_sidecar_records_delivered_total{group="g",member="m-0"} 7.0' in text
        )
        assert (
            b'kafka_rebalance_sidecar_records_dead_lettered_total{group="g",member="m-0"} 1.0'
            in text
        )
        assert b'kafka_rebalance_sidecar_document_epoch{group="g",member="m-0"} 4.0' in text
        assert _get(f"http://127.0.0.1:{metrics_port}/healthz")[0] == 404
    finally:
        servers.close()


def test_liveness_fails_when_the_loop_stops_beating():
    health = Health(max_age_s=0.0)
    assert health.live()[0] is False
    health = Health(max_age_s=30)
    health.beat()
    assert health.live()[0] is True


def test_port_zero_disables_an_endpoint():
    servers = serve(Health(), SidecarMetrics("g", "m"), health_port=0, metrics_port=0)
    assert servers.servers == []


# ---- the HTTP connection is kept ----------------------------------------------------------------


class _KeepAliveApp:
    """An HTTP/1.1 application that notes which connection each batch came on; it can drop the
    connection after answering, as a server closing an idle keep-alive connection does."""

    def __init__(self) -> None:
        self.connections: list[int] = []  # the client's port per batch: one per TCP connection
        self.close_after_answer = False
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                # not id(self.connection): a closed socket's id can be handed to the next one
                app.connections.append(self.client_address[1])
                self.send_response(204)
                self.end_headers()
                if app.close_after_answer:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True

            def log_message(self, format, *args):
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/records?x=1"


@pytest.fixture
def keep_alive_app() -> Iterator[_KeepAliveApp]:
    server = _KeepAliveApp()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_http_batches_share_one_connection(keep_alive_app):
    delivery = HttpDelivery(keep_alive_app.url)
    for epoch in range(5):
        delivery(Batch("m", epoch, records(3)))
    assert len(keep_alive_app.connections) == 5
    assert len(set(keep_alive_app.connections)) == 1
    delivery.close()


def test_a_connection_the_app_dropped_is_replaced_without_a_failure(keep_alive_app):
    delivery = HttpDelivery(keep_alive_app.url)
    keep_alive_app.close_after_answer = True
    delivery(Batch("m", 1, records(2)))
    time.sleep(0.2)  # the app has closed its end of the kept connection
    delivery(Batch("m", 2, records(2)))  # not AppUnavailable: sent again on a new connection
    assert len(keep_alive_app.connections) == 2
    assert len(set(keep_alive_app.connections)) == 2


def test_the_http_body_is_unchanged_by_the_fast_encoding():
    batch = Batch("m", 3, (*records(2), Record("t", 1, 7, None, None, 5, (("n", b""),))))
    body = json.loads(batch_json(batch))
    assert body["records"][2] == {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp_ms": 5,
        "key": None,
        "value": None,
        "headers": [["n", ""]],
    }
    assert body["records"][0]["headers"] == [["h", base64.b64encode(b"x").decode()]]


# ---- records from kafka-python -------------------------------------------------------------------


def test_the_fast_record_equals_the_constructed_one():
    import dataclasses

    made = record("t", 1, 2, b"k", b"v", 3, (("h", b"x"),))
    built = Record("t", 1, 2, b"k", b"v", 3, (("h", b"x"),))
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.offset = 9  # type: ignore[misc]


def test_to_batch_orders_partitions_and_fills_missing_header_values():
    from kafka import TopicPartition
    from kafka.consumer.fetcher import ConsumerRecord
    from kafka_rebalance_sidecar.runner import to_batch

    def consumed(partition: int, offset: int, headers: list) -> ConsumerRecord:
        return ConsumerRecord(
            "t", partition, 0, offset, 10 + offset, 0, b"k", b"v", headers, None, 1, 1, -1
        )

    polled = {
        TopicPartition("t", 2): [consumed(2, 5, []), consumed(2, 6, [("a", None)])],
        TopicPartition("t", 0): [consumed(0, 9, [("b", b"y")])],
    }
    batch = to_batch("m", 4, polled)
    assert (batch.member, batch.epoch) == ("m", 4)
    assert batch.records == (
        Record("t", 0, 9, b"k", b"v", 19, (("b", b"y"),)),
        Record("t", 2, 5, b"k", b"v", 15, ()),
        Record("t", 2, 6, b"k", b"v", 16, (("a", b""),)),
    )
    # built inline, yet the same frozen value the constructor makes
    first = batch.records[0]
    assert hash(first) == hash(Record("t", 0, 9, b"k", b"v", 19, (("b", b"y"),)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.offset = 10  # type: ignore[misc]


def test_the_http_body_is_what_json_dumps_writes():
    def reference(batch: Batch) -> bytes:
        def b64(data):
            return None if data is None else base64.b64encode(data).decode("ascii")

        records = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "offset": r.offset,
                "timestamp_ms": r.timestamp_ms,
                "key": b64(r.key),
                "value": b64(r.value),
                "headers": [[k, b64(v)] for k, v in r.headers],
            }
            for r in batch.records
        ]
        document = {"member": batch.member, "epoch": batch.epoch, "records": records}
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    odd = (
        Record('tö"pic\n', 0, 1, b"\x00\xff", b"", -1, (("é\\", b"\x01"), ("n", b""))),
        Record("t", 2, 2**40, None, None, 0, ()),
        Record('tö"pic\n', 0, 2, b"k", bytes(range(256)), 7, ()),
    )
    for batch in (
        Batch("orders-0", 12, records(7)),
        Batch('m"é', -1, odd),
        Batch("m", 0, ()),
    ):
        assert batch_json(batch) == reference(batch)
