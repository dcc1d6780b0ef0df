"""Decide: what this poll does with its plan, for every group kind. Pure: no I/O, no memory,
time given.

Each group kind (`groups/`) states what it knows as `PlanFacts`: the plan's hash and the one in
place, the epoch, the peak load before and after, the moves, and its own reasons to go ahead
(`structural`) or to hold (`held`). One function then applies the replanning rules of
`kafka_rebalance_common.replanning` (unchanged plan, observe mode, cooldown, minImprovement,
approval; the pipeline's replay runs the same code) and the operator's own, in this order:

- an incarnation that inherits the plan in place takes it over in a new epoch;
- a hand-over that timed out is settled in a new epoch, and says who did not acknowledge;
- a load-following plan waits for the first capacity measurement (weightFrom adaptive: a plan
  made on default weights is undone by the first plan made on measured ones, KIP-794);
- a kind's own hold (a protocol mismatch) keeps the epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafka_rebalance_common import replanning
from kafka_rebalance_common.replanning import Action, Decision, Rules

from kafka_rebalance_operator import capacity
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.policy import PolicySpec

__all__ = ["Action", "Decision", "PlanFacts", "Stop", "Wait", "decide", "rules"]


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


@dataclass(frozen=True)
class PlanFacts:
    """What a group kind knows about this poll's plan against the plan in place.

    `ratio_before`/`ratio_after` are the peak load per unit of capacity of the plan in place
    and of the new plan, for this poll's loads (None: unknown, never a reason to hold).
    `structural`: the group needs a plan regardless of gain (unowned partitions or tasks, a
    spec change, a document to write again): cooldown and minImprovement do not hold it.
    `writes_needed`: the plan in place is current but what members are shown differs from it.
    """

    new_hash: str
    applied_hash: str | None
    epoch: int
    last_applied_at: float | None
    ratio_before: float | None
    ratio_after: float | None
    moves: int
    structural: bool = False
    writes_needed: bool = False
    handoff_done: bool = False  # assign mode: the revoke of the applied epoch is over
    inherited: bool = False  # a recreated policy found its earlier incarnation's plan
    timed_out: str | None = None  # a hand-over nobody acknowledged in time: who, as text
    measuring: bool = False  # weightFrom adaptive, no capacity measured yet
    held: tuple[str, str] | None = None  # a kind's own (reason, message) to hold a new epoch


def rules(spec: PolicySpec) -> Rules:
    return Rules(
        mode=spec.mode,
        cooldown_s=spec.cooldown,
        min_improvement=spec.min_improvement,
        needs_approval=spec.needs_approval,
        approved_plan=spec.approved_plan,
    )


def decide(spec: PolicySpec, facts: PlanFacts, now: float) -> Decision:
    decision = replanning.decide(
        rules(spec),
        now=now,
        new_hash=facts.new_hash,
        applied_hash=facts.applied_hash,
        current_epoch=facts.epoch,
        writes_needed=facts.writes_needed,
        structural=facts.structural,
        last_applied_at=facts.last_applied_at,
        ratio_before=facts.ratio_before,
        ratio_after=facts.ratio_after,
        moves=facts.moves,
        force=facts.handoff_done and spec.mode != "observe",
    )
    if facts.inherited and decision.action in (Action.NOOP, Action.REPAIR):
        # a policy deleted and created again: its epochs restart above everything seen, and the
        # plan in place is taken over in a new epoch stamped with this incarnation
        return Decision(
            Action.APPLY,
            "Balanced",
            f"took over the plan an earlier incarnation of this policy applied ({facts.new_hash})",
            facts.epoch + 1,
        )
    if decision.action is not Action.APPLY:
        return decision
    if facts.timed_out is not None:
        return Decision(
            Action.APPLY,
            "HandoffTimedOut",
            f"epoch {facts.epoch}: no acknowledgement within apply.handoffTimeout "
            f"({spec.handoff_timeout:g}s) from {facts.timed_out}; those partitions stay with "
            f"their owner (epoch {decision.epoch}) and the move is retried after "
            "rebalance.cooldown. Check that those members' sidecars commit with "
            '{"member", "epoch"} metadata',
            decision.epoch,
        )
    if facts.measuring and not facts.structural and not facts.handoff_done:
        return Decision(
            Action.HOLD,
            "MeasuringCapacity",
            "a load-following plan waits for the first capacity measurement (weightFrom "
            f"adaptive: a member with a backlog over at least {capacity.MIN_SAMPLES} polls and "
            f"{capacity.MIN_SECONDS:g}s)",
            facts.epoch,
        )
    if facts.held is not None:
        reason, message = facts.held
        return Decision(Action.HOLD, reason, message, facts.epoch)
    return decision
