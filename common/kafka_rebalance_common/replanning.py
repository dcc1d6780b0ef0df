"""When a new plan replaces the applied one: the rules the operator runs every poll, and the
pipeline's replay runs at every replayed poll, so a backtest scores what the operator would do.

Pure: no I/O, no clock (the caller says what time it is), no module state.

Precedence, highest first: an unchanged plan is never a change; observe mode never writes; a
hand-over the user already approved is finished; a plan the group needs for coverage
(`structural`) skips cooldown and minImprovement; approval gates everything else.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Action(enum.StrEnum):
    """What a poll does with its plan. The values are the words logs and tests use."""

    APPLY = "apply"  # write the plan in a new epoch
    REPAIR = "repair"  # rewrite the applied plan's ConfigMaps at the current epoch
    NOOP = "noop"  # the applied plan is current
    HOLD = "hold"  # a better plan waits: cooldown, too small a gain, or a protocol mismatch
    PROPOSE = "propose"  # waiting for approval (spec.approvedPlan)
    OBSERVE = "observe"  # observe mode: status only


@dataclass(frozen=True)
class Rules:
    """The policy fields the decision reads (spec.rebalance), cooldown already in seconds and
    scaled as the caller runs it."""

    mode: str = "enforce"  # enforce | propose | observe
    cooldown_s: float = 0.0
    min_improvement: float = 0.0
    needs_approval: bool = False  # mode propose, or approval Manual
    approved_plan: str | None = None


@dataclass(frozen=True)
class Decision:
    """What this poll does, why (a condition reason), a one-line message, and the epoch the
    documents carry afterwards (current + 1 only for APPLY)."""

    action: Action
    reason: str
    message: str
    epoch: int


def cooldown_left(rules: Rules, now: float, last_applied_at: float | None) -> float:
    """Seconds until a rebalance may replace the last applied plan (0: it may now)."""
    if last_applied_at is None:
        return 0.0
    return max(0.0, rules.cooldown_s - (now - last_applied_at))


def decide(
    rules: Rules,
    *,
    now: float,
    new_hash: str,
    applied_hash: str | None,
    current_epoch: int,
    writes_needed: bool,
    structural: bool,
    last_applied_at: float | None,
    ratio_before: float | None,
    ratio_after: float | None,
    moves: int,
    force: bool = False,
) -> Decision:
    """The mode, approval, cooldown and minImprovement rules (module docstring for the order).

    `writes_needed`: the applied plan's ConfigMaps differ from what they should hold.
    `structural`: the applied plan no longer covers the group (or the spec changed).
    `force`: finishing an assign-mode hand-over (its plan was already decided).
    """
    if applied_hash is not None and new_hash == applied_hash:
        if writes_needed and rules.mode != "observe":
            return Decision(
                Action.REPAIR, "Balanced", "rewrote ConfigMaps of the applied plan", current_epoch
            )
        return Decision(Action.NOOP, "Balanced", "the applied plan is current", current_epoch)
    if rules.mode == "observe":
        return Decision(
            Action.OBSERVE,
            "Observing",
            f"observe mode: a plan would move {moves} partitions",
            current_epoch,
        )
    if force:
        return Decision(
            Action.APPLY,
            "Balanced",
            f"granted revoked partitions (plan {new_hash})",
            current_epoch + 1,
        )
    if not structural:
        left = cooldown_left(rules, now, last_applied_at)
        if left > 0:
            return Decision(
                Action.HOLD,
                "CoolingDown",
                f"a better plan waits for the cooldown ({left:.0f}s left)",
                current_epoch,
            )
        if ratio_before is not None and ratio_after is not None:
            gain = ratio_before - ratio_after
            if gain < rules.min_improvement * ratio_before or gain <= 0:
                return Decision(
                    Action.HOLD,
                    "Balanced",
                    f"maxLoadRatio {ratio_before:.3f} -> {ratio_after:.3f} is below "
                    f"minImprovement {rules.min_improvement}",
                    current_epoch,
                )
    if rules.needs_approval and rules.approved_plan != new_hash:
        return Decision(
            Action.PROPOSE,
            "AwaitingApproval",
            f"plan {new_hash} moves {moves} partitions; set spec.approvedPlan to apply it",
            current_epoch,
        )
    return Decision(
        Action.APPLY, "Balanced", f"applied plan {new_hash} ({moves} moves)", current_epoch + 1
    )
