"""A turn of the sidecar's loop that fails with a retriable Kafka error (the broker restarting,
the coordinator moving) is survived: the process keeps its consumer, its assignment and its
pending offsets and carries on; a fatal error still ends the loop. The runner's loop against an
in-memory consumer (the broker restart itself: tests/integration/test_e2e_sidecars.py)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaConnectionError, NodeNotReadyError, UnsupportedVersionError
from kafka_rebalance_sidecar import runner as runner_module
from kafka_rebalance_sidecar.delivery import Deliverer
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.records import Batch
from kafka_rebalance_sidecar.runner import Runner, SidecarConfig

TP = TopicPartition("t", 0)


class OutageConsumer:
    """Each poll takes the next scripted outcome: an exception is raised, a number is the offset
    of one record handed out; when the script is done the runner is told to stop."""

    def __init__(self, script: list[Exception | int], stop: Any) -> None:
        self.script = script
        self.stop = stop
        self.commits: list[int] = []
        self.closed = False

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        outcome = self.script.pop(0)
        if not self.script:
            self.stop.set()
        if isinstance(outcome, Exception):
            raise outcome
        return {TP: [ConsumerRecord("t", 0, 0, outcome, 0, 0, None, b"v", [], None, -1, 1, -1)]}

    def commit(self, offsets: dict[TopicPartition, Any], timeout_ms: int) -> None:
        self.commits.append(offsets[TP].offset)

    def close(self, autocommit: bool) -> None:
        self.closed = True


class ScriptedRunner(Runner):
    mode = "test"

    def __init__(self, script: list[Exception | int], delivered: list[Batch]) -> None:
        config = SidecarConfig("127.0.0.1:1", "g", ("t",), "m-0", commit_interval_ms=0)
        super().__init__(
            config,
            AssignmentTracker(group="g", member="m-0"),
            Deliverer(delivered.append, on_poison="skip"),
        )
        self.fake = OutageConsumer(script, self.stop_event)

    def _open(self) -> Any:
        return self.fake

    def _step(self) -> None:
        self.consume_once(lambda: 1)


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "_KAFKA_BACKOFF_MIN_S", 0.001)
    monkeypatch.setattr(runner_module, "_KAFKA_BACKOFF_MAX_S", 0.004)


def test_retriable_errors_are_survived_and_nothing_is_lost() -> None:
    delivered: list[Batch] = []
    refused = KafkaConnectionError("111 ECONNREFUSED")
    r = ScriptedRunner([0, refused, refused, NodeNotReadyError("1"), 1, 2], delivered)
    r.run()
    assert [record.offset for batch in delivered for record in batch.records] == [0, 1, 2]
    assert r.fake.commits == [1, 2, 3]
    assert r.metrics.kafka_errors._value.get() == 3
    assert r.fake.closed


def test_the_backoff_doubles_per_failed_turn_up_to_its_cap_and_resets_after_a_good_one() -> None:
    waits: list[float] = []
    refused = KafkaConnectionError("refused")
    r = ScriptedRunner([refused, refused, refused, refused, 0, refused, 1], [])
    r.stop_event.wait = waits.append  # type: ignore[method-assign, assignment]
    r.run()
    # jittered: each wait in the upper half of its window (0.001 doubling to 0.004, then anew)
    windows = [0.001, 0.002, 0.004, 0.004, 0.001]
    assert len(waits) == len(windows)
    for wait, window in zip(waits, windows, strict=True):
        assert window / 2 <= wait <= window


def test_a_fatal_error_still_ends_the_loop_and_closes_the_consumer() -> None:
    r = ScriptedRunner([0, UnsupportedVersionError("no"), 1], [])
    with pytest.raises(UnsupportedVersionError):
        r.run()
    assert r.fake.closed and r.metrics.kafka_errors._value.get() == 0
