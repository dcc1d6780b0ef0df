"""From an observed share group to the planner's request and back to a plan record's
assignment (kafka_rebalance_operator.share_planning): pure functions, no broker."""

from __future__ import annotations

import json

from kafka_rebalance_assignors.share import plan_share
from kafka_rebalance_common.wire import plan_record
from kafka_rebalance_operator.kafka.share_group import TRIGGER_RACK, ShareGroup, ShareMember
from kafka_rebalance_operator.share_planning import record_assignment, share_request


def member(member_id: str, parts: tuple[int, ...], rack: str | None = None) -> ShareMember:
    return ShareMember(member_id, 3, "c", "/h", rack, ("jobs",), {"jobs": parts} if parts else {})


GROUP = ShareGroup(
    "queue",
    "Stable",
    3,
    3,
    "kafka-rebalance-plan",
    (member("a", (0, 1)), member("b", (2, 3)), member("t", (), TRIGGER_RACK)),
)


def test_the_request_holds_every_partition_and_the_consumers_only() -> None:
    request = share_request(
        GROUP,
        {"jobs": 4},
        {("jobs", 0): 100.0},
        {("jobs", 0): 6000},
        weights={"b": 2.0},
        drain_seconds=60,
        max_moves=3,
    )
    assert sorted(request.partitions) == [("jobs", p) for p in range(4)]
    assert request.partitions[("jobs", 0)].rate == 100.0
    assert request.partitions[("jobs", 0)].backlog == 6000
    assert request.partitions[("jobs", 3)].backlog == 0  # unknown counts as none
    assert set(request.members) == {"a", "b"}  # the trigger member is no consumer
    assert request.members["b"].weight == 2.0 and request.members["a"].weight == 1.0
    assert request.current["a"] == frozenset({("jobs", 0), ("jobs", 1)})
    assert (request.drain_seconds, request.max_moves) == (60, 3)


def test_a_plan_becomes_a_share_record_that_decodes_to_it() -> None:
    plan = plan_share(share_request(GROUP, {"jobs": 4}, {("jobs", 0): 100.0}, {}))
    assignment = record_assignment(plan)
    assert len([m for m, t in assignment.items() if 0 in t.get("jobs", [])]) == 2
    value = plan_record.encode_plan(
        "queue", 1, "h", "2026-11-29T00:00:00Z", assignment, member_ids=["a", "b"], kind="share"
    )
    record = json.loads(value)
    assert record["kind"] == "share" and set(record["members"]) == {"a", "b"}
