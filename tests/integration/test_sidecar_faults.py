"""Delivery failure classes end to end: `kafka-rebalance sidecar` subprocesses against the real
broker, delivering over HTTP to a real application that fails on purpose (tests/faulty_app.py).

What is counted: the application's accepted records (topic, partition, offset). Lost = produced
records it never accepted and that are not in the dead-letter topic; must be 0. Duplicates (a
record accepted more than once) are allowed by at-least-once and printed, not asserted: a
request the application finished after the sidecar's timeout, or the one resend of the last
accepted record as evidence, delivers a record twice. The transient budget is 2 s and the HTTP
timeout 1 s (flags), so each fault outlasts the budget and the "failing alike" rule is what
keeps the records out of the dead-letter topic, not the budget.
"""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.admin import NewTopic
from kafka_rebalance_dev.demo.cluster import wait_for

from tests.faulty_app import FaultyApp, Key, during
from tests.integration import test_sidecar_kafka
from tests.integration.test_sidecar_kafka import Bench, committed_to

pytestmark = pytest.mark.integration

bench = test_sidecar_kafka.bench  # the fixture: topic, group, documents and sidecar processes

PER_PARTITION = 100
FAST = ("--transient-retry-budget", "2s", "--deliver-timeout", "1s")


def class_counts(port: int) -> dict[str, float]:
    """kafka_rebalance_sidecar_delivery_failures_by_class_total per class."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("kafka_rebalance_sidecar_delivery_failures_by_class_total{"):
            kind = line.split('class="', 1)[1].split('"', 1)[0]
            counts[kind] = float(line.rsplit(" ", 1)[1])
    return counts


def dead_letters(b: Bench, topic: str) -> list[Any]:
    reader = KafkaConsumer(
        topic, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )  # fmt: skip
    try:
        return list(reader)
    finally:
        reader.close()


def run_with(
    b: Bench, app: FaultyApp, member: str, engine: str = "kafka-python"
) -> tuple[Any, str]:
    dead_letter = f"{b.topic}.dlq"
    b.admin.create_topics([NewTopic(dead_letter, 1, 1)])
    b.write(member, 1, list(range(b.partitions)))
    car = b.sidecar(
        member,
        mode="assign",
        deliver_to=app.url,
        extra=(*FAST, "--dead-letter-topic", dead_letter, "--engine", engine),
    )
    wait_for("ready", car.ready, timeout=30)
    b.produce(PER_PARTITION)
    return car, dead_letter


@pytest.mark.parametrize(
    "fault, seconds, engine",
    [
        (("status", 500), 8, "kafka-python"),
        (("hang", 3.0), 12, "kafka-python"),
        (("reset",), 12, "kafka-python"),
        (("status", 500), 8, "librdkafka"),
    ],
    ids=["500-burst-8s", "hang-12s", "resets-12s", "500-burst-8s-librdkafka"],
)
def test_a_transient_fault_longer_than_the_budget_loses_and_dead_letters_nothing(
    bench, fault, seconds, engine
):
    b: Bench = bench(3, f"fault-{engine}")
    app = FaultyApp(during(seconds, fault))
    try:
        car, dead_letter = run_with(b, app, "f-0", engine)
        everything = {(b.topic, p, o) for p in range(3) for o in range(PER_PARTITION)}
        wait_for("every record taken", lambda: app.unique() == everything or None, timeout=60)
        wait_for(
            "committed to the end", lambda: committed_to(b, PER_PARTITION, range(3)), timeout=30
        )
        m = car.metrics()
        classes = class_counts(car.port)
        assert m["records_dead_lettered_total"] == 0 and m["records_skipped_total"] == 0
        assert classes["transient"] >= 3  # the fault was met, and outlasted the 2 s budget
        assert m["failing_alike_total"] >= 1
        assert dead_letters(b, dead_letter) == []
        lost = len(everything - app.unique())
        print(
            f"[{engine}] {fault} for {seconds} s: {len(everything)} produced, lost {lost}, "
            f"dead-lettered 0, duplicates {app.duplicates()}, answers {app.answers}, "
            f"failures by class {classes}, failing-alike holds {m['failing_alike_total']:g}"
        )
        assert lost == 0
        assert car.stop() == 0
    finally:
        app.close()


@pytest.mark.parametrize("engine", ["kafka-python", "librdkafka"])
def test_one_record_answered_500_for_ever_is_dead_lettered_and_its_partition_moves_on(
    bench, engine
):
    """Both assign-mode engines (the delivery classes are the engine's caller; the commit of
    the poison's offset, past it, is each engine's own)."""
    b: Bench = bench(3, f"poison500-{engine}")
    poison: Key = (b.topic, 1, 37)
    app = FaultyApp(lambda keys: ("status", 500) if poison in keys else ("ok",))
    try:
        car, dead_letter = run_with(b, app, "q-0", engine)
        wait_for(
            "every partition committed to the end, the poison's too",
            lambda: committed_to(b, PER_PARTITION, range(3)),
            timeout=60,
        )
        everything = {(b.topic, p, o) for p in range(3) for o in range(PER_PARTITION)}
        dead = dead_letters(b, dead_letter)
        assert [(dict(d.headers)["kafka-rebalance.original.offset"]) for d in dead] == [b"37"]
        headers = dict(dead[0].headers)
        assert headers["kafka-rebalance.original.partition"] == b"1"
        assert b"HTTP 500" in headers["kafka-rebalance.error"]
        assert app.unique() == everything - {poison}
        m = car.metrics()
        assert m["records_dead_lettered_total"] == 1 and m["bisections_total"] >= 1
        print(
            f"[{engine}] one record 500 for ever: {len(everything)} produced, lost 0, "
            f"dead-lettered {len(dead)}, duplicates {app.duplicates()}, answers {app.answers}"
        )
        assert car.stop() == 0
    finally:
        app.close()


def test_group_mode_keeps_its_generation_through_a_500_burst_past_the_budget(bench):
    """Group mode, one member, `max_poll_interval_ms` 5 s: a sidecar that stopped polling while
    the app failed would leave the group (a new generation). Transient retries wait in the hold
    with every partition paused, so the generation stays while the app answers 500 for 8 s."""
    import threading

    from kafka_rebalance_sidecar import DocumentSource, PlanFollowingConsumer, SidecarConfig
    from kafka_rebalance_sidecar.delivery import HttpDelivery, RetryPolicy

    b: Bench = bench(3, "faultgroup")
    dead_letter = f"{b.topic}.dlq"
    b.admin.create_topics([NewTopic(dead_letter, 1, 1)])
    app = FaultyApp(during(8, ("status", 500)))
    b.write("g-0", 1, [0, 1, 2])
    consumer = PlanFollowingConsumer(
        SidecarConfig(
            bootstrap_servers=b.bootstrap, group=b.group, topics=(b.topic,), member="g-0",
            session_timeout_ms=10_000, max_poll_records=50,
            consumer_options={"max_poll_interval_ms": 5_000},
        ),
        DocumentSource(file=str(b.document_path("g-0")), file_interval_s=0.2),
        retry=RetryPolicy(transient_budget_s=2.0),
        dead_letter_topic=dead_letter,
    )  # fmt: skip
    thread = threading.Thread(target=consumer.run, args=(HttpDelivery(app.url, timeout_s=1.0),))
    thread.start()
    try:
        metrics = consumer.metrics
        wait_for("joined", lambda: b.actual() == {"g-0": [0, 1, 2]}, timeout=45)
        wait_for("a generation", lambda: metrics.generation._value.get() >= 0 or None)
        generation = metrics.generation._value.get()
        b.produce(PER_PARTITION)
        wait_for("the app failing", lambda: app.answers.get("status", 0) >= 2, timeout=30)
        degraded = consumer.health.live()[1]["degraded"]
        assert degraded and "HTTP 500" in str(degraded) and consumer.health.ready()[0]
        everything = {(b.topic, p, o) for p in range(3) for o in range(PER_PARTITION)}
        wait_for("every record taken", lambda: app.unique() == everything or None, timeout=60)
        wait_for(
            "committed to the end", lambda: committed_to(b, PER_PARTITION, range(3)), timeout=30
        )
        assert metrics.generation._value.get() == generation  # never left the group
        assert metrics.records_dead_lettered._value.get() == 0
        assert metrics.failing_alike._value.get() >= 1  # the burst outlasted the budget
        print(
            f"group mode, 500 for 8 s: {len(everything)} produced, lost 0, dead-lettered 0, "
            f"duplicates {app.duplicates()}, answers {app.answers}, generation {generation:g} "
            "throughout"
        )
    finally:
        consumer.stop()
        thread.join(30)
        app.close()
    assert not thread.is_alive()
    assert dead_letters(b, dead_letter) == []
