"""How a plan reaches a group whose brokers apply it (streams and share kinds): the plan record
on the plan topic, where the brokers' plan-following assignor reads it, and a trigger that makes
the group's coordinator recompute. One code for every such kind; the kind supplies the group as
described (`DescribedGroup`), its plan (`TopicPlan`) and how to trigger it.

Invariants:
- a plan is published whole, with the member ids it was made for, signed (`value_headers`);
- a trigger is sent once per published plan, and again only when the last one did not bring
  the plan (the group epoch has not moved within the kind's `Target.pending_s` of it, or the
  group settled on something else) and a poll interval has passed: never while a recompute is
  pending or members reconcile towards a recomputed assignment;
- the trigger follows the acknowledged write at once, except for kinds whose trigger makes the
  coordinator recompute in the same call (`Target.settle_s`);
- a new plan the group already runs is recorded, untriggered, so the record names the members
  that run it; the published plan is republished every `settings.plan_refresh_s`;
- observe mode publishes nothing; PROPOSE only offers the plan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_common.wire import plan_record

from kafka_rebalance_operator import planning
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases import report
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, iso, parse_iso
from kafka_rebalance_operator.phases.decide import Action, Decision, Stop
from kafka_rebalance_operator.phases.publish import value_headers
from kafka_rebalance_operator.planning import Proposal
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

GroupT = TypeVar("GroupT")


class DescribedGroup(Protocol):
    """What the coordinator says of the group (StreamsGroupDescribe, ShareGroupDescribe)."""

    @property
    def group_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def group_epoch(self) -> int: ...
    @property
    def assignment_epoch(self) -> int: ...
    def members_off_plan(self, plan: Assignment) -> list[str]: ...


class TopicPlan(Protocol):
    """A kind's plan as delivery needs it."""

    @property
    def assignment(self) -> Assignment: ...
    @property
    def hash(self) -> str: ...
    @property
    def moves(self) -> int: ...
    @property
    def runs_already(self) -> bool: ...


@dataclass(frozen=True)
class InPlace:
    """What is in place for a group the brokers plan: the highest epoch status shows or this
    process applied, when the last plan was published, whether the spec changed since the last
    poll reported on it, and the plan this policy last published for the group (None: none
    since the operator started, or it was for another group)."""

    epoch: int
    last_applied_at: float | None
    spec_changed: bool
    published_hash: str | None
    published_plan: Assignment | None


def in_place(ctx: PolicyContext, memory: PolicyMemory, group_id: str) -> InPlace:
    shown = ctx.status.get("epoch")
    reported = memory.reported_generation
    if reported is None:
        reported = ctx.status.get("observedGeneration")
    applied_at = [parse_iso(ctx.status.get("lastAppliedTime")), memory.applied_at]
    mine = memory.published_group == group_id
    return InPlace(
        epoch=max(memory.applied_epoch, shown if isinstance(shown, int) else 0),
        last_applied_at=max((t for t in applied_at if t is not None), default=None),
        spec_changed=reported is not None and reported != ctx.generation,
        published_hash=memory.published_hash if mine else None,
        published_plan=memory.published_plan if mine else None,
    )


def described(
    ctx: PolicyContext, memory: PolicyMemory, ports: Ports, describe: Callable[[], GroupT]
) -> GroupT:
    """The group as its coordinator describes it. No plan without its members: when the
    describe fails nothing is published this poll, and that is counted."""
    try:
        return describe()
    except KafkaUnavailable as error:
        memory.close()  # a fresh client next poll: the cluster may have moved
        ports.metrics.plan_publish_skipped(ctx.namespace, ctx.name, "membership_unknown")
        raise PollFailure("KafkaUnreachable", str(error)) from None


def outcome(
    ctx: PolicyContext,
    health: Health,
    fields: Mapping[str, Any],
    events: list[report.Event],
    action: Action | Stop,
    memory: PolicyMemory,
    ports: Ports,
    now: float,
) -> report.PollOutcome:
    """The end of every poll that reached its group: the generation reported on remembered,
    the status fields that changed, the poll counted."""
    memory.reported_generation = ctx.generation
    ports.metrics.poll_succeeded(ctx.namespace, ctx.name, now)
    return report.PollOutcome(
        report.status(ctx, now, health, **fields), events, action, succeeded=True
    )


@dataclass(frozen=True)
class Delivered:
    epoch: int  # the epoch status shows after this poll
    published: bool = False
    triggered: bool = False
    proposal: Proposal | None = None


