"""The operator's offset reads at wire speed (`kafka_offsets`, `wire`) against a real broker:
the same offsets and commit metadata as kafka-python's admin API, log starts read again only
when due, and a log start that moved (records deleted, the topic recreated) seen when it must
be."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_operator.kafka import kafka_offsets
from kafka_rebalance_operator.kafka.clients import SharedObservers
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver, TooManyPartitions
from kafka_rebalance_operator.lag import PolicyOffsets

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, count in per_partition.items():
        for i in range(count):
            producer.send(topic, value=f"{i}".encode(), partition=partition)
    producer.flush(30)
    producer.close()


def _count_log_start_requests(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The (kind, leader) of every ListOffsets EARLIEST request `OffsetReader` sends from now."""
    sent: list[object] = []
    real_run = kafka_offsets.OffsetReader._run

    def counting(reader: kafka_offsets.OffsetReader, calls: dict) -> dict:
        sent.extend(call for call in calls if call[0] == "start")
        return real_run(reader, calls)

    monkeypatch.setattr(kafka_offsets.OffsetReader, "_run", counting)
    return sent


def test_wire_reads_equal_the_admin_api_and_log_starts_are_cached(
    kafka: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = uuid.uuid4().hex[:8]
    topics, group = [f"wire-{run}-a", f"wire-{run}-b"], f"wire-group-{run}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    try:
        admin.create_topics([NewTopic(topics[0], 5, 1), NewTopic(topics[1], 3, 1)])
        _produce(kafka, topics[0], {p: 3 + p for p in range(5)})
        _produce(kafka, topics[1], {0: 7, 2: 1})
        admin.delete_records({TopicPartition(topics[0], 4): 5})
        admin.alter_group_offsets(
            group,
            {
                TopicPartition(topics[0], 1): OffsetAndMetadata(
                    2, '{"member":"m-1","epoch":4}', -1
                ),
                TopicPartition(topics[0], 4): OffsetAndMetadata(1, "", -1),
                TopicPartition(topics[1], 0): OffsetAndMetadata(
                    7, '{"member":"m-2","epoch":4}', -1
                ),
            },
        )
    finally:
        admin.close()

    observer = KafkaObserver(kafka, {}, timeout_s=10)
    log_start_requests = _count_log_start_requests(monkeypatch)
    try:
        fast = observer._read_fast(group, topics, None)
        assert fast is not None, "the broker speaks the wire codecs' versions"
        counts, missing, offsets, errors = fast
        slow_counts, slow_missing, slow, slow_errors = observer._read_admin(
            group, topics, None, time.monotonic()
        )
        assert isinstance(offsets, PolicyOffsets)
        assert (
            (counts, missing, errors)
            == (slow_counts, slow_missing, slow_errors)
            == (
                {topics[0]: 5, topics[1]: 3},
                [],
                [],
            )
        )
        assert dict(offsets.items()) == slow  # every partition: start, end, commit, metadata
        assert offsets[(topics[0], 4)].log_start == 5
        assert offsets[(topics[0], 1)].metadata == '{"member":"m-1","epoch":4}'

        reader = observer._offsets
        assert reader is not None and len(log_start_requests) == 1  # one broker: both topics
        observer._read_fast(group, topics, None)
        assert len(log_start_requests) == 1, "log starts are not read again before they are due"

        # retention moved a log start: seen once the cached one is older than the maximum age
        admin = RetryingAdmin(bootstrap_servers=kafka)
        admin.delete_records({TopicPartition(topics[1], 0): 6})
        admin.close()
        assert observer._read_fast(group, topics, None)[2][(topics[1], 0)].log_start == 0
        for held in reader._starts.values():
            held.read_at -= kafka_offsets.LOG_START_MAX_AGE_S + 1
        again = observer._read_fast(group, topics, None)[2]
        assert len(log_start_requests) == 2
        assert again[(topics[1], 0)].log_start == 6
    finally:
        observer.close()


def test_a_recreated_topic_reads_its_log_starts_again_at_once(kafka: str) -> None:
    topic = f"recreated-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 1, 1)])
    _produce(kafka, topic, {0: 20})
    admin.delete_records({TopicPartition(topic, 0): 15})
    observer = KafkaObserver(kafka, {}, timeout_s=10)
    try:
        first = observer._read_fast("nobody", [topic], None)[2]
        assert first[(topic, 0)].log_start == 15
        admin.delete_topics([topic])
        deadline = time.monotonic() + 60
        while True:
            try:
                admin.create_topics([NewTopic(topic, 1, 1)])
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        _produce(kafka, topic, {0: 3})
        deadline = time.monotonic() + 60
        while True:  # the log end (3) is below the cached log start (15): read it again
            offsets = observer._read_fast("nobody", [topic], None)[2]
            if offsets.end[0] == 3 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert (offsets[(topic, 0)].log_start, offsets[(topic, 0)].log_end) == (0, 3)
        assert np.array_equal(offsets.start, [0])
    finally:
        observer.close()
        admin.close()


def test_policies_on_one_cluster_share_one_real_client_until_the_secret_rotates(
    kafka: str,
) -> None:
    topics = [f"shared-{uuid.uuid4().hex[:8]}-{i}" for i in range(3)]
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(t, 2, 1) for t in topics])
    admin.close()
    made: list[KafkaObserver] = []

    def connect(servers: str, security: dict, timeout_s: float) -> KafkaObserver:
        made.append(KafkaObserver(servers, security, timeout_s))
        return made[-1]

    pool = SharedObservers(connect)
    leases = [pool(kafka, {}, 10, key=(kafka, "fingerprint-1")) for _ in topics]
    try:
        assert len(made) == 1 and pool.open == 1
        (admin_client,) = {id(lease.observer.admin) for lease in leases}  # type: ignore[attr-defined]
        for lease, topic in zip(leases, topics, strict=True):
            deadline = time.monotonic() + 30
            while True:  # a topic just created may not have its leaders yet
                observation = lease.observe("nobody", [topic], None)
                ends = observation.offsets.end.tolist()  # type: ignore[union-attr]
                if ends == [0, 0] or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            # (a fresh broker may not have a group coordinator yet: log offsets are still read)
            assert observation.topics == {topic: 2} and ends == [0, 0]
        rotated = pool(kafka, {}, 10, key=(kafka, "fingerprint-2"))
        assert len(made) == 2 and id(rotated.observer.admin) != admin_client  # type: ignore[attr-defined]
        old = leases[0].observer
        for lease in leases:
            lease.close()
        assert pool.open == 1
        assert old.admin._closed  # type: ignore[attr-defined]
        assert rotated.observe("nobody", topics[:1], None).topics == {topics[0]: 2}
        rotated.close()
        assert pool.open == 0
    finally:
        for lease in leases:
            lease.close()


def test_a_policy_over_the_partition_cap_is_refused_on_metadata_alone(kafka: str) -> None:
    """`max_partitions` is checked on the wire path's metadata, before any offset request."""
    topic = f"capped-{uuid.uuid4().hex[:8]}"
    with RetryingAdmin(bootstrap_servers=kafka) as admin:
        admin.create_topics([NewTopic(topic, 4, 1)])
    observer = KafkaObserver(kafka, {}, timeout_s=10)
    try:
        with pytest.raises(TooManyPartitions, match="4 partitions"):
            observer.observe("capped-group", [topic], None, max_partitions=3)
        assert observer.observe("capped-group", [topic], None, max_partitions=4).topics == {
            topic: 4
        }
    finally:
        observer.close()
