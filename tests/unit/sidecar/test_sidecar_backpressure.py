"""Back-pressure is not poison: each class of the application's answer over real HTTP (a stdlib
server in a thread is the peer), the Retry-After arithmetic, the response body cap, the shared
token, and the runner holding a batch without fetching more (against an in-memory consumer; the
broker-facing behaviour is in tests/integration/test_sidecar_kafka.py)."""

from __future__ import annotations

import email.utils
import json
import logging
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka_rebalance_sidecar.delivery import (
    MAX_RESPONSE_BYTES,
    AppUnavailable,
    BackPressure,
    Deliverer,
    DeliveryRefused,
    HttpDelivery,
    RetryPolicy,
    retry_after_seconds,
)
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.health import Health, SidecarMetrics
from kafka_rebalance_sidecar.records import Batch, Record
from kafka_rebalance_sidecar.runner import Runner, SidecarConfig
from kafka_rebalance_sidecar.token_file import TokenFile, TokenFileError


def records(n: int, partition: int = 0) -> tuple[Record, ...]:
    return tuple(Record("t", partition, 100 + i, b"k", b"v", 1, ()) for i in range(n))


# ---- a real HTTP peer whose answers the test sets ------------------------------------------------


class App:
    """Answers each POST with the next scripted (status, headers, body), then 204 for ever;
    remembers the requests' headers and which connection each came on."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str], bytes]] = []
        self.requests: list[dict[str, str]] = []
        self.connections: list[int] = []
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                app.requests.append(dict(self.headers))
                app.connections.append(self.client_address[1])
                status, headers, body = app.script.pop(0) if app.script else (204, {}, b"")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if status != 204:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the sidecar stopped reading a long body: expected
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/records"

    def answer(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        self.script.append((status, headers or {}, body))


@pytest.fixture
def app() -> Iterator[App]:
    server = App()
    yield server
    server.server.shutdown()
    server.server.server_close()


def deliverer(sink: Any) -> Deliverer:
    return Deliverer(
        sink,
        retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.1, max_backoff_s=0.4),
        on_poison="skip",
        sleep=lambda s: None,
    )


# ---- Retry-After ---------------------------------------------------------------------------------


def test_retry_after_seconds_and_http_date_forms():
    now = 1_800_000_000.0
    assert retry_after_seconds("7", now) == 7
    assert retry_after_seconds(" 0 ", now) == 0
    date = email.utils.formatdate(now + 42, usegmt=True)  # "Fri, 15 Jan 2027 08:00:42 GMT"
    assert retry_after_seconds(date, now) == pytest.approx(42)
    assert retry_after_seconds(email.utils.formatdate(now - 60, usegmt=True), now) == 0
    for unreadable in (None, "", "soon", "-5", "1.5", "Fri, 99 Foo 2027"):
        assert retry_after_seconds(unreadable, now) is None


def test_the_delay_honours_retry_after_within_bounds_and_jitters_without_it():
    policy = RetryPolicy(initial_backoff_s=0.1, max_backoff_s=5.0, max_retry_after_s=60.0)
    assert policy.pressure_delay(1, 7.0) == 7.0
    assert policy.pressure_delay(1, 0.0) == 0.1  # "now" would spin: at least the first backoff
    assert policy.pressure_delay(1, 3600.0) == 60.0  # an hour is capped
    # no Retry-After: a point in the upper half of the doubling backoff, capped at 5 s
    for tries, window in ((1, 0.1), (3, 0.4), (50, 5.0)):
        waits = {policy.pressure_delay(tries, None) for _ in range(20)}
        assert len(waits) > 1  # jittered
        assert all(window / 2 <= w <= window for w in waits)


# ---- each class of answer, over HTTP -------------------------------------------------------------


def test_503_with_retry_after_is_back_pressure_with_that_delay(app):
    app.answer(503, {"Retry-After": "7"}, b"busy")
    d = deliverer(HttpDelivery(app.url))
    with pytest.raises(BackPressure) as pressure:
        d.deliver(Batch("m", 1, records(4)))
    assert pressure.value.delay_s == 7 and pressure.value.done == 0
    assert "HTTP 503: busy" in pressure.value.reason
    assert d.deliver(Batch("m", 1, records(4))).delivered == 4  # the same batch, later


def test_503_with_an_http_date_retry_after(app):
    app.answer(503, {"Retry-After": email.utils.formatdate(usegmt=True)})
    with pytest.raises(AppUnavailable) as unavailable:
        HttpDelivery(app.url)(Batch("m", 1, records(1)))
    assert unavailable.value.retry_after_s is not None and unavailable.value.retry_after_s <= 1


@pytest.mark.parametrize("status", [429, 408])
def test_429_and_408_are_back_pressure_never_poison(app, status):
    for _ in range(10):  # many more than max_attempts (2)
        app.answer(status)
    d = deliverer(HttpDelivery(app.url))
    tries = 0
    while True:
        try:
            outcome = d.deliver(Batch("m", 1, records(3)))
            break
        except BackPressure as pressure:
            tries += 1
            assert pressure.tries == tries and pressure.done == 0
            assert 0.05 <= pressure.delay_s <= 0.4  # jittered backoff: no Retry-After given
    assert tries == 10
    assert outcome.delivered == 3 and not outcome.skipped and not outcome.dead_lettered


def test_connection_refused_is_back_pressure():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = deliverer(HttpDelivery(f"http://127.0.0.1:{port}/records", timeout_s=2))
    with pytest.raises(BackPressure) as pressure:
        d.deliver(Batch("m", 1, records(2)))
    assert pressure.value.done == 0 and "127.0.0.1" in pressure.value.reason


def test_a_redirect_is_a_configuration_error_logged_once_and_nothing_is_lost(app, caplog):
    for _ in range(3):
        app.answer(308, {"Location": "/records/"})
    d = deliverer(HttpDelivery(app.url))
    with caplog.at_level(logging.ERROR, logger="kafka_rebalance_sidecar.delivery"):
        for _ in range(3):
            with pytest.raises(BackPressure, match="configuration error"):
                d.deliver(Batch("m", 1, records(2)))
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "redirect to /records/" in errors[0].getMessage()
    assert d.deliver(Batch("m", 1, records(2))).delivered == 2
    assert len(app.requests) == 4  # the redirect was never followed


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_other_answers_are_refusals_and_end_in_poison_handling(app, status):
    for _ in range(2):  # max_attempts of the single record
        app.answer(status, body=b"no")
    outcome = deliverer(HttpDelivery(app.url)).deliver(Batch("m", 1, records(1)))
    assert [r.offset for r in outcome.skipped] == [100]
    with pytest.raises(DeliveryRefused, match=f"HTTP {status}: no"):
        app.answer(status, body=b"no")
        HttpDelivery(app.url)(Batch("m", 1, records(1)))


def test_back_pressure_in_the_middle_of_bisection_keeps_the_done_prefix(app):
    """The left half is finished before the right half starts, so what is done is a prefix."""
    app.answer(422)  # the whole batch of 8, twice (max_attempts 2)
    app.answer(422)
    # left half [100..103] accepted (204), right half [104..107] meets a busy app
    app.answer(204)
    app.answer(503, {"Retry-After": "2"})
    d = deliverer(HttpDelivery(app.url))
    batch = Batch("m", 1, records(8))
    with pytest.raises(BackPressure) as pressure:
        d.deliver(batch)
    assert pressure.value.done == 4 and pressure.value.delay_s == 2
    rest = Batch("m", 1, batch.records[pressure.value.done :])
    assert d.deliver(rest).delivered == 4


# ---- the response body cap -----------------------------------------------------------------------


def test_a_long_answer_is_read_only_up_to_the_cap(app):
    huge = b"x" * (8 * MAX_RESPONSE_BYTES)
    app.answer(200, body=huge)
    app.answer(422, body=huge)
    delivery = HttpDelivery(app.url)
    status, _headers, data = delivery._post(b"{}", {"Content-Type": "application/json"})
    assert status == 200 and len(data) == MAX_RESPONSE_BYTES
    assert delivery._connection is None  # the unread rest: the connection is not reused
    with pytest.raises(DeliveryRefused) as refused:
        delivery(Batch("m", 1, records(1)))
    assert len(str(refused.value)) < 300  # only the start of a body is ever shown
    delivery(Batch("m", 1, records(1)))  # and the next request goes through
    assert len(set(app.connections)) == 3


def test_a_short_answer_keeps_the_connection(app):
    app.answer(200, body=b"ok")
    delivery = HttpDelivery(app.url)
    delivery(Batch("m", 1, records(1)))
    delivery(Batch("m", 2, records(1)))
    assert len(app.connections) == 2 and len(set(app.connections)) == 1


# ---- the shared token ----------------------------------------------------------------------------


def test_the_token_is_sent_as_a_bearer_header_and_follows_its_file(app, tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    clock = {"now": 0.0}
    token = TokenFile(str(path), check_interval_s=1.0, clock=lambda: clock["now"])
    delivery = HttpDelivery(app.url, token=token)
    delivery(Batch("m", 1, records(1)))
    # rotation: a new file swapped in, as the kubelet does with a Secret volume's symlink
    new = tmp_path / "token.new"
    new.write_text("rotated-2")
    os.replace(new, path)
    delivery(Batch("m", 1, records(1)))  # within the check interval: the old token still
    clock["now"] = 1.5
    delivery(Batch("m", 1, records(1)))
    path.unlink()  # a rotation caught half-way: the last good token is kept
    clock["now"] = 3.0
    delivery(Batch("m", 1, records(1)))
    sent = [r.get("Authorization") for r in app.requests]
    assert sent == ["Bearer s3cret", "Bearer s3cret", "Bearer rotated-2", "Bearer rotated-2"]


def test_no_token_no_header(app):
    HttpDelivery(app.url)(Batch("m", 1, records(1)))
    assert "Authorization" not in app.requests[0]


@pytest.mark.parametrize(
    "content, fragment",
    [(None, "cannot read"), ("", "empty"), ("  \n", "empty"), ("two words", "visible ASCII")],
)
def test_an_unusable_token_file_is_refused_at_start(tmp_path, content, fragment):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(TokenFileError, match=fragment) as error:
        TokenFile(str(path))
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_a_401_is_held_like_back_pressure_not_blamed_on_the_records(app):
    app.answer(401, {"WWW-Authenticate": "Bearer"}, b"missing or wrong token")
    d = deliverer(HttpDelivery(app.url))
    with pytest.raises(BackPressure, match="token"):
        d.deliver(Batch("m", 1, records(1)))
    assert d.deliver(Batch("m", 1, records(1))).delivered == 1


# ---- the runner holds the batch: nothing more is fetched, what was done is committed -------------


class FakeConsumer:
    """Two partitions with endless records; polls hand out `per_poll` records of each."""

    def __init__(self, per_poll: int = 3) -> None:
        self.next = {0: 0, 1: 0}
        self.per_poll = per_poll
        self.polls = 0
        self.commits: list[dict[int, int]] = []

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        self.polls += 1
        out = {}
        for p in (0, 1):
            start = self.next[p]
            self.next[p] = start + self.per_poll
            out[TopicPartition("t", p)] = [
                ConsumerRecord("t", p, 0, o, 0, 0, None, b"v", [], None, -1, 1, -1)
                for o in range(start, start + self.per_poll)
            ]
        return out

    def commit(self, offsets: dict[TopicPartition, Any], timeout_ms: int) -> None:
        self.commits.append({tp.partition: o.offset for tp, o in offsets.items()})

    def close(self, autocommit: bool) -> None:
        pass


class ScriptedSink:
    """Raises the scripted exceptions (None: accept), then accepts; remembers what it got."""

    def __init__(self, *script: Exception | None) -> None:
        self.script = list(script)
        self.got: list[tuple[tuple[int, int], ...]] = []

    def __call__(self, batch: Batch) -> None:
        outcome = self.script.pop(0) if self.script else None
        if outcome is not None:
            raise outcome
        self.got.append(tuple((r.partition, r.offset) for r in batch.records))


def make_runner(sink: ScriptedSink) -> tuple[Runner, FakeConsumer, Health, SidecarMetrics]:
    config = SidecarConfig(
        "127.0.0.1:1", "g", ("t",), "m-0", commit_interval_ms=0, max_poll_records=100
    )
    retry = RetryPolicy(max_attempts=2, initial_backoff_s=0.0)  # delays of 0: no clock in tests
    deliverer = Deliverer(sink, retry=retry, on_poison="skip", sleep=lambda s: None)
    health, metrics = Health(), SidecarMetrics("g", "m-0")
    r = Runner(
        config, AssignmentTracker(group="g", member="m-0"), deliverer, health=health,
        metrics=metrics,
    )  # fmt: skip
    consumer = FakeConsumer()
    r.consumer = consumer  # type: ignore[assignment]
    r._idle = lambda seconds: None  # type: ignore[method-assign]
    return r, consumer, health, metrics


def test_the_runner_holds_the_batch_and_fetches_nothing_until_it_is_delivered():
    busy = AppUnavailable("HTTP 503", retry_after_s=0.0)
    sink = ScriptedSink(busy, busy, busy)
    r, consumer, health, metrics = make_runner(sink)
    for _ in range(3):
        r.consume_once(lambda: 1)
        assert consumer.polls == 1  # one batch fetched, then held: no new fetch
        assert health.live()[1]["degraded"] and "HTTP 503" in str(health.ready()[1]["degraded"])
        assert metrics.holding._value.get() == 1
    assert consumer.commits == []  # nothing delivered, nothing committed
    r.consume_once(lambda: 1)  # the app is back: the same batch
    assert sink.got == [((0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2))]
    assert consumer.commits == [{0: 3, 1: 3}]
    assert health.live()[1]["degraded"] is None and metrics.holding._value.get() == 0
    assert metrics.backpressure._value.get() == 3
    r.consume_once(lambda: 1)  # fetching resumed
    assert consumer.polls == 2 and consumer.commits[-1] == {0: 6, 1: 6}


def test_what_was_done_before_the_app_pushed_back_is_committed_and_the_rest_held():
    # whole batch refused twice -> bisect: left half (partition 0) accepted, right half busy
    sink = ScriptedSink(DeliveryRefused("422"), DeliveryRefused("422"), None, AppUnavailable("x"))
    r, consumer, _health, _metrics = make_runner(sink)
    r.consume_once(lambda: 1)
    assert consumer.commits == [{0: 3}]  # partition 0 done, partition 1 held
    r.consume_once(lambda: 1)
    assert sink.got[-1] == ((1, 0), (1, 1), (1, 2))
    assert consumer.commits[-1] == {1: 3} and consumer.polls == 1


def test_held_records_of_a_partition_that_left_are_dropped():
    sink = ScriptedSink(AppUnavailable("x", retry_after_s=0.0))
    r, consumer, _health, _metrics = make_runner(sink)
    r.consume_once(lambda: 1)
    assert r.held_from(TopicPartition("t", 1)) == 0
    r.drop_held([TopicPartition("t", 1)])  # revoked meanwhile (listener, or a new document)
    assert r.held_from(TopicPartition("t", 1)) is None
    r.consume_once(lambda: 1)
    assert sink.got == [((0, 0), (0, 1), (0, 2))]
    assert consumer.commits == [{0: 3}]  # partition 1 is not committed past what was delivered


def test_stopping_while_held_commits_only_what_was_delivered():
    sink = ScriptedSink(AppUnavailable("x", retry_after_s=0.0))
    r, consumer, _health, _metrics = make_runner(sink)
    r.consume_once(lambda: 1)
    r._close()
    assert consumer.commits == []


def test_health_shows_the_reason_without_changing_the_status():
    health = Health()
    health.update(running=True, planned=None, owned=[], epoch=1)
    health.degraded("application not taking records: HTTP 503")
    live, ready = health.live(), health.ready()
    assert live[0] and ready[0]  # alive, and must stay ready: unready pods lose partitions
    assert json.loads(json.dumps(live[1]))["degraded"].endswith("HTTP 503")


def test_the_cli_refuses_a_token_file_without_http(tmp_path: Path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "sidecar", "--bootstrap-servers",
         "127.0.0.1:1", "--group", "g", "--topics", "t", "--member", "m", "--assignment", "x",
         "--handler", "json:dumps", "--deliver-token-file", str(tmp_path / "t")],
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "kafka-rebalance sidecar: error: --deliver-token-file needs --deliver-to "
        "(a token is sent over HTTP)"
    ]
    result = subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "sidecar", "--bootstrap-servers",
         "127.0.0.1:1", "--group", "g", "--topics", "t", "--member", "m", "--assignment", "x",
         "--deliver-to", "http://127.0.0.1:1/", "--deliver-token-file", str(tmp_path / "t")],
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # fmt: skip
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "cannot read" in line and str(tmp_path / "t") in line
