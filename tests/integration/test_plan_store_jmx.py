"""The broker plug-in's refusals are visible as JMX attributes, not only as log lines
(docs/security.md, "Refusals"): the `kafka_plans` broker (the plug-in loaded, signed records
required) reads records written straight to its plan topic, and its MBean
`kafka.rebalance:type=PlanStore,topic=kafka-rebalance-plans` counts each refusal under its
reason. The broker runs without a remote JMX port: `java/PlanStoreJmx.java` attaches to its pid
(the JDK's attach API) and reads the MBean as a JMX console would. Marked `kip848`."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka_rebalance_common.wire import plan_record
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.devenv import java_classes, kafka_broker
from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.toolchain import Toolchain

pytestmark = [pytest.mark.integration, pytest.mark.kip848]

READER = Path(__file__).parent / "java" / "PlanStoreJmx.java"
PLAN_TOPIC = "kafka-rebalance-plans"
MBEAN = f"kafka.rebalance:type=PlanStore,topic={PLAN_TOPIC}"


def _read_mbean(tools: Toolchain, pid: int) -> dict[str, int]:
    """The plan store MBean's attributes in the broker JVM `pid`."""
    classes = java_classes.compiled(READER, "", tools.java_classes_cache)
    result = subprocess.run(
        [java_binary(), "-cp", str(classes), "PlanStoreJmx", str(pid)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    values: dict[str, int] = {}
    for line in result.stdout.splitlines():
        name, attribute, value = line.rsplit(" ", 2)
        if name == MBEAN:
            values[attribute] = int(value)
    return values


def test_refused_plan_records_are_counted_per_reason_in_the_brokers_jmx(
    kafka_plans: Any, plan_keys: Path, tools: Toolchain
) -> None:
    node = kafka_plans.cluster.nodes[0]
    pid = kafka_plans.supervisor.record(kafka_broker.process_name(kafka_plans.cluster, node)).pid
    started = time.monotonic()
    before = _read_mbean(tools, pid)
    assert before, f"no MBean {MBEAN} in the broker"
    for reason in ("stale-epoch", "other-incarnation", "unauthenticated", "no-key", "malformed"):
        assert f"refused-{reason}-total" in before, sorted(before)

    key = plan_record.load_keys(plan_keys)[0]
    group = f"jmx-{uuid.uuid4().hex[:8]}"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    plan = {"pod-0": {"orders": [0, 1]}}

    def value(epoch: int, incarnation: str) -> bytes:
        return plan_record.encode_plan(
            group, epoch, f"h{epoch}", stamp, plan, incarnation=incarnation, member_ids=["m-0"]
        )

    def signed(raw: bytes, secret: bytes = key) -> list[tuple[str, bytes]]:
        return [(plan_record.SIGNATURE_HEADER, plan_record.sign(secret, group, raw))]

    records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]] = [
        (group.encode(), value(5, "uid-a"), signed(value(5, "uid-a"))),  # held
        (group.encode(), value(4, "uid-a"), signed(value(4, "uid-a"))),  # stale-epoch
        (group.encode(), value(9, "uid-b"), signed(value(9, "uid-b"))),  # other-incarnation
        (group.encode(), value(6, "uid-a"), signed(value(6, "uid-a"), b"a-key-nobody-shares")),
        (None, value(6, "uid-a"), signed(value(6, "uid-a"))),  # no-key
        (group.encode(), b"{not json", signed(b"{not json")),  # malformed (drops the plan)
    ]
    producer = KafkaProducer(bootstrap_servers=kafka_plans.bootstrap_servers)
    try:
        for record_key, raw, headers in records:
            producer.send(PLAN_TOPIC, key=record_key, value=raw, headers=headers).get(10)
    finally:
        producer.close(5)

    expected = {
        "refused-stale-epoch-total": 1,
        "refused-other-incarnation-total": 1,
        "refused-unauthenticated-total": 1,
        "refused-no-key-total": 1,
        "refused-malformed-total": 1,
        "refused-total": 5,
    }

    def counted() -> dict[str, int] | None:
        now = _read_mbean(tools, pid)
        delta = {name: now[name] - before.get(name, 0) for name in expected}
        return delta if all(delta[n] >= expected[n] for n in expected) else None

    delta = wait_for("the plug-in to count the refusals", counted, 60, 1.0)
    took = time.monotonic() - started
    # in a shared session other tests' records may add to the counts, never take from them
    print(f"\nJMX deltas after 6 records (1 held, 5 refused): {delta}; {took:.1f} s")
