"""From observations to the planning request, plan hashes, placement and proposals (what to do
with a plan is decided by `kafka_rebalance_common.replanning`).

Pure. The operator plans the typed request built here with `assignors.plan_request` and gets a
typed `Plan`; no JSON document is built on the way. `kafka-rebalance plan` runs the same
validation and planner on the request's document (`PlanRequest.to_document()`), so a user can
preview what the operator will apply by feeding that document to the command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kafka_rebalance_assignors as assignors
import numpy as np
from kafka_rebalance_common import wire
from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_common.wire import AssignmentDocument

from kafka_rebalance_operator.partition_key import PartitionKey
from kafka_rebalance_operator.partition_sets import TopicPartitions
from kafka_rebalance_operator.policy import PolicySpec


def build_request(
    spec: PolicySpec,
    topics: Mapping[str, int],
    weights: Mapping[str, float],
    current: Mapping[str, AssignmentDocument],
    lag: Mapping[PartitionKey, float | None],
    rate: Mapping[PartitionKey, float | None],
) -> assignors.PlanRequest:
    """The planning request for this poll.

    Every member subscribes to every topic of the policy. Previous ownership comes from the
    members' current ConfigMaps, with the ConfigMap's epoch as the KIP-341 generation, passed
    as the arrays the documents hold it in (`OwnedColumns`: at a million partitions the
    planner reads no list per claimed topic). A lag or
    rate that was not observed is passed as unknown: the planner says what it counts as.
    """
    owned = {
        name: TopicPartitions.of(document.partitions).columns()
        for name, document in current.items()
        if name in weights and document.partitions
    }
    options = assignors.PlanOptions(
        count_balance=spec.count_balance,
        max_moves=spec.move_budget(sum(topics.values())),
        min_improvement=spec.min_improvement,
        load_model=spec.load_model or None,
        target_drain_seconds=spec.target_drain_seconds,
    )
    return assignors.group_request(
        strategy=spec.strategy,
        topics=topics,
        members=weights,
        owned=owned,
        lag=lag,
        rate=rate,
        weights=weights,
        generations={name: current[name].epoch for name in owned},
        options=options,
    )


def plan_hash(assignment: Assignment) -> str:
    """Identifies an assignment (members included, even empty ones): equal hashes mean there is
    nothing to write. Short enough to paste into spec.approvedPlan."""
    return wire.assignment_hash(assignment)


def placement_needed(
    topics: Mapping[str, int],
    members: list[str],
    current: Mapping[str, AssignmentDocument],
) -> bool:
    """True when the applied plan no longer fits the group: a member without a plan, a plan for
    a pod that left, or a partition nobody present owns. Such a plan is applied at once (no
    cooldown, no improvement threshold): the group is not covered otherwise."""
    if set(current) != set(members):
        return True
    epochs = {d.epoch for d in current.values()}
    if len(epochs) > 1:
        return True
    spans: dict[str, tuple[int, int]] = {}
    total = 0
    for topic, count in topics.items():
        spans[topic] = (total, count)
        total += count
    covered = np.zeros(total, bool)
    for document in current.values():
        covered[TopicPartitions.of(document.partitions).rows(spans)] = True
    return not covered.all()


def proposal_fits(
    assignment: Assignment,
    topics: Mapping[str, int],
    members: list[str],
) -> bool:
    """A pending proposal stays valid while the members and partition counts it was made for
    are unchanged; it is kept stable so the hash a user approves is still the one on offer."""
    if set(assignment) != set(members):
        return False
    seen: set[tuple[str, int]] = set()
    for parts in assignment.values():
        for topic, ps in parts.items():
            if topic not in topics:
                return False
            seen.update((topic, p) for p in ps)
    return seen == {(t, p) for t, n in topics.items() for p in range(n)}


@dataclass
class Proposal:
    """A plan waiting for approval: what `status.proposal` describes."""

    hash: str
    assignment: Assignment
    moves: int
    before: float | None
    after: float | None
    generated_at: str


def offer(
    kept: Proposal | None,
    plan_hash: str,
    assignment: Assignment,
    moves: int,
    before: float | None,
    after: float | None,
    generated_at: str,
) -> Proposal:
    """The proposal on offer: the one already offered while it is still the plan (so its
    generation time, and the hash a user approves, stay put), else a new one."""
    if kept is not None and kept.hash == plan_hash:
        return kept
    return Proposal(plan_hash, assignment, moves, before, after, generated_at)


# The canonical text of an assignment (what `status.proposal.assignment` stores) is a wire
# format: one copy, in kafka_rebalance_common.wire.
encode_assignment = wire.encode_assignment


def restore_proposal(status_proposal: Any) -> Proposal | None:
    """The proposal on offer from `status.proposal` (after an operator restart), or None when
    there is none or its assignment does not match its hash (edited, truncated, or written by
    an operator that did not store it)."""
    if not isinstance(status_proposal, Mapping):
        return None
    text, wanted = status_proposal.get("assignment"), status_proposal.get("hash")
    if not isinstance(text, str) or not isinstance(wanted, str):
        return None
    try:
        assignment = wire.decode_assignment(text)
    except wire.AssignmentError:
        return None
    if plan_hash(assignment) != wanted:
        return None

    def number(key: str) -> float | None:
        value = status_proposal.get(key)
        return float(value) if isinstance(value, int | float) else None

    moves = status_proposal.get("moves")
    return Proposal(
        hash=wanted,
        assignment=assignment,
        moves=moves if isinstance(moves, int) else 0,
        before=number("before"),
        after=number("after"),
        generated_at=str(status_proposal.get("generatedAt") or ""),
    )


def moves_between(before: Assignment, after: Assignment) -> int:
    """Partitions whose owner differs (unowned partitions granted are not moves), counted by the
    planner's own rule over the partitions `after` assigns."""
    topics: dict[str, int] = {}
    for parts in after.values():
        for topic, ps in parts.items():
            if ps:
                topics[topic] = max(topics.get(topic, 0), max(ps) + 1)
    return len(assignors.moves_between(topics, before, after))
