"""Whole polls (`reconcile.poll`) against a real Kafka broker, with the ConfigMaps kept in memory.

This checks the poll's sequencing with real offsets quickly and without a control plane; the
same behaviour through the API server, kopf and the chart's RBAC is in test_operator_k8s.py.
Only the ConfigMap port is in memory (tests/operator_ports.py); Kafka, the clock, metrics and
telemetry are the operator's real ports.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from typing import Any

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_operator.adapters import PrometheusMetrics, SystemClock
from kafka_rebalance_operator.kafka.clients import SharedObservers
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver
from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.telemetry import JsonLinesSink, Telemetry

from tests.operator_ports import MemoryConfigMaps, MemorySecrets, MemoryStatus
from tests.operator_ports import Policy as _Policy

pytestmark = pytest.mark.integration


def real_ports(store: MemoryConfigMaps, telemetry: Telemetry | None = None) -> Ports:
    return Ports(
        configmaps=store,
        status=MemoryStatus(),
        secrets=MemorySecrets(),
        kafka=SharedObservers(KafkaObserver),
        clock=SystemClock(),
        metrics=PrometheusMetrics(),
        telemetry=telemetry or Telemetry(),
    )


class Policy(_Policy):
    def __init__(
        self,
        spec: dict[str, Any],
        members: list[PodSummary],
        store: MemoryConfigMaps,
        telemetry: Telemetry | None = None,
    ) -> None:
        super().__init__(spec, members, real_ports(store, telemetry))


def pods(count: int) -> list[PodSummary]:
    return [PodSummary(f"c-{i}", {"app": "c"}, "Running", True) for i in range(count)]


def topic_with(kafka: str, partitions: int) -> str:
    topic = f"poll-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    return topic


def spec_for(kafka: str, topic: str, **extra: Any) -> dict[str, Any]:
    spec = {
        "groupId": f"group-{topic}",
        "kafka": {"bootstrapServers": kafka},
        "topics": [topic],
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "strategy": "lag-aware",
        "load": {"model": "lag"},
        "rebalance": {"mode": "enforce", "cooldown": "0s", "minImprovement": 0.05},
    }
    spec.update(extra)
    return spec


def produce(kafka: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka, linger_ms=20)
    for partition, count in per_partition.items():
        for _ in range(count):
            producer.send(topic, value=b"x", partition=partition)
    producer.flush(60)
    producer.close()


def test_enforce_plans_replans_on_skew_and_stays_quiet(kafka, tmp_path) -> None:
    store = MemoryConfigMaps()
    topic = topic_with(kafka, 6)
    telemetry = tmp_path / "rows.jsonl"
    sink = Telemetry([JsonLinesSink(str(telemetry))])
    policy = Policy(spec_for(kafka, topic), pods(3), store, sink)

    assert policy.poll().action == "apply"
    first = store.documents()
    assert sorted(p for d in first.values() for p in d["partitions"][topic]) == list(range(6))
    assert policy.status["epoch"] == 1 and policy.status["members"] == 3
    assert policy.condition("Ready")["status"] == "True"
    assert [e[1] for e in policy.events] == ["PlanApplied"]

    writes = len(store.writes)
    for _ in range(10):
        assert policy.poll().action == "noop"
    assert len(store.writes) == writes  # an unchanged group writes nothing

    heavy = first["c-0"]["partitions"][topic]
    produce(kafka, topic, {p: (2000 if p in heavy else 10) for p in range(6)})
    outcome = policy.poll()
    assert outcome.action == "apply" and policy.status["epoch"] == 2
    rows = [json.loads(line) for line in telemetry.read_text().splitlines()]
    plan = [r for r in rows if r.get("kind") == "plan"][-1]
    assert plan["epoch"] == 2
    assert plan["max_load_ratio_after"] < plan["max_load_ratio_before"]
    assert policy.status["maxLoadRatio"] == plan["max_load_ratio_after"]
    assert policy.poll().action == "noop"

    # a restarted operator (fresh memory) keeps the epoch and rewrites nothing
    restarted = Policy(policy.spec, policy.pods, store, sink)
    restarted.status = dict(policy.status)
    writes = len(store.writes)
    assert restarted.poll().action == "noop"
    assert restarted.status["epoch"] == 2 and len(store.writes) == writes

    # a pod leaves: its ConfigMap goes, its partitions are planned onto the others
    policy.pods = pods(2)
    assert policy.poll().action == "apply"
    docs = store.documents()
    assert set(docs) == {"c-0", "c-1"} and "-pol.c-2" in store.writes
    assert sorted(p for d in docs.values() for p in d["partitions"][topic]) == list(range(6))


def test_unreachable_kafka_stalls_and_changes_nothing(kafka) -> None:
    store = MemoryConfigMaps()
    topic = topic_with(kafka, 3)
    policy = Policy(spec_for(kafka, topic), pods(2), store)
    policy.poll()
    epoch, writes = policy.status["epoch"], len(store.writes)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    policy.spec = {**policy.spec, "kafka": {"bootstrapServers": f"127.0.0.1:{port}"}}
    outcome = policy.poll()
    assert outcome.action == "failed" and not outcome.succeeded
    stalled = policy.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "KafkaUnreachable"
    assert policy.condition("Ready")["status"] == "False"
    assert policy.status["epoch"] == epoch and len(store.writes) == writes
    assert policy.events[-1][:2] == ("Warning", "KafkaUnreachable")
    policy.poll()
    assert [e[1] for e in policy.events].count("KafkaUnreachable") == 1  # once, not every poll


def test_manual_approval_applies_only_the_approved_hash(kafka) -> None:
    store = MemoryConfigMaps()
    topic = topic_with(kafka, 4)
    spec = spec_for(kafka, topic)
    spec["rebalance"] = {**spec["rebalance"], "approval": "Manual"}
    policy = Policy(spec, pods(2), store)
    assert policy.poll().action == "propose"
    proposal = policy.status["proposal"]
    assert policy.condition("Ready")["reason"] == "AwaitingApproval"
    produce(kafka, topic, {0: 500})  # lag moves; the proposal on offer must not
    assert policy.poll().action == "propose"
    assert policy.status["proposal"]["hash"] == proposal["hash"] and store.items == {}
    policy.spec = {**spec, "approvedPlan": "0000"}
    assert policy.poll().action == "propose" and store.items == {}
    policy.spec = {**spec, "approvedPlan": proposal["hash"]}
    assert policy.poll().action == "apply"
    assert {d["planHash"] for d in store.documents().values()} == {proposal["hash"]}
    assert "proposal" not in policy.status


def test_assign_mode_hands_over_in_two_steps(kafka) -> None:
    store = MemoryConfigMaps()
    topic = topic_with(kafka, 4)
    spec = spec_for(kafka, topic, apply={"mode": "assign", "handoffTimeout": "60s"})
    policy = Policy(spec, pods(2), store)
    policy.poll()
    first = store.documents()
    produce(kafka, topic, dict.fromkeys(first["c-0"]["partitions"][topic], 1000))
    assert policy.poll().action == "apply"
    step = store.documents()
    revoked = {
        (d["member"], t, p) for d in step.values() for t, ps in d["revoking"].items() for p in ps
    }
    assert revoked, "the skew moves at least one partition"
    held = {p for d in step.values() for p in d["partitions"].get(topic, [])}
    assert not held & {p for _, _, p in revoked}, "a revoked partition is held by nobody"
    assert policy.poll().action == "handoff"
    assert policy.condition("Reconciling")["reason"] == "HandingOff"

    admin = RetryingAdmin(bootstrap_servers=kafka)
    epoch = policy.status["epoch"]
    acks = {
        TopicPartition(t, p): OffsetAndMetadata(0, json.dumps({"member": m, "epoch": epoch}), -1)
        for m, t, p in revoked
    }
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.alter_group_offsets(f"group-{topic}", acks)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    admin.close()
    assert policy.poll().action == "apply"
    final = store.documents()
    assert all(not d["revoking"] for d in final.values())
    assert sorted(p for d in final.values() for p in d["partitions"][topic]) == list(range(4))
    assert policy.status["epoch"] == epoch + 1


def test_assign_mode_timed_out_revoke_returns_to_its_owner(kafka) -> None:
    """No acknowledgement within handoffTimeout: the revoked partitions go back to their old
    owner in a new epoch (never to the planned new owner), Stalled says so until the retry."""
    store = MemoryConfigMaps()
    topic = topic_with(kafka, 4)
    spec = spec_for(kafka, topic, apply={"mode": "assign", "handoffTimeout": "1s"})
    spec["rebalance"] = {**spec["rebalance"], "cooldown": "1h"}
    policy = Policy(spec, pods(2), store)
    policy.poll()
    first = store.documents()
    produce(kafka, topic, dict.fromkeys(first["c-0"]["partitions"][topic], 1000))
    # as if the first plan were older than the cooldown (status and the operator's memory)
    policy.status.pop("lastAppliedTime")
    policy.memory.applied_at = None
    assert policy.poll().action == "apply"
    revoke = store.documents()
    revoked = {(m, p) for m, d in revoke.items() for p in d["revoking"].get(topic, [])}
    assert revoked, "the skew moves at least one partition"
    time.sleep(1.5)  # nobody acknowledges (no sidecar)
    outcome = policy.poll()
    assert outcome.action == "apply"
    settled = store.documents()
    assert {d["epoch"] for d in settled.values()} == {revoke["c-0"]["epoch"] + 1}
    for member, partition in revoked:
        assert partition in settled[member]["partitions"][topic], "back with its old owner"
    assert all(not d["revoking"] for d in settled.values())
    held = sorted(p for d in settled.values() for p in d["partitions"].get(topic, []))
    assert held == list(range(4))
    stalled = policy.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "HandoffTimedOut"
    for member, partition in revoked:
        assert f"{member}: {topic}-{partition}" in stalled["message"]
    assert ("Warning", "HandoffTimedOut") in {e[:2] for e in policy.events}
    # the better plan now waits for the cooldown; the condition keeps saying why
    writes = len(store.writes)
    assert policy.poll().action == "hold"
    assert policy.condition("Stalled")["reason"] == "HandoffTimedOut"
    assert policy.condition("Stalled")["message"] == stalled["message"]
    assert len(store.writes) == writes


def test_assign_mode_holds_plans_while_consumers_have_joined_the_group(kafka) -> None:
    """A consumer that joined with subscribe() makes Kafka refuse manual commits: assign mode
    writes no new epoch (ProtocolMismatch) until the group is left to the sidecars."""
    from kafka import KafkaConsumer

    store = MemoryConfigMaps()
    topic = topic_with(kafka, 2)
    group = f"group-{topic}"
    policy = Policy(spec_for(kafka, topic, apply={"mode": "assign"}), pods(2), store)
    # The group's leader assigns from its own metadata: a join before that metadata holds the
    # new topic's partitions assigns nothing and waits on a refresh to rejoin. So the consumer
    # learns the partitions first and subscribes after.
    consumer = KafkaConsumer(bootstrap_servers=kafka, group_id=group, metadata_max_age_ms=1000)
    try:
        deadline = time.monotonic() + 60
        while consumer.partitions_for_topic(topic) != {0, 1}:
            assert time.monotonic() < deadline, "the plain consumer never saw the topic"
            time.sleep(0.2)
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the plain consumer never joined"
            consumer.poll(timeout_ms=200)
        assert policy.poll().action == "hold"
        stalled = policy.condition("Stalled")
        assert stalled["status"] == "True" and stalled["reason"] == "ProtocolMismatch"
        assert "joined group" in stalled["message"] and "'range'" in stalled["message"]
        assert store.items == {}
        assert ("Warning", "ProtocolMismatch") in {e[:2] for e in policy.events}
    finally:
        consumer.close()  # leaves the group
    assert policy.poll().action == "apply"
    assert set(store.documents()) == {"c-0", "c-1"}
    assert policy.condition("Stalled")["status"] == "False"


def test_telemetry_rows_reach_the_kafka_topic(kafka) -> None:
    from kafka import KafkaConsumer
    from kafka_rebalance_operator.telemetry import KafkaSink

    store = MemoryConfigMaps()
    topic = topic_with(kafka, 2)
    telemetry_topic = f"telemetry-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(telemetry_topic, 1, 1)])
    admin.close()
    sink = KafkaSink(kafka, telemetry_topic)
    policy = Policy(spec_for(kafka, topic), pods(2), store, Telemetry([sink]))
    policy.poll()
    sink.close()
    consumer = KafkaConsumer(
        telemetry_topic,
        bootstrap_servers=kafka,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    rows = [json.loads(record.value) for record in consumer]
    consumer.close()
    partition_rows = [r for r in rows if r.get("kind") is None]
    assert sorted(r["partition"] for r in partition_rows) == [0, 1]
    assert {r["owner"] for r in partition_rows} <= {"c-0", "c-1"}
    assert all(r["epoch"] == 1 for r in partition_rows)
    # a fresh broker may not have its group coordinator yet: then committed offsets are unknown
    assert {r["lag_state"] for r in partition_rows} <= {"uninitialized", "unknown"}
    assert [r["epoch"] for r in rows if r.get("kind") == "plan"] == [1]
