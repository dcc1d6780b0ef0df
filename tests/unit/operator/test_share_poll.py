"""Whole polls of a share-group policy (groups/share.py) with in-memory ports: the share plan
published (record kind "share") and triggered, more consumers on the partition whose backlog
grows, status.share, and Stalled naming the share assignor in use when the brokers cannot
follow a plan."""

from __future__ import annotations

from typing import Any

import pytest
from kafka_rebalance_operator.groups.share import PLAN_SETTLE_S
from kafka_rebalance_operator.kafka.share_group import ShareGroup, ShareMember
from kafka_rebalance_operator.policy import PolicyError, parse_spec
from operator_ports import MemoryKafka, Policy, memory_ports

SPEC: dict[str, Any] = {
    "groupId": "jobs-workers",
    "groupType": "share",
    "kafka": {"bootstrapServers": "kafka:9092"},
    "members": {"selector": {"matchLabels": {"app": "workers"}}},
    "apply": {"mode": "broker"},
    "rebalance": {"mode": "enforce", "cooldown": "0s"},
}


def _group(assignor: str = "kafka-rebalance-plan") -> ShareGroup:
    held = {"w-0": [0, 3], "w-1": [1], "w-2": [2]}  # simple's start: one member per partition
    return ShareGroup(
        group_id="jobs-workers",
        state="Stable",
        group_epoch=4,
        assignment_epoch=4,
        assignor=assignor,
        members=tuple(
            ShareMember(m, 4, f"client-{m}", "/127.0.0.1", None, ("jobs",), {"jobs": tuple(p)})
            for m, p in held.items()
        ),
    )


def _cluster(assignor: str = "kafka-rebalance-plan") -> MemoryKafka:
    kafka = MemoryKafka(topics={"jobs": 4}, share_groups={"jobs-workers": _group(assignor)})
    for p in range(4):
        kafka.log_end[("jobs", p)] = 10_000
    kafka.share_lag.update({("jobs", 0): 40_000, ("jobs", 1): 50, ("jobs", 2): 50, ("jobs", 3): 50})
    return kafka


def test_the_partition_that_falls_behind_gets_more_consumers_and_the_plan_is_triggered() -> None:
    kafka = _cluster()
    policy = Policy(dict(SPEC), [], memory_ports(kafka))
    policy.poll()  # no production rate yet: a plan on backlog alone waits
    assert policy.condition("Ready")["reason"] == "MeasuringLoad"
    assert not kafka.published
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    for p in range(4):
        kafka.log_end[("jobs", p)] += 3_000 if p == 0 else 30
    policy.poll()
    ((topic, key, record),) = kafka.published
    assert (topic, key, record["kind"]) == ("kafka-rebalance-plans", "jobs-workers", "share")
    assert record["memberIds"] == ["w-0", "w-1", "w-2"]
    on_hot = [m for m, topics in record["members"].items() if "0" in topics.get("jobs", "")]
    assert len(on_hot) >= 2, record["members"]
    assert kafka.share_triggers == ["jobs-workers"]
    # the share trigger recomputes in its own call: the write is given time to reach the readers
    assert kafka.settles == [PLAN_SETTLE_S] and PLAN_SETTLE_S > 0
    share = policy.status["share"]
    assert (share["partitions"], share["backlog"], share["triggers"]) == (4, 40_150, 1)
    assert policy.status["share"]["groupEpoch"] == 4
    assert share["consumersPerPartition"] == "jobs:1,1,1,1"  # what the group runs now
    assert policy.condition("Ready")["reason"] == "Applying"  # until the members run it
    assert policy.status["totalLag"] == 40_150 and policy.status["members"] == 3


