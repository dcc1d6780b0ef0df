"""From what the operator observes of a share group to the share planner's request, and from the
plan to the assignment a share plan record carries. Pure: no I/O.

The share planner (`kafka_rebalance_assignors.share`) wants every partition of the group's
topics with its rate and backlog, each consumer with its subscription, capacity weight and
current partitions; `share_group.describe` gives the members (the trigger member left out),
`share_group.share_backlog` the backlog, and rates come from log end offsets as for consumer
groups. A partition whose backlog is unknown counts as having none; a member without a weight
has weight 1.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_rebalance_assignors.share import (
    DEFAULT_DRAIN_SECONDS,
    PartitionLoad,
    ShareMemberInput,
    SharePlan,
    ShareRequest,
)
from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance_operator.kafka.share_group import ShareGroup, TopicPartition


def share_request(
    group: ShareGroup,
    partition_counts: Mapping[str, int],
    rates: Mapping[TopicPartition, float],
    backlog: Mapping[TopicPartition, int],
    *,
    weights: Mapping[str, float] | None = None,
    drain_seconds: float = DEFAULT_DRAIN_SECONDS,
    max_moves: int | None = None,
) -> ShareRequest:
    """The planner's request for `group`: every partition of the topics in `partition_counts`
    (topic -> partitions) with its rate (records/s) and backlog (records), every consumer of
    the group with its subscription, weight (member id -> weight, default 1) and current
    assignment."""
    partitions = {
        (topic, p): PartitionLoad(
            float(rates.get((topic, p), 0.0)), float(backlog.get((topic, p), 0))
        )
        for topic, count in sorted(partition_counts.items())
        for p in range(count)
    }
    members = {
        m.member_id: ShareMemberInput(
            m.member_id, frozenset(m.subscribed_topics), (weights or {}).get(m.member_id, 1.0)
        )
        for m in group.consumers()
    }
    current = {
        m.member_id: frozenset((t, p) for t, parts in m.assignment.items() for p in parts)
        for m in group.consumers()
    }
    return ShareRequest(partitions, members, current, drain_seconds, max_moves)


def record_assignment(plan: SharePlan) -> Assignment:
    """The plan as the operator passes it on and `plan_record.encode_plan(..., kind="share")`
    takes it: member id -> topic -> partitions (members the plan leaves without partitions
    kept, with none; a partition under every member the plan puts on it). The plan's own
    partition tuples, not copied: members in name order."""
    return Assignment(dict(sorted(plan.assignment.items())))
