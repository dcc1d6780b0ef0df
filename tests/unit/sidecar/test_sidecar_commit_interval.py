"""Commits after delivery: after every batch when caught up, at most every `commit_interval_ms`
through a backlog. The runner's bookkeeping against an in-memory consumer (the broker-facing
behaviour is in tests/integration/test_sidecar_kafka.py)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka_rebalance_sidecar.delivery import Deliverer
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.records import Batch
from kafka_rebalance_sidecar.runner import Runner, SidecarConfig


class FakeConsumer:
    """Hands out one batch of two records per poll on partition 0, remembers commits."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.full = True  # a full batch (max_poll_records=2): the consumer is behind
        self.commits: list[dict[TopicPartition, int]] = []

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        start = self.next_offset
        tp = TopicPartition("t", 0)
        offsets = (start, start + 1) if self.full else (start,)
        self.next_offset = offsets[-1] + 1
        return {
            tp: [
                ConsumerRecord("t", 0, 0, o, 0, 0, None, b"v", [], None, -1, 1, -1) for o in offsets
            ]
        }

    def commit(self, offsets: dict[TopicPartition, Any], timeout_ms: int) -> None:
        self.commits.append({tp: o.offset for tp, o in offsets.items()})

    def close(self, autocommit: bool) -> None:
        pass


def runner(interval_ms: int, delivered: list[Batch]) -> tuple[Runner, FakeConsumer]:
    config = SidecarConfig(
        "127.0.0.1:1", "g", ("t",), "m-0", commit_interval_ms=interval_ms, max_poll_records=2
    )
    deliverer = Deliverer(delivered.append, on_poison="skip")
    r = Runner(config, AssignmentTracker(group="g", member="m-0"), deliverer)
    consumer = FakeConsumer()
    r.consumer = consumer  # type: ignore[assignment]
    return r, consumer


def test_zero_interval_commits_after_every_batch():
    delivered: list[Batch] = []
    r, consumer = runner(0, delivered)
    for _ in range(3):
        r.consume_once(lambda: 1)
    assert consumer.commits == [{TopicPartition("t", 0): n} for n in (2, 4, 6)]


def test_an_interval_commits_the_latest_delivered_offset_and_the_rest_on_close():
    delivered: list[Batch] = []
    r, consumer = runner(60_000, delivered)
    for _ in range(4):
        r.consume_once(lambda: 1)
    # the first batch is committed at once, the next three wait for the interval...
    assert consumer.commits == [{TopicPartition("t", 0): 2}]
    assert len(delivered) == 4
    # ...and are committed on the way out, never beyond what was delivered
    r._close()
    assert consumer.commits[-1] == {TopicPartition("t", 0): 8}
    assert r.take_pending([TopicPartition("t", 0)]) == {}


def test_a_caught_up_consumer_commits_every_batch_despite_the_interval():
    delivered: list[Batch] = []
    r, consumer = runner(60_000, delivered)
    r.consume_once(lambda: 1)  # full: committed (the first commit is due at once)
    r.consume_once(lambda: 1)  # full: waits for the interval
    consumer.full = False
    r.consume_once(lambda: 1)  # partial: caught up, committed with what waited
    r.consume_once(lambda: 1)
    assert consumer.commits == [{TopicPartition("t", 0): n} for n in (2, 5, 6)]


def test_a_revoked_partition_takes_its_delivered_offsets_with_it():
    delivered: list[Batch] = []
    r, _ = runner(60_000, delivered)
    for _ in range(2):
        r.consume_once(lambda: 5)
    taken = r.take_pending([TopicPartition("t", 0)])
    assert {tp: o.offset for tp, o in taken.items()} == {TopicPartition("t", 0): 4}


def test_a_negative_interval_is_refused():
    with pytest.raises(ValueError, match="commit-interval-ms"):
        SidecarConfig("b:1", "g", ("t",), "m", commit_interval_ms=-1)