@dataclass(frozen=True)
class Target:
    """One group to deliver to: its kind (the record's `kind`), as described now, its member
    ids (what the record names), the plan this policy last published for it (hash and
    assignment, None: none since the operator started), the epoch in place, how to
    trigger it (raises PollFailure), and the standbys to publish beside an assignment.

    `pending_s`: how long a trigger that has not moved the group epoch yet may still be on its
    way (a streams group applies a config change at a member's next heartbeat; a second
    toggle inside that time would undo the first). `settle_s`: the wait between the
    acknowledged write and the trigger, for a trigger that recomputes in its own call before
    the brokers' reader may hold the record (share groups)."""

    kind: str
    group: DescribedGroup
    member_ids: Sequence[str]
    published_hash: str | None
    published_plan: Assignment | None
    epoch: int
    trigger: Callable[[], None]
    # the standbys to publish with an assignment (streams: planned for it; None: no field)
    standbys: Callable[[Assignment], Assignment | None] = lambda _assignment: None
    pending_s: float = 0.0
    settle_s: float = 0.0


def carry_out(
    ctx: PolicyContext,
    target: Target,
    planned: TopicPlan,
    offer: Callable[[], Proposal],
    decision: Decision,
    mode: str,
    poll_interval: float,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> Delivered:
    """APPLY publishes the plan in a new epoch and triggers the recompute (unless the group
    runs it already); PROPOSE offers it (`offer`). Otherwise, outside observe mode: a plan the
    group runs already is recorded, a published plan the group does not run is triggered again
    when the last trigger did not bring it, and the published plan is refreshed."""
    if decision.action is Action.PROPOSE:
        return Delivered(target.epoch, proposal=offer())
    if decision.action is Action.APPLY:
        memory.proposal = None
        trigger = not planned.runs_already
        publish(ctx, target, planned, decision.epoch, memory, settings, now)
        if trigger:
            _trigger(ctx, target, memory, ports, now)
        memory.applied_epoch, memory.applied_at = decision.epoch, now
        ports.metrics.plan_applied(ctx.namespace, ctx.name, target.group.group_id, planned.moves)
        return Delivered(decision.epoch, published=True, triggered=trigger)
    if mode == "observe":
        return Delivered(target.epoch)
    if planned.runs_already and target.published_hash != planned.hash:
        # a record of what the group runs: it moves nothing, so it starts no cooldown
        epoch = target.epoch + 1
        publish(ctx, target, planned, epoch, memory, settings, now)
        memory.applied_epoch = epoch
        return Delivered(epoch, published=True)
    in_place = target.published_plan
    if target.published_hash is None or in_place is None:
        return Delivered(target.epoch)
    if target.group.members_off_plan(in_place):
        last = memory.triggered_at or memory.published_at or now
        missed = recompute_missed(target.group, memory, now, target.pending_s)
        if now - last >= poll_interval and missed:
            _trigger(ctx, target, memory, ports, now)
            return Delivered(target.epoch, triggered=True)
    elif now - (memory.published_at or now) >= settings.plan_refresh_s:
        refreshed = _Refresh(in_place, target.published_hash)
        publish(ctx, target, refreshed, target.epoch, memory, settings, now)
        return Delivered(target.epoch, published=True)
    return Delivered(target.epoch)


@dataclass(frozen=True)
class _Refresh:
    assignment: Assignment
    hash: str
    moves: int = 0
    runs_already: bool = True


def recompute_missed(
    group: DescribedGroup, memory: PolicyMemory, now: float, pending_s: float = 0.0
) -> bool:
    """The last trigger did not bring the published plan: the group epoch has not moved
    `pending_s` after it was sent, or the group settled (Stable, its assignment at the group
    epoch) on something else. While the trigger may still be on its way, while a recompute is
    pending (group epoch past the assignment epoch) and while members reconcile towards a
    recomputed assignment, another trigger would only cost an epoch bump, restart the
    reconciliation, or (a streams toggle) undo the trigger still on its way."""
    sent_at = memory.triggered_group_epoch
    if sent_at is None:
        return True
    if group.group_epoch <= sent_at:
        sent = memory.triggered_at
        return sent is None or now - sent >= pending_s
    return group.state == "Stable" and group.assignment_epoch >= group.group_epoch


def publish(
    ctx: PolicyContext,
    target: Target,
    planned: TopicPlan,
    epoch: int,
    memory: PolicyMemory,
    settings: OperatorSettings,
    now: float,
) -> None:
    group_id = target.group.group_id
    if memory.published_hash != planned.hash:
        memory.trigger_epoch = None  # bumps count per plan: a new plan starts afresh
    record = plan_record.encode_plan(
        group_id,
        epoch,
        planned.hash,
        iso(now),
        planned.assignment,
        incarnation=ctx.uid,
        member_ids=target.member_ids,
        kind=target.kind,
        standbys=target.standbys(planned.assignment),
    )
    headers = value_headers(settings, group_id, record)
    observer = memory.observer
    if observer is None:
        raise PollFailure("PublishFailed", "no Kafka client to publish the plan with")
    try:
        observer.publish_plan(
            settings.plan_topic,
            group_id,
            record,
            headers,
            settings.plan_client,
            target.settle_s,
        )
    except KafkaUnavailable as error:
        raise PollFailure("PublishFailed", str(error)) from None
    memory.published_hash, memory.published_at = planned.hash, now
    memory.published_group = group_id
    memory.published_member_ids = tuple(sorted(target.member_ids))
    memory.published_incarnation, memory.published_epoch = ctx.uid, epoch
    memory.published_plan = planned.assignment
    log.info(
        "%s/%s epoch %d: %s plan %s published to %s (%d bytes, %d moves)",
        ctx.namespace,
        ctx.name,
        epoch,
        target.kind,
        planned.hash,
        settings.plan_topic,
        len(record),
        planned.moves,
    )


def _trigger(
    ctx: PolicyContext, target: Target, memory: PolicyMemory, ports: Ports, now: float
) -> None:
    target.trigger()
    group = target.group
    if memory.trigger_epoch is None:
        memory.trigger_epoch = group.group_epoch
    memory.triggered_group_epoch = group.group_epoch
    memory.triggers += 1
    memory.triggered_at = now
    ports.metrics.group_trigger(ctx.namespace, ctx.name, group.group_id, target.kind)
    log.info("%s/%s: %s group %s triggered", ctx.namespace, ctx.name, target.kind, group.group_id)


def count_bumps(
    ctx: PolicyContext, group: DescribedGroup, kind: str, memory: PolicyMemory, ports: Ports
) -> None:
    """When the group is Stable at or past a triggered plan: the epoch bumps it cost (group
    epoch now minus the epoch before the first trigger of the plan)."""
    start = memory.trigger_epoch
    if start is None or group.state != "Stable" or group.group_epoch <= start:
        return
    if group.assignment_epoch != group.group_epoch:
        return
    bumps = group.group_epoch - start
    memory.last_plan_bumps, memory.trigger_epoch = bumps, None
    ports.metrics.group_epoch_bumps(ctx.namespace, ctx.name, group.group_id, kind, bumps)


def health(
    ctx: PolicyContext,
    group: DescribedGroup,
    members: int,
    decision: Decision,
    note: str,
    memory: PolicyMemory,
    poll_interval: float,
    now: float,
) -> Health:
    """Ready with the decision's reason once the group runs the published plan; Reconciling
    (Applying) while it moves to it; Stalled (NotConverged) when it has not after
    report.CONVERGENCE_POLLS poll intervals."""
    message = f"{decision.message}; {note}" if note else decision.message
    published = memory.published_plan if memory.published_group == group.group_id else None
    if published is None or decision.action is Action.OBSERVE:
        return Health(True, decision.reason, message)
    off_plan = group.members_off_plan(published)
    state = report.convergence(memory, now, bool(off_plan), decision, poll_interval)
    if state == "converged":
        return Health(True, decision.reason, message)
    waiting = (
        f"{message}; {len(off_plan)} of {members} members do not run the published plan "
        f"{memory.published_hash} yet"
    )
    if state == "stalled":
        return Health(False, "NotConverged", waiting, stalled=True)
    return Health(False, "Applying", waiting, reconciling=True)


def kept_proposal(
    ctx: PolicyContext,
    memory: PolicyMemory,
    published_hash: str | None,
    counts: Mapping[str, int],
    member_ids: Sequence[str],
) -> Proposal | None:
    """Approval: the proposal on offer stays the plan while it still fits the group (the same
    members, and units per topic or subtopology) and is not published, so the hash a user
    approves is the plan that gets published even as load moves. It is kept in status too,
    so an operator restart offers the same plan. None: plan afresh."""
    kept = memory.proposal or planning.restore_proposal(ctx.status.get("proposal"))
    if (
        kept is None
        or kept.hash == published_hash
        or not planning.proposal_fits(kept.assignment, counts, list(member_ids))
    ):
        memory.proposal = None
        return None
    return kept


def offer(
    kept: Proposal | None,
    planned_hash: str,
    assignment: Assignment,
    moves: int,
    before: float | None,
    after: float | None,
    memory: PolicyMemory,
    now: float,
) -> Proposal:
    """The proposal on offer (`planning.offer`), remembered."""
    memory.proposal = planning.offer(kept, planned_hash, assignment, moves, before, after, iso(now))
    return memory.proposal
