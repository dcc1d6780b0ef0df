"""Delivery failure classes (docs/sidecar.md, "Failure classes") against a real local HTTP
application (tests/faulty_app.py): back-pressure, transient failures within and beyond their
budget, poison only when the application takes other records, bodies bounded in bytes, and the
jittered backoff every retry uses. The same against a real broker:
tests/integration/test_sidecar_faults.py."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_sidecar.backoff import Backoff
from kafka_rebalance_sidecar.delivery import (
    FAILING_ALIKE,
    TRANSIENT,
    AppUnavailable,
    BackPressure,
    Deliverer,
    HttpDelivery,
    InProcessDelivery,
    RetryPolicy,
    TransientFailure,
    batch_json,
    pieces,
)
from kafka_rebalance_sidecar.health import SidecarMetrics
from kafka_rebalance_sidecar.records import Batch, Record
from kafka_rebalance_sidecar.runner import fetch_options

from tests.faulty_app import FaultyApp, Key

ROOT = Path(__file__).resolve().parents[3]


def records(n: int, start: int = 100, size: int = 1) -> tuple[Record, ...]:
    return tuple(Record("t", 0, start + i, b"k", b"v" * size, 1, ()) for i in range(n))


@pytest.fixture
def app() -> Iterator[FaultyApp]:
    server = FaultyApp()
    yield server
    server.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def deliverer(
    app: FaultyApp,
    *,
    budget_s: float = 0.0,
    clock: Clock | None = None,
    timeout_s: float = 5.0,
    metrics: SidecarMetrics | None = None,
    max_batch_bytes: int = 8 << 20,
) -> tuple[Deliverer, list[Record]]:
    dead: list[Record] = []
    d = Deliverer(
        HttpDelivery(app.url, timeout_s=timeout_s),
        retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02,
                          transient_budget_s=budget_s),
        on_poison="dead-letter",
        dead_letter_topic="dlq",
        dead_letter_send=lambda record, topic, error, headers: dead.append(record),
        sleep=lambda s: None,
        clock=clock or Clock(),
        stats=metrics,
        max_batch_bytes=max_batch_bytes,
    )  # fmt: skip
    return d, dead


def failing(offsets: set[int], fault: tuple = ("status", 500)):
    """The fault for any request holding one of `offsets`; accept the others."""

    def decide(keys: list[Key]) -> tuple:
        return fault if any(o in offsets for _t, _p, o in keys) else ("ok",)

    return decide


# ---- jitter --------------------------------------------------------------------------------------


def test_jittered_waits_differ_between_seeds_and_stay_in_the_upper_half_of_the_window():
    backoff = Backoff(0.25, 5.0)
    runs = []
    for seed in (1, 2):
        random.seed(seed)
        runs.append([backoff.wait(n) for n in range(1, 9)])
    assert runs[0] != runs[1]
    for run in runs:
        for n, wait in enumerate(run, start=1):
            window = min(5.0, 0.25 * 2 ** (n - 1))
            assert window / 2 <= wait <= window
    random.seed(1)
    assert [backoff.wait(n) for n in range(1, 9)] == runs[0]  # the seed alone decides


def test_two_retriers_in_one_process_do_not_wait_in_lockstep():
    first, second = Backoff(0.25, 5.0), Backoff(0.25, 5.0)
    waits = [(first.wait(n), second.wait(n)) for n in range(1, 9)]
    assert any(a != b for a, b in waits)
    assert Backoff(0.0, 0.0).wait(3) == 0.0
    with pytest.raises(ValueError):
        Backoff(2.0, 1.0)


# ---- what each fault is --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault, error, fragment",
    [
        (("status", 500), TransientFailure, "HTTP 500"),
        (("status", 502), TransientFailure, "HTTP 502"),
        (("status", 504), TransientFailure, "HTTP 504"),
        (("hang", 1.0), TransientFailure, "timeout"),
        (("reset",), TransientFailure, "closed connection|reset"),
        (("status", 503), AppUnavailable, "HTTP 503"),
        (("status", 429), AppUnavailable, "HTTP 429"),
    ],
)
def test_each_fault_of_a_real_app_has_its_class(app, fault, error, fragment):
    app.fault = lambda keys: fault
    with pytest.raises(error, match=fragment):
        HttpDelivery(app.url, timeout_s=0.3)(Batch("m", 1, records(1)))


def test_a_refused_connection_is_the_app_being_down():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AppUnavailable):
        HttpDelivery(f"http://127.0.0.1:{port}/records", timeout_s=1)(Batch("m", 1, records(1)))


# ---- transient failures: the budget, then bisection with evidence --------------------------------


def test_a_transient_failure_within_the_budget_holds_the_batch_and_loses_nothing(app):
    # a reset on a kept-alive connection is sent once more on a new one: two resets, one failure
    answers = [("status", 500), ("status", 502), ("reset",), ("reset",), ("status", 504)]
    app.fault = lambda keys: answers.pop(0) if answers else ("ok",)
    clock = Clock()
    d, dead = deliverer(app, budget_s=60.0, clock=clock)
    for tries in range(1, 5):
        with pytest.raises(BackPressure) as held:
            d.deliver(Batch("m", 1, records(8)))
        assert held.value.kind == TRANSIENT and held.value.done == 0 and held.value.tries == tries
        assert 0 < held.value.delay_s <= 0.02
        clock.now += 10  # 40 s of failures: within the 60 s budget
    assert d.deliver(Batch("m", 1, records(8))).delivered == 8
    assert dead == [] and sorted(app.unique()) == [("t", 0, o) for o in range(100, 108)]


def test_beyond_the_budget_an_app_failing_every_record_is_back_pressure_not_poison(app):
    metrics = SidecarMetrics("g", "m")
    d, dead = deliverer(app, budget_s=0.0, metrics=metrics)
    assert d.deliver(Batch("m", 1, records(4, start=90))).delivered == 4  # the app was fine
    app.fault = lambda keys: ("status", 500)  # now it fails everything
    for _ in range(3):
        requests = len(app.bodies)
        with pytest.raises(BackPressure) as held:
            d.deliver(Batch("m", 1, records(16)))
        assert held.value.kind == FAILING_ALIKE and held.value.done == 0
        # the batch, then the last record the app took: it failed that too (no bisection)
        assert len(app.bodies) - requests == 2
    assert dead == []
    app.fault = lambda keys: ("ok",)
    assert d.deliver(Batch("m", 1, records(16))).delivered == 16
    assert dead == [] and metrics.bisections._value.get() == 0
    assert metrics.failures_by_class[TRANSIENT]._value.get() == 6


def test_without_any_record_taken_yet_a_failing_app_is_still_not_blamed_on_records(app):
    app.fault = lambda keys: ("hang", 1.0)
    d, dead = deliverer(app, budget_s=0.0, timeout_s=0.2)
    with pytest.raises(BackPressure) as held:
        d.deliver(Batch("m", 1, records(4)))
    assert held.value.kind == FAILING_ALIKE and held.value.done == 0 and dead == []


@pytest.mark.parametrize("fault", [("status", 500), ("hang", 1.0), ("reset",)])
def test_a_record_the_app_keeps_failing_while_it_takes_others_is_poison(app, fault):
    app.fault = failing({105}, fault)
    metrics = SidecarMetrics("g", "m")
    d, dead = deliverer(app, budget_s=0.0, timeout_s=0.2, metrics=metrics)
    outcome = d.deliver(Batch("m", 1, records(10)))
    assert [r.offset for r in dead] == [105] and outcome.delivered == 9
    assert sorted(app.unique()) == [("t", 0, o) for o in range(100, 110) if o != 105]
    assert app.duplicates() == 0
    assert metrics.records_dead_lettered._value.get() == 1
    assert metrics.bisections._value.get() == 1


def test_two_records_the_app_keeps_failing_in_one_batch_are_both_poison(app):
    app.fault = failing({102, 107})
    d, dead = deliverer(app, budget_s=0.0)
    outcome = d.deliver(Batch("m", 1, records(10)))
    assert [r.offset for r in dead] == [102, 107] and outcome.delivered == 8
    assert app.unique() == {("t", 0, o) for o in range(100, 110)} - {("t", 0, 102), ("t", 0, 107)}


def test_a_record_alone_is_judged_by_resending_the_last_record_the_app_took(app):
    d, dead = deliverer(app, budget_s=0.0)
    d.deliver(Batch("m", 1, records(4)))  # 100-103 taken
    app.fault = failing({104})
    outcome = d.deliver(Batch("m", 1, records(1, start=104)))
    assert [r.offset for r in dead] == [104] and outcome.delivered == 0
    assert app.taken.count(("t", 0, 103)) == 2  # the evidence: a duplicate at-least-once allows


def test_a_transient_budget_spent_on_a_batch_is_kept_across_its_holds(app):
    app.fault = failing({100})
    clock = Clock()
    d, dead = deliverer(app, budget_s=30.0, clock=clock)
    for _ in range(3):
        with pytest.raises(BackPressure):
            d.deliver(Batch("m", 1, records(6)))
        clock.now += 11
    outcome = d.deliver(Batch("m", 1, records(6)))  # 33 s: bisected, 100 is poison
    assert [r.offset for r in dead] == [100] and outcome.delivered == 5


def test_an_in_process_handler_raising_transient_failure_is_held_not_refused():
    calls: list[int] = []

    def handler(batch: Batch) -> None:
        calls.append(len(batch.records))
        if len(calls) == 1:
            raise TransientFailure("the database is restarting")

    d = Deliverer(InProcessDelivery(handler), on_poison="skip", sleep=lambda s: None)
    with pytest.raises(BackPressure) as held:
        d.deliver(Batch("m", 1, records(3)))
    assert held.value.kind == TRANSIENT and "database" in held.value.reason
    assert d.deliver(Batch("m", 1, records(3))).delivered == 3 and calls == [3, 3]


# ---- bodies bounded in bytes ---------------------------------------------------------------------


def test_a_batch_goes_in_pieces_under_the_byte_bound_in_order(app):
    d, _dead = deliverer(app, max_batch_bytes=2048)
    batch = Batch("m", 1, (*records(40, size=100), Record("t", 0, 140, None, b"x" * 5000, 1, ())))
    assert d.deliver(batch).delivered == 41
    assert len(app.bodies) > 3
    assert all(size <= 2048 for size in app.bodies[:-1])
    assert app.bodies[-1] > 2048  # the one record larger than the bound went alone
    assert app.taken == [("t", 0, o) for o in range(100, 141)]


def test_back_pressure_in_a_later_piece_counts_the_earlier_pieces_as_done(app):
    app.fault = lambda keys: ("status", 503) if keys[0][2] >= 120 else ("ok",)
    d, _dead = deliverer(app, max_batch_bytes=2048)
    with pytest.raises(BackPressure) as held:
        d.deliver(Batch("m", 1, records(40, size=100)))
    done = held.value.done
    assert 0 < done < 40 and app.taken == [("t", 0, 100 + i) for i in range(done)]
    app.fault = lambda keys: ("ok",)
    assert d.deliver(Batch("m", 1, records(40, size=100)[done:])).delivered == 40 - done
    assert app.taken == [("t", 0, 100 + i) for i in range(40)]


record_strategy = st.builds(
    Record,
    topic=st.text(st.characters(), min_size=1, max_size=20),
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(0, 2**63 - 1),
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=3000),
    timestamp_ms=st.integers(-1, 2**63 - 1),
    headers=st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=50)), max_size=3).map(
        tuple
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=30), st.integers(1024, 20_000))
def test_every_piece_but_a_single_oversized_record_fits_the_bound(recs, bound):
    batch = Batch("member-ü", 2**31, tuple(recs))
    cut = pieces(batch, bound)
    assert tuple(r for p in cut for r in p.records) == batch.records
    for piece in cut:
        assert len(batch_json(piece)) <= bound or len(piece.records) == 1


def test_the_bound_holds_at_the_extremes_of_every_field():
    """Topics of characters json.dumps escapes to 12 bytes, the longest numbers, no headers
    (the one-pass bound) and with headers (the per-record one)."""
    for headers in ((), (("\U0001f600", b"h" * 7),)):
        recs = tuple(
            Record("\U0001f600" * 3, 2**31 - 1, 2**63 - 1, b"k" * i, b"v" * (i * 7), -(2**63),
                   headers)
            for i in range(60)
        )  # fmt: skip
        batch = Batch("\U0001f600", -(2**63), recs)
        exact = len(batch_json(batch))
        for bound in (exact - 1, exact, exact + 1, exact // 3, 1024):
            cut = pieces(batch, bound)
            assert tuple(r for p in cut for r in p.records) == recs
            assert all(len(batch_json(p)) <= bound or len(p.records) == 1 for p in cut)


def test_the_fetch_is_sized_to_the_body_bound():
    assert fetch_options(8 << 20) == {
        "fetch_max_bytes": 8 << 20,
        "max_partition_fetch_bytes": 1 << 20,
    }
    assert fetch_options(64 << 10) == {
        "fetch_max_bytes": 64 << 10,
        "max_partition_fetch_bytes": 64 << 10,
    }


# ---- flags ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--transient-retry-budget", "1 minute"),
        ("--max-batch-bytes", "8MB"),
        ("--deliver-timeout", "0s"),
    ],
)
def test_a_bad_flag_value_exits_2_with_one_line_naming_it(flag, value):
    result = subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "sidecar", "--bootstrap-servers",
         "127.0.0.1:1", "--group", "g", "--topics", "t", "--member", "m", "--assignment", "x",
         "--deliver-to", "http://127.0.0.1:1/", f"{flag}={value}"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("kafka-rebalance sidecar: error: ") and flag in line
