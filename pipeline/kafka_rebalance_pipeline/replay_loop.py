"""The replay loop shared by the group kinds whose policy is "a baseline assignor, or the
operator's planner with a drain time, a move budget and a cooldown" (share and streams groups).

A kind supplies its model and its assignors as a `Kind` (how an interval plays out, what the
baseline assigns, what the planner plans, how moves are counted); this module runs the polls,
decides as the operator does and scores the result. Pure: no I/O.

Invariants: every candidate of a group replays the same history from the same first assignment
(the one the telemetry shows at the first poll); the baseline is recomputed only when
membership changes (it is blind to load, as Kafka's assignors are); a plan is applied as the
operator's decide() would (work without a member is planned at once, otherwise the cooldown
holds it); a planner that raises fails that candidate only (its row names the error).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from kafka_rebalance_common import replanning

from kafka_rebalance_pipeline.simulate import Score, score, time_lag

A = TypeVar("A")  # a kind's assignment: member -> what it holds
C = TypeVar("C", bound="PlanCandidate")


@dataclass(frozen=True)
class PlanCandidate:
    """One point of a grid, in the policy's terms (`load.targetDrainSeconds`,
    `rebalance.maxMovesPerRound`, `rebalance.cooldown`); the baseline (`BASELINE`, set by each
    kind's subclass) has no options."""

    BASELINE: ClassVar[str] = "baseline"

    strategy: str  # BASELINE, or the kind's planned strategy
    drain_s: float = 300.0
    max_moves: str | None = None  # "25%" or "4", as spec.rebalance.maxMovesPerRound
    cooldown_s: float = 0.0

    @property
    def is_baseline(self) -> bool:
        return self.strategy == self.BASELINE

    @property
    def id(self) -> str:
        if self.is_baseline:
            return self.strategy
        parts = [self.strategy, f"drainSeconds={self.drain_s:g}"]
        if self.max_moves is not None:
            parts.append(f"maxMoves={self.max_moves}")
        parts.append(f"cooldown={self.cooldown_s:g}s")
        return " ".join(parts)

    def move_budget(self, units: int) -> int | None:
        """maxMovesPerRound as a number of move units out of `units`, as the operator counts
        it (`PolicySpec.move_budget`: "25%" of 8 -> 2)."""
        if self.max_moves is None:
            return None
        if self.max_moves.endswith("%"):
            return max(1, math.ceil(units * float(self.max_moves[:-1]) / 100.0))
        return max(1, int(self.max_moves))

    @classmethod
    def grid(cls: type[C], planned: str) -> list[C]:
        """The baseline first (the current policy), then `planned` over drain times
        {60 s, 300 s} x move budgets {none, 25%} x cooldowns {0, 5m}."""
        return [cls(cls.BASELINE)] + [
            cls(planned, drain_s=d, max_moves=m, cooldown_s=c)
            for d in (60.0, 300.0)
            for m in (None, "25%")
            for c in (0.0, 300.0)
        ]


@dataclass
class ReplayState(Generic[A]):
    """Where a replay is: the assignment in force, the simulated backlog per unit of work
    (partition or task), and what the scores are made of."""

    assignment: A
    backlog: list[float]
    moves: int = 0
    epochs: int = 0
    plans: int = 0
    last_applied: float | None = None
    totals: list[float] = field(default_factory=list)
    worst: list[float] = field(default_factory=list)
    dts: list[float] = field(default_factory=list)
    consumed: dict[str, float] = field(default_factory=dict)

    def record(
        self, backlog: list[float], used: Mapping[str, float], rates: Sequence[float], dt: float
    ) -> None:
        """One interval of `dt` seconds played out: the new backlog, what each member consumed."""
        self.backlog = backlog
        for member, amount in used.items():
            self.consumed[member] = self.consumed.get(member, 0.0) + amount
        self.dts.append(dt)
        self.totals.append(sum(backlog))
        self.worst.append(
            max((time_lag(v, r) for v, r in zip(backlog, rates, strict=True)), default=0)
        )

    def apply(self, target: A, now: float, moves: int) -> None:
        self.moves += moves
        self.epochs += 1
        self.last_applied = now
        self.assignment = target


class Kind(Protocol[A]):
    """What a group kind gives the loop. `t` is a poll index of the kind's history."""

    def advance(self, state: ReplayState[A], t: int) -> None:
        """Play out the interval ending at poll t (`state.record`)."""

    def restrict(self, assignment: A, present: Sequence[str]) -> A:
        """`assignment` without the members gone, with the members new (holding nothing)."""

    def baseline(self, present: Sequence[str], assignment: A, t: int) -> A:
        """What the baseline assignor gives `present`, sticky to `assignment`."""

    def plan(
        self, candidate: PlanCandidate, state: ReplayState[A], present: Sequence[str], t: int
    ) -> tuple[A, float | None, float | None]:
        """The planner's target and its peak load ratio before and after."""

    def covered(self, assignment: A) -> bool:
        """Whether every unit of work has a member."""

    def applied(self, before: A, after: A, t: int) -> int:
        """The change from `before` to `after` takes effect at poll t (a kind starts its
        hand-over here); what it counts against maxMovesPerRound."""


def replay(
    kind: Kind[A],
    candidate: PlanCandidate,
    state: ReplayState[A],
    ts_s: Sequence[float],
    members: Sequence[tuple[str, ...]],
) -> str | None:
    """Run the polls under `candidate` from `state` (updated in place); the planner's error
    ("Type: message") when it raised, else None."""
    rules = replanning.Rules(cooldown_s=candidate.cooldown_s)
    previous: tuple[str, ...] | None = None
    for t, now in enumerate(ts_s):
        if t > 0:
            kind.advance(state, t)
        present = members[t]
        if not present:
            continue
        changed = present != previous
        previous = present
        if changed:
            state.assignment = kind.restrict(state.assignment, present)
        if candidate.is_baseline:
            if changed:
                target = kind.baseline(present, state.assignment, t)
                state.plans += 1
                if target != state.assignment:
                    state.apply(target, now, kind.applied(state.assignment, target, t))
            continue
        structural = not kind.covered(state.assignment)
        if not structural and replanning.cooldown_left(rules, now, state.last_applied) > 0:
            continue
        try:
            target, before, after = kind.plan(candidate, state, present, t)
        except Exception as exc:  # a planner bug must not kill the other groups' backtests
            return f"{type(exc).__name__}: {exc}"
        state.plans += 1
        in_place = f"epoch {state.epochs}"
        decision = replanning.decide(
            rules,
            now=now,
            new_hash=in_place if target == state.assignment else f"epoch {state.epochs + 1}",
            applied_hash=in_place,
            current_epoch=state.epochs,
            writes_needed=False,
            structural=structural,
            last_applied_at=state.last_applied,
            ratio_before=before,
            ratio_after=after,
            moves=0,
        )
        if decision.action is replanning.Action.APPLY:
            state.apply(target, now, kind.applied(state.assignment, target, t))
    return None


@dataclass
class Outcome:
    """A finished replay's scores, as every kind's output row carries them."""

    score: Score
    utilisation: dict[str, float]  # member -> mean consumed / capacity
    lag_series: list[float]  # group total backlog, downsampled
    error: str | None = None


def outcome(
    state: ReplayState[Any],
    capacity: Mapping[str, float],
    error: str | None,
    *,
    slo_s: float,
    series_points: int = 120,
) -> Outcome:
    """The scores of a replay (`replay`); a failed one scores zeros and names its error."""
    if error is not None:
        return Outcome(score([0.0], [0.0], [0.0], slo_s, 0, 0, 0), {}, [], error)
    duration = sum(state.dts)
    utilisation = {
        m: round(state.consumed.get(m, 0.0) / duration / capacity[m], 4)
        for m in sorted(capacity)
        if duration > 0 and capacity[m] > 0
    }
    step = max(1, math.ceil(len(state.totals) / series_points)) if state.totals else 1
    return Outcome(
        score(state.totals, state.worst, state.dts, slo_s, state.moves, state.epochs, state.plans),
        utilisation,
        [round(v, 1) for v in state.totals[::step]],
    )


def result_row(
    key: Mapping[str, str],
    candidate: PlanCandidate,
    result: Outcome,
    *,
    group_type: str,
    units: int,
    polls: int,
    capacity: Mapping[str, float],
    no_capacity: str,
) -> dict[str, Any]:
    """One backtest output row (the Parquet schema of `backtest_job`) of a baseline-or-planner
    candidate; `key` has cluster, namespace, policy and group; `units` is the partitions (or
    tasks) column. The kind adds its own columns (`members_per_partition_json`)."""
    row: dict[str, Any] = {
        **{k: key[k] for k in ("cluster", "namespace", "policy", "group")},
        "candidate": candidate.id,
        "strategy": candidate.strategy,
        "weights": "none",
        "min_improvement": 0.0,
        "max_moves": candidate.max_moves,
        "cooldown_s": float(candidate.cooldown_s),
        "is_current": candidate.is_baseline,
        "current_strategy": candidate.BASELINE,
        "partitions": units,
        "polls": polls,
        "error": result.error or (None if capacity else no_capacity),
        "utilisation_json": json.dumps(result.utilisation, sort_keys=True),
        "weights_json": "{}",
        "capacity_json": json.dumps(
            {m: round(v, 3) for m, v in sorted(capacity.items())}, sort_keys=True
        ),
        "lag_series_json": json.dumps(result.lag_series),
        "group_type": group_type,
        "drain_s": None if candidate.is_baseline else float(candidate.drain_s),
        "members_per_partition_json": None,
    }
    for name, value in result.score.as_dict().items():
        row[name] = float(value) if isinstance(value, float) else int(value)
    for name in ("max_lag", "p99_lag", "mean_lag", "time_over_slo_s", "duration_s"):
        row[name] = float(row[name]) if math.isfinite(row[name]) else None
    return row
