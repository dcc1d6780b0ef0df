"""Decide: what this poll does with its plan. Pure: no I/O, no memory, time given.

The replanning rules (unchanged plan, observe mode, cooldown, minImprovement, approval) are
`kafka_rebalance_common.replanning`, the same code the pipeline's replay runs. This module adds
what only the operator knows: a poll that stops before planning (no members, a hand-over in
flight), a protocol mismatch that holds a new assign-mode epoch, a timed-out hand-over, and
adaptive weights with no capacity measured yet (a load-following plan waits for the first).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafka_rebalance_common import replanning
from kafka_rebalance_common.replanning import Action, Decision, Rules

from kafka_rebalance_operator import assignment_doc, capacity, handoff, planning
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.phases.context import PolicyContext
from kafka_rebalance_operator.phases.observe import Observed
from kafka_rebalance_operator.phases.plan import Planned
from kafka_rebalance_operator.policy import PolicySpec
from kafka_rebalance_operator.settings import OperatorSettings

__all__ = ["Action", "Decision", "Stop", "Wait", "decide", "rules", "wait"]


class Stop(enum.StrEnum):
    """A poll that ends without a plan decision."""

    NO_MEMBERS = "no-members"  # nobody to plan for: the applied plan is kept
    HANDING_OFF = "handoff"  # assign mode: old owners have not yet acknowledged a revoke
    FAILED = "failed"  # PollFailure: could not observe, plan or write


@dataclass(frozen=True)
class Wait:
    """The poll stops before planning, and that is not a failure."""

    stop: Stop
    health: Health


def wait(observed: Observed) -> Wait | None:
    """No members, or (assign mode) a revoke still waiting for acknowledgements: no plan now."""
    if not observed.members:
        return Wait(
            Stop.NO_MEMBERS,
            Health(
                False,
                "NoMembers",
                "no Running and Ready pod matches spec.members.selector; the applied "
                f"plan (epoch {observed.epoch}) is kept",
                stalled=True,
            ),
        )
    pending = observed.handoff
    if pending is not None and not pending.done:
        return Wait(
            Stop.HANDING_OFF,
            Health(
                False,
                "HandingOff",
                f"epoch {observed.epoch}: waiting for old owners to commit revoked partitions "
                f"({handoff.describe_waiting(pending.waiting)})",
                reconciling=True,
            ),
        )
    return None


def rules(spec: PolicySpec) -> Rules:
    return Rules(
        mode=spec.mode,
        cooldown_s=spec.cooldown,
        min_improvement=spec.min_improvement,
        needs_approval=spec.needs_approval,
        approved_plan=spec.approved_plan,
    )


def decide(
    ctx: PolicyContext,
    observed: Observed,
    planned: Planned,
    settings: OperatorSettings,
    now: float,
) -> Decision:
    spec = observed.spec
    applied_hash = observed.current.applied_hash()
    # A plan the group needs for coverage, the first plan after the user changed the spec, or
    # one that writes again what a member's ConfigMap no longer shows, is not held back by
    # cooldown or minImprovement (approval still applies).
    structural = (
        observed.spec_changed
        or bool(observed.unwritten)
        or planning.placement_needed(
            observed.observation.topics, observed.member_names, observed.current.by_member
        )
    )
    rendered = assignment_doc.render_documents(
        spec.group_id, planned.assignment, observed.epoch, planned.hash, ""
    )
    writes_needed = applied_hash == planned.hash and bool(
        assignment_doc.diff(ctx.name, observed.current, rendered)
    )
    decision = replanning.decide(
        rules(spec),
        now=now,
        new_hash=planned.hash,
        applied_hash=applied_hash,
        current_epoch=observed.epoch,
        writes_needed=writes_needed,
        structural=structural,
        last_applied_at=observed.last_applied_at,
        ratio_before=planned.ratio_before,
        ratio_after=planned.ratio_after,
        moves=planned.moves,
        force=planned.handoff_done and spec.mode != "observe",
    )
    if observed.inherited and decision.action in (Action.NOOP, Action.REPAIR):
        # a policy deleted and created again: its epochs restart above everything seen, and the
        # plan in place is taken over in a new epoch stamped with this incarnation
        return Decision(
            Action.APPLY,
            "Balanced",
            f"took over the plan an earlier incarnation of this policy applied ({planned.hash})",
            observed.epoch + 1,
        )
    if decision.action is not Action.APPLY:
        return decision
    if planned.timed_out:
        return Decision(
            Action.APPLY,
            "HandoffTimedOut",
            f"epoch {observed.epoch}: no acknowledgement within apply.handoffTimeout "
            f"({spec.handoff_timeout:g}s) from {handoff.describe_waiting(planned.timed_out)}; "
            f"those partitions stay with their owner (epoch {decision.epoch}) and the move is "
            "retried after rebalance.cooldown. Check that those members' sidecars commit with "
            '{"member", "epoch"} metadata',
            decision.epoch,
        )
    if planned.measuring and not structural and not planned.handoff_done:
        # weightFrom adaptive: the weights are 1 for want of a measurement, and a plan made on
        # them is undone by the first plan made on measured capacity (KIP-794's flapping)
        return Decision(
            Action.HOLD,
            "MeasuringCapacity",
            "a load-following plan waits for the first capacity measurement (weightFrom "
            f"adaptive: a member with a backlog over at least {capacity.MIN_SAMPLES} polls and "
            f"{capacity.MIN_SECONDS:g}s)",
            decision.epoch - 1,
        )
    if observed.mismatch and spec.apply_mode == "assign":
        # manual commits are refused while members have joined: a revoke could never be
        # acknowledged, so no new epoch until the group is left to the sidecars
        return Decision(Action.HOLD, "ProtocolMismatch", "a new plan is held", decision.epoch - 1)
    return decision
