"""The operator's observe step against real brokers: lag states, commit metadata, and faults
that degrade single partitions or topics instead of the whole poll."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver, KafkaUnavailable
from kafka_rebalance_operator.lag import LagState, classify

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, count in per_partition.items():
        for i in range(count):
            producer.send(topic, value=f"{i}".encode(), partition=partition)
    producer.flush(30)
    producer.close()


def _retry(action, timeout: float = 60.0):
    """A fresh broker answers CoordinatorNotAvailable until __consumer_offsets exists."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_lag_state_from_a_real_broker(kafka: str) -> None:
    topic, group = f"lag-{uuid.uuid4().hex[:8]}", f"lag-group-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    try:
        admin.create_topics([NewTopic(topic, 4, 1)])
        _produce(kafka, topic, {0: 10, 1: 10, 2: 10, 3: 10})
        admin.delete_records({TopicPartition(topic, 2): 8})  # retention-like: start moves to 8
        _retry(
            lambda: admin.alter_group_offsets(
                group,
                {
                    TopicPartition(topic, 0): OffsetAndMetadata(
                        4, '{"member":"p-0","epoch":3}', -1
                    ),
                    TopicPartition(topic, 2): OffsetAndMetadata(2, "", -1),
                    TopicPartition(topic, 3): OffsetAndMetadata(50, "", -1),
                },
            )
        )
    finally:
        admin.close()

    observer = KafkaObserver(kafka, {}, timeout_s=10)
    try:
        observation = observer.observe(group, [topic], None)
    finally:
        observer.close()
    assert observation.topics == {topic: 4} and not observation.errors
    offsets = observation.offsets
    assert offsets[(topic, 0)].metadata == '{"member":"p-0","epoch":3}'
    assert offsets[(topic, 2)].log_start == 8 and offsets[(topic, 2)].log_end == 10
    states = {p: classify(offsets[(topic, p)], "earliest") for p in range(4)}
    assert (states[0].state, states[0].lag) == (LagState.OK, 6)
    assert (states[1].state, states[1].lag) == (LagState.UNINITIALIZED, 10)
    assert (states[2].state, states[2].lag) == (LagState.OUT_OF_RANGE, 2)
    assert (states[3].state, states[3].lag) == (LagState.AHEAD, 0)
    assert classify(offsets[(topic, 1)], "latest").lag == 0


def test_a_missing_topic_is_reported_and_the_others_still_read(kafka: str) -> None:
    topic = f"present-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    _produce(kafka, topic, {0: 3, 1: 5})
    observer = KafkaObserver(kafka, {}, timeout_s=10)
    try:
        observation = observer.observe("nobody", [topic, "no-such-topic-xyz"], None)
    finally:
        observer.close()
    assert observation.topics == {topic: 2}
    assert observation.missing_topics == ["no-such-topic-xyz"]
    assert observation.offsets[(topic, 1)].log_end == 5


def test_unreachable_kafka_raises_kafka_unavailable_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(KafkaUnavailable, match="cannot reach"):
        KafkaObserver(f"127.0.0.1:{_free_port()}", {}, timeout_s=2)
    assert time.monotonic() - started < 15


