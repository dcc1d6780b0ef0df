"""One tenant's size stays in its policy: a policy over `--max-partitions-per-policy` is Stalled
before anything per partition is read or kept, one polling faster than `--min-poll-interval` is
Stalled before anything is read, and a poll queued behind other policies' polls does not count
toward liveness as a stuck one."""

from __future__ import annotations

import argparse

import pytest
from kafka_rebalance_common.replanning import Action
from kafka_rebalance_operator import handlers
from kafka_rebalance_operator.health import Liveness
from kafka_rebalance_operator.phases.decide import Stop
from kafka_rebalance_operator.settings import OperatorSettings

from kafka_rebalance import operator_command
from tests.operator_ports import MemoryKafka, Policy, memory_ports, pods

SPEC = {
    "groupId": "g",
    "kafka": {"bootstrapServers": "kafka:9092"},
    "topicPattern": "t.*",
    "members": {"selector": {"matchLabels": {"app": "c"}}},
    "strategy": "lag-aware",
    "load": {"model": "lag"},
    "rebalance": {"mode": "enforce", "cooldown": "0s"},
}


def tenant(partitions: dict[str, int], cap: int) -> tuple[MemoryKafka, Policy]:
    kafka = MemoryKafka(topics=dict(partitions))
    for topic, count in partitions.items():
        kafka.lag(topic, dict.fromkeys(range(count), 10))
    settings = OperatorSettings(kafka_timeout_s=3, max_partitions_per_policy=cap)
    return kafka, Policy(dict(SPEC), pods(2), memory_ports(kafka), settings)


def test_a_policy_over_the_cap_is_stalled_and_keeps_nothing_per_partition() -> None:
    _, subject = tenant({"t1": 6, "t2": 5}, cap=10)
    outcome = subject.poll()
    assert outcome.action is Stop.FAILED
    stalled = subject.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "TooManyPartitions"
    assert "11 partitions in 2 topics exceed --max-partitions-per-policy 10" in stalled["message"]
    assert subject.memory.history is None and subject.memory.telemetry is None
    assert subject.ports.configmaps.writes == []


def test_a_policy_at_the_cap_runs_and_one_that_grows_past_it_drops_its_state() -> None:
    kafka, subject = tenant({"t1": 10}, cap=10)
    assert subject.poll().action is Action.APPLY
    assert subject.memory.history is not None and subject.memory.history.layout.size == 10
    kafka.topics["t2"] = 1  # a new topic matches the pattern
    kafka.lag("t2", {0: 1})
    assert subject.poll().action is Stop.FAILED
    assert subject.condition("Stalled")["reason"] == "TooManyPartitions"
    assert subject.memory.history is None
    assert subject.ports.configmaps.documents(), "the applied plan stays in place"


def test_no_cap_when_it_is_zero() -> None:
    _, subject = tenant({"t1": 50}, cap=0)
    assert subject.poll().action is Action.APPLY


def test_a_queued_poll_is_waiting_not_stuck() -> None:
    live = Liveness(max_age_s=60)
    live.woke("ns/a", now=0)
    live.poll_queued("ns/a", now=0)
    alive, ages = live.check(now=500)  # all workers busy with other policies for a long time
    assert alive and "ns/a" not in ages
    assert live.queued(now=500) == {"ns/a": 500}
    live.poll_started("ns/a", now=500)  # a worker takes it: from now on it counts
    assert live.check(now=559)[0]
    alive, ages = live.check(now=561)
    assert not alive and ages["ns/a"] == 61
    live.poll_finished("ns/a", now=562)
    assert live.check(now=563)[0] and live.queued(now=563) == {}


def fast(poll_interval: str, minimum: float) -> tuple[MemoryKafka, Policy]:
    kafka = MemoryKafka(topics={"t1": 4})
    kafka.lag("t1", dict.fromkeys(range(4), 10))
    spec = {
        **SPEC,
        "rebalance": {"mode": "enforce", "cooldown": "0s", "pollInterval": poll_interval},
    }
    settings = OperatorSettings(kafka_timeout_s=3, min_poll_interval_s=minimum)
    return kafka, Policy(spec, pods(2), memory_ports(kafka), settings)


def test_a_policy_polling_faster_than_the_minimum_is_stalled_and_writes_nothing() -> None:
    _, subject = fast("2s", minimum=5.0)
    assert subject.poll().action is Stop.FAILED
    stalled = subject.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "PollIntervalTooShort"
    assert stalled["message"] == (
        "spec.rebalance.pollInterval 2s is below this operator's --min-poll-interval 5s: "
        "set it to at least that"
    )
    assert subject.ports.configmaps.writes == []
    assert subject.memory.observer is None, "nothing connected to Kafka"


def test_a_policy_at_the_minimum_runs_and_a_lower_minimum_admits_a_faster_one() -> None:
    assert fast("5s", minimum=5.0)[1].poll().action is Action.APPLY
    assert fast("1s", minimum=1.0)[1].poll().action is Action.APPLY


def test_a_stalled_fast_policy_is_polled_no_more_often_than_the_minimum() -> None:
    settings = OperatorSettings(min_poll_interval_s=5.0)
    assert handlers._interval({**SPEC, "rebalance": {"pollInterval": "1s"}}, settings) == 5.0
    assert handlers._interval({**SPEC, "rebalance": {"pollInterval": "7s"}}, settings) == 7.0
    assert handlers._interval({"groupId": "g"}, settings) == handlers.INVALID_SPEC_INTERVAL_S


def _min_poll_interval(*flags: str) -> float:
    parser = argparse.ArgumentParser()
    operator_command.register(parser.add_subparsers())
    return float(parser.parse_args(["operator", *flags]).min_poll_interval)


def test_the_minimum_is_a_duration_flag_of_5s_by_default() -> None:
    assert _min_poll_interval() == 5.0
    assert _min_poll_interval("--min-poll-interval", "1500ms") == 1.5
    with pytest.raises(SystemExit):
        _min_poll_interval("--min-poll-interval", "5")  # no unit: refused, not guessed