def test_brokers_without_the_plugin_stall_the_policy_naming_the_assignor() -> None:
    kafka = _cluster(assignor="simple")
    policy = Policy(dict(SPEC), [], memory_ports(kafka))
    policy.poll()
    stalled = policy.condition("Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "AssignorNotPlanFollowing")
    assert "'simple'" in stalled["message"]
    assert (
        "group.share.assignors=dev.kafkarebalance.broker.PlanFollowingShareAssignor"
        in (stalled["message"])
    )
    assert not kafka.published and not kafka.share_triggers


def test_a_failed_describe_publishes_nothing_and_no_group_yet_is_not_stalled() -> None:
    kafka = _cluster()
    policy = Policy(dict(SPEC), [], memory_ports(kafka))
    policy.poll()
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    kafka.reachable = False
    policy.ports.clock.advance(60)  # type: ignore[attr-defined]
    assert not policy.poll().succeeded
    assert policy.condition("Ready")["reason"] == "KafkaUnreachable"
    assert len(kafka.published) == 1
    assert policy.ports.metrics.skipped == ["membership_unknown"]  # type: ignore[attr-defined]
    empty = MemoryKafka(topics={"jobs": 4})
    waiting = Policy(dict(SPEC), [], memory_ports(empty))
    waiting.poll()
    assert waiting.condition("Reconciling")["status"] == "True"
    assert waiting.condition("Ready")["reason"] == "ShareGroupNotFound"


def test_share_needs_broker_mode_and_takes_its_topics_from_the_members() -> None:
    spec = parse_spec(SPEC)
    assert (spec.group_type, spec.topics) == ("share", None)
    with pytest.raises(PolicyError, match=r"spec.groupType: share requires spec.apply.mode"):
        parse_spec({**SPEC, "apply": {"mode": "group"}})


def test_recording_the_assignment_the_group_runs_starts_no_cooldown() -> None:
    kafka = _cluster()
    kafka.share_lag.update(dict.fromkeys((("jobs", p) for p in range(4)), 0))
    policy = Policy(
        {**SPEC, "rebalance": {"mode": "enforce", "cooldown": "5m"}}, [], memory_ports(kafka)
    )
    policy.poll()
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()  # no backlog, no production: the group's own assignment is the plan
    assert len(kafka.published) == 1 and not kafka.share_triggers  # recorded, untriggered
    kafka.share_lag[("jobs", 0)] = 40_000  # partition 0 falls behind
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert len(kafka.published) == 2 and kafka.share_triggers == ["jobs-workers"]


def test_each_poll_writes_a_telemetry_row_per_share_partition_the_backtest_reads() -> None:
    from kafka_rebalance_pipeline.schema import row_errors
    from kafka_rebalance_pipeline.share_replay import share_history_from_rows

    kafka = _cluster()
    policy = Policy(dict(SPEC), [], memory_ports(kafka))
    policy.poll()
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    for p in range(4):
        kafka.log_end[("jobs", p)] += 3_000 if p == 0 else 30
    policy.poll()
    rows = policy.ports.telemetry.rows  # type: ignore[attr-defined]
    assert [r["kind"] for r in rows] == ["share"] * 8  # 4 share-partitions, 2 polls
    assert all(row_errors(r) is None for r in rows)
    first, second = rows[:4], rows[4:]
    assert [(r["partition"], r["lag"], r["members"]) for r in first] == [
        (0, 40_000, ["w-0"]), (1, 50, ["w-1"]), (2, 50, ["w-2"]), (3, 50, ["w-0"]),
    ]  # fmt: skip
    assert {r["rate"] for r in first} == {None}  # one log end: no rate measured yet
    assert [r["rate"] for r in second] == [100.0, 1.0, 1.0, 1.0]
    assert [r["log_end"] for r in second] == [13_000, 10_030, 10_030, 10_030]
    assert second[0]["ts_ms"] - first[0]["ts_ms"] == 30_000
    key = {"cluster": "c", "namespace": "ns", "policy": "p", "group": "jobs-workers"}
    history = share_history_from_rows(key, rows)
    assert history.assignments[0] == {"w-0": (0, 3), "w-1": (1,), "w-2": (2,)}
    assert history.rates[1] == [100.0, 1.0, 1.0, 1.0]