def test_partitions_without_a_leader_are_unknown_the_rest_are_read(kafka_cluster) -> None:
    # Two topics: the poll reads every topic's offsets in one call, which fails as a whole when
    # one partition has no leader; the fallback must still read every led partition of both.
    bootstrap = kafka_cluster.bootstrap_servers
    topics = [f"leaderless-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    admin = RetryingAdmin(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(t, 6, 1) for t in topics])  # one replica: no leader when stopped
    time.sleep(1)
    leaders = {
        (entry["name"], p["partition_index"]): p["leader_id"]
        for entry in admin.describe_topics(topics)
        for p in entry["partitions"]
    }
    admin.close()
    for topic in topics:
        _produce(bootstrap, topic, dict.fromkeys(range(6), 4))
    victim = 3
    lost = {key for key, leader in leaders.items() if leader == victim}
    assert lost and len(lost) < 12, leaders
    kafka_cluster.stop_node(victim)
    try:
        observer = KafkaObserver(bootstrap, {}, timeout_s=3)
        try:
            observation = observer.observe("any-group", topics, None)
        finally:
            observer.close()
    finally:
        kafka_cluster.start_node(victim)
    unread = {key for key in leaders if observation.offsets[key].log_end is None}
    assert unread == lost, (observation.errors, observation.offsets)
    assert all(observation.offsets[key].log_end == 4 for key in leaders if key not in lost)
    states = {key: classify(observation.offsets[key]).state for key in leaders}
    assert all(states[key] is LagState.UNKNOWN for key in lost)
    assert sum(f"{t}-{p}:" in e for t, p in lost for e in observation.errors) >= len(lost)


KIP848_CONSUMER = """
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;

public class Kip848Consumer {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[1]);
        p.put("group.protocol", "consumer");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(args[2]));
            while (true) {
                c.poll(Duration.ofMillis(300));
                System.out.println("assigned " + c.assignment().size());
            }
        }
    }
}
"""


def test_a_kip848_group_is_recognised_and_refuses_manual_commits(kafka, tools, tmp_path) -> None:
    """A real KIP-848 member (the Java client with group.protocol=consumer: kafka-python has no
    KIP-848 support): DescribeGroups cannot describe the group, ListGroups' type tells, and the
    ProtocolMismatch check names it in both apply modes; a manual commit is really refused."""
    import json
    import os
    import signal
    import subprocess

    from kafka import KafkaConsumer
    from kafka.errors import CommitFailedError
    from kafka_rebalance_dev.devenv import java_classes
    from kafka_rebalance_dev.devenv.kafka_broker import java_binary
    from kafka_rebalance_operator import protocol

    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"kip848-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    source = tmp_path / "Kip848Consumer.java"
    source.write_text(KIP848_CONSUMER)
    libs = tools.kafka_libs()
    classpath = ":".join(
        str(j) for j in [*libs.glob("kafka-clients-*.jar"), *libs.glob("slf4j-api-*.jar")]
    )
    # compiled once per machine (cached), not on every run by a single-file launch
    classes = java_classes.compiled(source, classpath, tools.java_classes_cache)
    output = tmp_path / "consumer.log"
    with open(output, "wb") as log:
        member = subprocess.Popen(
            [
                java_binary(),
                "-Xmx128m",
                "-cp",
                f"{classes}:{classpath}",
                source.stem,
                kafka,
                group,
                topic,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while "assigned 3" not in output.read_text():
            assert member.poll() is None, output.read_text()[-2000:]
            assert time.monotonic() < deadline, output.read_text()[-2000:]
            time.sleep(0.5)
        observer = KafkaObserver(kafka, {}, 5)
        try:
            observation = observer.observe(group, [topic], None, describe=True)
        finally:
            observer.close()
        assert observation.group is not None and observation.group.get("members") == []
        assert observation.group_type == ("consumer", "Stable")
        kind, state = observation.group_type
        grouped = protocol.mismatch("group", group, observation.group, kind, state)
        assert grouped is not None and "KIP-848" in grouped and "not followed" in grouped
        assigned = protocol.mismatch("assign", group, observation.group, kind, state)
        assert assigned is not None and "held" in assigned

        # what the assign-mode check protects: a sidecar's manual commit is refused
        consumer = KafkaConsumer(bootstrap_servers=kafka, group_id=group, enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            with pytest.raises(CommitFailedError):
                consumer.commit({tp: OffsetAndMetadata(0, json.dumps({"member": "m"}), -1)})
        finally:
            consumer.close()
    finally:
        os.killpg(member.pid, signal.SIGKILL)
        member.wait(30)


def test_broker_mode_publishes_nothing_while_the_groups_members_cannot_be_described(
    kafka_compat_broker,
) -> None:
    """A whole broker-mode poll with the real Kafka client against brokers whose group describe
    fails (3.9 without KIP-848 enabled refuses ConsumerGroupDescribe): the plan is planned and
    its ConfigMaps written, but no record goes to the plan topic (the topic is never even
    made) and the policy says MembershipUnknown; before, it published `memberIds: []`."""
    from kafka_rebalance_operator.adapters import SystemClock
    from kafka_rebalance_operator.kafka.clients import SharedObservers
    from kafka_rebalance_operator.ports import Ports
    from kafka_rebalance_operator.settings import OperatorSettings

    from tests.operator_ports import (
        ListTelemetry,
        MemoryConfigMaps,
        MemorySecrets,
        MemoryStatus,
        Policy,
        RecordingMetrics,
        pods,
    )

    bootstrap = kafka_compat_broker.bootstrap_servers
    topic, group = f"unknown-{uuid.uuid4().hex[:6]}", f"unknown-{uuid.uuid4().hex[:6]}"
    plan_topic = f"plans-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 4, 1)])
        ports = Ports(
            configmaps=MemoryConfigMaps(),
            status=MemoryStatus(),
            secrets=MemorySecrets(),
            kafka=SharedObservers(KafkaObserver),
            clock=SystemClock(),
            metrics=RecordingMetrics(),
            telemetry=ListTelemetry(),
        )
        spec = {
            "groupId": group,
            "kafka": {"bootstrapServers": bootstrap},
            "topics": [topic],
            "members": {"selector": {"matchLabels": {"app": "c"}}},
            "rebalance": {"mode": "enforce"},
            "apply": {"mode": "broker"},
        }
        settings = OperatorSettings(
            kafka_timeout_s=5, plan_topic=plan_topic, plan_client={"bootstrap_servers": bootstrap}
        )
        policy = Policy(spec, pods(2), ports, settings)
        try:
            outcome = policy.poll()
        finally:
            policy.memory.close()
        ready = policy.condition("Ready")
        assert not outcome.succeeded and ready["reason"] == "MembershipUnknown", policy.status
        assert f"the members of group {group} are unknown" in ready["message"]
        assert ports.configmaps.documents(), "the plan itself is applied"
        assert ports.metrics.skipped == ["membership_unknown"]
        assert plan_topic not in set(admin.list_topics())
    finally:
        admin.close()
