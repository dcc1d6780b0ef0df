"""The harness's brokers are real Kafka: kafka-python produces and consumes against 4.x and 3.9."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.devenv import kafka_protocol

pytestmark = pytest.mark.integration

MESSAGES = 60
PARTITIONS = 3


def test_produce_and_consume_round_trip(any_kafka) -> None:
    bootstrap = any_kafka.bootstrap_servers
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    group = f"smoke-group-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=bootstrap, client_id="smoke-admin")
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        sent = {f"key-{i}".encode(): f"value-{i}".encode() for i in range(MESSAGES)}
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        futures = [producer.send(topic, key=k, value=v) for k, v in sent.items()]
        partitions_written = {f.get(timeout=30).partition for f in futures}
        producer.close()
        assert partitions_written == set(range(PARTITIONS)), "keys should spread over partitions"

        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        received: dict[bytes, bytes] = {}
        deadline = time.monotonic() + 60
        while len(received) < MESSAGES and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                received.update((r.key, r.value) for r in records)
        consumer.commit()
        consumer.close()
        assert received == sent

        committed = admin.list_group_offsets({group: None})[group]
        per_partition = {tp.partition: meta.offset for tp, meta in committed.items()}
        assert sorted(per_partition) == list(range(PARTITIONS))
        assert sum(per_partition.values()) == MESSAGES
        assert TopicPartition(topic, 0) in committed
    finally:
        admin.close()


def test_each_fixture_runs_the_broker_line_it_claims(kafka_broker_4, kafka_compat_broker) -> None:
    """Two distinct broker lines: 4.x serves newer Produce versions and more APIs than 3.9."""
    assert kafka_broker_4.version.startswith("4.")
    assert kafka_compat_broker.version.startswith("3.9")
    host, port = kafka_broker_4.bootstrap_servers.split(":")
    new = kafka_protocol.api_versions(host, int(port))
    host, port = kafka_compat_broker.bootstrap_servers.split(":")
    old = kafka_protocol.api_versions(host, int(port))
    produce = 0
    assert new[produce][1] > old[produce][1]
    assert set(new) > set(old)


def test_three_node_cluster_keeps_serving_with_one_broker_down(kafka_cluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = f"quorum-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 3, 3)])
    admin.close()

    def produce(values: list[bytes]) -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
        for value in values:
            producer.send(topic, value=value).get(timeout=60)
        producer.close()

    first = [f"before-{i}".encode() for i in range(10)]
    produce(first)
    kafka_cluster.stop_node(3)
    assert 3 in kafka_cluster.stopped
    second = [f"during-{i}".encode() for i in range(10)]
    produce(second)

    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=20000
    )
    got = {r.value for r in consumer}
    consumer.close()
    assert got == set(first + second)

    kafka_cluster.start_node(3)
    host, port = bootstrap.split(",")[0].split(":")
    assert {b.node_id for b in kafka_protocol.brokers(host, int(port))} == {1, 2, 3}
