"""`assign` mode: the two-step hand-over of a partition between members.

Kafka does not fence manual `assign()` consumers, so two members must never hold a partition at
the same epoch. A plan that moves partition P from A to B is applied in two epochs: first P is
revoked from A (A's document lists it under `revoking`; nobody has it), then, once A has
acknowledged by committing P with metadata `{"member": "A", "epoch": E}` for that epoch (or A
left the group), P is granted to B by the next plan, as an unowned partition. Partitions with no
present previous owner are granted at once.

If A is still present and has not acknowledged when the handoff timeout passes, P goes back to
A in a new epoch (`settle_timed_out`): A may still be consuming it, so giving it to anyone else
could make two members consume one partition. The move is retried later (after the cooldown).

Pure: the decisions only; reconcile.py does the writes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kafka_rebalance_common import wire
from kafka_rebalance_common.assignment import Assignment, WireAssignment
from kafka_rebalance_common.wire import AssignmentDocument

from kafka_rebalance_operator.lag import PartitionOffsets
from kafka_rebalance_operator.partition_key import PartitionKey


@dataclass(frozen=True)
class Step:
    """What to write now: partitions per member, and what each member must give up."""

    assignment: Assignment
    revoking: Assignment  # member -> what it must give up (only members that give up any)

    @property
    def complete(self) -> bool:
        return not any(self.revoking.values())


def first_step(current: Mapping[str, AssignmentDocument], target: Assignment) -> Step:
    """The target minus every partition that moves between two present members; those are
    revoked from their current owner instead."""
    owner: dict[PartitionKey, str] = {}
    for member, document in current.items():
        for topic, parts in document.partitions.items():
            for p in parts:
                owner[(topic, p)] = member
    assignment: WireAssignment = {}
    revoking: WireAssignment = {}
    for member, topics in target.items():
        kept: dict[str, list[int]] = {}
        for topic, parts in topics.items():
            for p in parts:
                previous = owner.get((topic, p))
                if previous is not None and previous != member and previous in target:
                    revoking.setdefault(previous, {}).setdefault(topic, []).append(p)
                else:
                    kept.setdefault(topic, []).append(p)
        assignment[member] = {t: sorted(ps) for t, ps in sorted(kept.items())}
    return Step(
        Assignment(assignment),
        Assignment(
            {
                m: {t: sorted(ps) for t, ps in sorted(ts.items())}
                for m, ts in sorted(revoking.items())
            }
        ),
    )


def acknowledged(metadata: str | None, member: str, epoch: int, policy_uid: str = "") -> bool:
    """Commit metadata `{"member": member, "epoch": >= epoch}` of this incarnation of the policy
    acknowledges a revoke; anything else (another incarnation's, another client's, none) does
    not."""
    try:
        return wire.decode_commit_metadata(metadata).acknowledges(member, epoch, policy_uid)
    except wire.MetadataError:
        return False


@dataclass(frozen=True)
class Pending:
    """A revoke in flight: who still has to acknowledge, and whether time ran out."""

    waiting: dict[str, list[PartitionKey]]
    timed_out: bool

    @property
    def done(self) -> bool:
        return not self.waiting or self.timed_out


def pending(
    current: Mapping[str, AssignmentDocument],
    members: list[str],
    offsets: Mapping[PartitionKey, PartitionOffsets],
    now: float,
    started_at: float | None,
    timeout_s: float,
    fenced: Collection[str] = (),
) -> Pending | None:
    """The revoke of the applied epoch, if there is one. A member that left the group needs no
    acknowledgement (it is not Ready, so it consumes nothing the operator could wait for), nor
    does one in `fenced` (group mode: it has joined the consumer group, whose rebalances fence
    it, so it consumes only what the group assigns it)."""
    revoking = {m: d for m, d in current.items() if d.revoking}
    if not revoking:
        return None
    waiting: dict[str, list[PartitionKey]] = {}
    for member, document in revoking.items():
        if member not in members or member in fenced:
            continue
        for topic, parts in document.revoking.items():
            for p in parts:
                read = offsets.get((topic, p))
                if read is None or not acknowledged(
                    read.metadata, member, document.epoch, document.policy_uid
                ):
                    waiting.setdefault(member, []).append((topic, p))
    timed_out = started_at is not None and now - started_at > timeout_s
    return Pending(waiting, timed_out)


def settle_timed_out(
    holdings: Assignment,
    plan: Assignment,
    waiting: Mapping[str, list[PartitionKey]],
) -> Assignment:
    """The epoch that ends a timed-out hand-over without ever sharing a partition.

    `holdings`: what each present member holds now (revoked partitions excluded); `plan`: the
    planner's assignment for the present members (it places every existing partition);
    `waiting`: the revoked partitions whose present old owner did not acknowledge. Every member
    keeps what it holds, unacknowledged partitions go back to their old owner, and only the
    partitions nobody can still be consuming (acknowledged, or their owner left, or new) are
    granted where the plan puts them. No partition moves between two present members here, so
    this epoch needs no hand-over of its own."""
    universe = {(t, p) for topics in plan.values() for t, ps in topics.items() for p in ps}
    owner: dict[PartitionKey, str] = {}
    for member in sorted(plan):
        for topic, parts in holdings.partitions_of(member).items():
            for p in parts:
                if (topic, p) in universe:
                    owner.setdefault((topic, p), member)
    for member, keys in waiting.items():
        if member in plan:
            for key in keys:
                if key in universe:
                    owner.setdefault(key, member)
    for member, topics in plan.items():
        for topic, parts in topics.items():
            for p in parts:
                owner.setdefault((topic, p), member)
    result: WireAssignment = {member: {} for member in plan}
    for (topic, p), member in owner.items():
        result[member].setdefault(topic, []).append(p)
    return Assignment(
        {m: {t: sorted(ps) for t, ps in sorted(ts.items())} for m, ts in sorted(result.items())}
    )


def describe_waiting(waiting: Mapping[str, list[PartitionKey]], limit: int = 10) -> str:
    """`member: topic-p, ...; member: ...` (at most `limit` partitions per member)."""
    parts = []
    for member, keys in sorted(waiting.items()):
        shown = ", ".join(f"{t}-{p}" for t, p in sorted(keys)[:limit])
        more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
        parts.append(f"{member}: {shown}{more}")
    return "; ".join(parts)
