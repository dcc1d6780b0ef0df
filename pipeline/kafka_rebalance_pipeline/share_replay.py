"""Replay one share group's history under `simple` and under candidate share plans.

A candidate is either `simple` (Kafka's built-in share assignor, `share_simple`: the shape a
share group has without a plan, and the current policy the others are judged against) or the
share planner (`kafka_rebalance_assignors.share.plan_share`) with a drain time, a move budget
and a cooldown, as a `spec.groupType: share` policy sets them. The replay does at every poll what
the brokers or the operator would have done, knowing only what they knew then (the simulated
backlog at the poll, the production rate of the interval before it), and lets the share model
(`share_simulate.share_drain_step`) play out the next interval with the production that really
happened. Pure: no I/O; the Spark job (`backtest_job`) feeds it one group's rows.

Invariants: every candidate of a group replays the same history from the same first
assignment (the one the telemetry shows at the first poll); `simple` is recomputed only when
membership changes (it is blind to load); a plan is applied as the operator's decide() would
(a partition without a member is planned at once, otherwise the cooldown holds it); moves count
(member, partition) pairs added or dropped, as `maxMovesPerRound` does for share groups.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_assignors.share import (
    PartitionLoad,
    ShareMemberInput,
    ShareRequest,
    plan_share,
)
from kafka_rebalance_assignors.share_simple import simple_assignment
from kafka_rebalance_common import replanning

from kafka_rebalance_pipeline.poll_grid import carry_forward, log_end_rates
from kafka_rebalance_pipeline.schema import SHARE, SHARE_MEMBER
from kafka_rebalance_pipeline.share_simulate import estimate_capacity, share_drain_step
from kafka_rebalance_pipeline.simulate import Score, percentile, score, time_lag

SIMPLE = "simple"
PLANNED = "share"
TopicPartition = tuple[str, int]
Assignment = dict[str, tuple[int, ...]]  # member -> partition indices, sorted


@dataclass(frozen=True)
class ShareCandidate:
    """One point of the share grid, in the policy's terms (`load.targetDrainSeconds`,
    `rebalance.maxMovesPerRound`, `rebalance.cooldown`); `simple` has no options."""

    strategy: str  # SIMPLE | PLANNED
    drain_s: float = 300.0
    max_moves: str | None = None  # "25%" or "4", as spec.rebalance.maxMovesPerRound
    cooldown_s: float = 0.0

    @property
    def id(self) -> str:
        if self.strategy == SIMPLE:
            return SIMPLE
        parts = [PLANNED, f"drainSeconds={self.drain_s:g}"]
        if self.max_moves is not None:
            parts.append(f"maxMoves={self.max_moves}")
        parts.append(f"cooldown={self.cooldown_s:g}s")
        return " ".join(parts)

    def move_budget(self, partitions: int) -> int | None:
        """maxMovesPerRound as a number of (member, partition) pairs, as the operator counts
        it (`PolicySpec.move_budget`: "25%" of 8 partitions -> 2)."""
        if self.max_moves is None:
            return None
        if self.max_moves.endswith("%"):
            return max(1, math.ceil(partitions * float(self.max_moves[:-1]) / 100.0))
        return max(1, int(self.max_moves))


def share_grid() -> list[ShareCandidate]:
    """`simple` first (the current policy), then the planner over drain times {60 s, 300 s} x
    move budgets {none, 25%} x cooldowns {0, 5m}."""
    return [ShareCandidate(SIMPLE)] + [
        ShareCandidate(PLANNED, drain_s=d, max_moves=m, cooldown_s=c)
        for d in (60.0, 300.0)
        for m in (None, "25%")
        for c in (0.0, 300.0)
    ]


@dataclass
class ShareHistory:
    """One share group's telemetry as aligned lists: poll t, partition index p."""

    cluster: str
    namespace: str
    policy: str
    group: str
    ts_s: list[float]
    partitions: list[TopicPartition]
    rates: list[list[float]]  # production (records/s) in the interval ending at poll t
    backlog: list[list[float]]  # observed backlog at poll t (unknown: the last known, else 0)
    assignments: list[Assignment]  # who held what at poll t, as observed
    members: list[tuple[str, ...]]  # consumers present at poll t
    capacity: dict[str, float]
    capacity_source: str  # "measured" (member throughput rows) | "estimated" | "none"

    @property
    def polls(self) -> int:
        return len(self.ts_s)


def _number(value: Any) -> float | None:
    """A telemetry value as a float; None for null and NaN (pandas' null)."""
    if value is None:
        return None
    number = float(value)
    return number if number == number else None


def share_history_from_rows(
    key: Mapping[str, str], rows: Iterable[Mapping[str, Any]]
) -> ShareHistory:
    """A history from one group's share rows (both kinds, `schema.SHARE_COLUMNS`). A partition
    missing at a poll keeps its last values; rates come from the log end growth, else from the
    row's `rate`; capacity is each member's median measured throughput where share-member rows
    carry one, else one estimate for every member (`share_simulate.estimate_capacity`)."""
    share_rows = []
    throughput: dict[str, list[float]] = {}
    for row in rows:
        if row.get("kind") == SHARE_MEMBER:
            value = _number(row.get("throughput"))
            if row.get("owner") and value is not None:
                throughput.setdefault(str(row["owner"]), []).append(value)
        elif row.get("kind") == SHARE:
            share_rows.append(row)
    ts_ms = sorted({int(r["ts_ms"]) for r in share_rows})
    counts: dict[str, int] = {}
    for r in share_rows:
        counts[r["topic"]] = max(counts.get(r["topic"], 0), int(r["partition"]) + 1)
    partitions = [(t, p) for t, n in sorted(counts.items()) for p in range(n)]
    index = {tp: i for i, tp in enumerate(partitions)}
    poll = {ts: i for i, ts in enumerate(ts_ms)}
    polls, count = len(ts_ms), len(partitions)
    log_end: list[list[float | None]] = [[None] * count for _ in range(polls)]
    backlog: list[list[float | None]] = [[None] * count for _ in range(polls)]
    rate: list[list[float | None]] = [[None] * count for _ in range(polls)]
    holders: list[list[tuple[str, ...] | None]] = [[None] * count for _ in range(polls)]
    for r in share_rows:
        t, p = poll[int(r["ts_ms"])], index[(r["topic"], int(r["partition"]))]
        log_end[t][p] = _number(r.get("log_end"))
        backlog[t][p] = _number(r.get("lag"))
        rate[t][p] = _number(r.get("rate"))
        members = r.get("members")
        holders[t][p] = tuple(sorted(str(m) for m in members)) if members is not None else None
    carry_forward(log_end)
    carry_forward(backlog)
    carry_forward(holders)
    ts_s = [ts / 1000.0 for ts in ts_ms]
    rates = [  # the log end's advance, else the rate the operator reported
        [a if a is not None else max(0.0, rate[t][p] or 0.0) for p, a in enumerate(row)]
        for t, row in enumerate(log_end_rates(log_end, ts_s))
    ]
    if polls > 1 and all(rate[0][p] is None for p in range(count)):
        rates[0] = list(rates[1])
    observed = [[b if b is not None else 0.0 for b in row] for row in backlog]
    assignments: list[Assignment] = []
    for t in range(polls):
        held: dict[str, list[int]] = {}
        for p in range(count):
            for member in holders[t][p] or ():
                held.setdefault(member, []).append(p)
        assignments.append({m: tuple(parts) for m, parts in sorted(held.items())})
    present = [tuple(sorted(a)) for a in assignments]
    capacity, source = _capacity(throughput, observed, rates, assignments, ts_s, present)
    return ShareHistory(
        cluster=str(key.get("cluster", "")),
        namespace=str(key.get("namespace", "")),
        policy=str(key.get("policy", "")),
        group=str(key.get("group", "")),
        ts_s=ts_s,
        partitions=partitions,
        rates=rates,
        backlog=observed,
        assignments=assignments,
        members=present,
        capacity=capacity,
        capacity_source=source,
    )


def _capacity(
    throughput: Mapping[str, list[float]],
    backlog: list[list[float]],
    rates: list[list[float]],
    assignments: list[Assignment],
    ts_s: list[float],
    present: list[tuple[str, ...]],
) -> tuple[dict[str, float], str]:
    members = sorted({m for ms in present for m in ms} | set(throughput))
    measured = {m: percentile(v, 50.0) for m, v in throughput.items() if v}
    if measured:
        fallback = percentile(list(measured.values()), 50.0)
        return {m: measured.get(m, fallback) for m in members}, "measured"
    dts = [0.0] + [ts_s[t] - ts_s[t - 1] for t in range(1, len(ts_s))]
    produced = [[r * dts[t] for r in rates[t]] for t in range(len(ts_s))]
    # the interval ending at poll t ran on the assignment observed at poll t - 1
    ran: list[Assignment] = [{}, *assignments[:-1]] if assignments else []
    estimate = estimate_capacity(backlog, produced, ran, dts)
    if estimate is None:
        return {}, "none"
    return {m: estimate for m in members}, "estimated"


@dataclass
class ShareReplayResult:
    candidate: ShareCandidate
    score: Score
    utilisation: dict[str, float]  # member -> mean consumed / capacity
    lag_series: list[float]  # group total backlog, downsampled
    members_per_partition: list[int]  # at the end of the replay
    error: str | None = None


@dataclass
class _State:
    assignment: Assignment
    backlog: list[float]
    moves: int = 0
    epochs: int = 0
    plans: int = 0
    last_applied: float | None = None
    totals: list[float] = field(default_factory=list)
    worst: list[float] = field(default_factory=list)
    dts: list[float] = field(default_factory=list)
    consumed: dict[str, float] = field(default_factory=dict)

    def advance(self, history: ShareHistory, t: int) -> None:
        dt = history.ts_s[t] - history.ts_s[t - 1]
        rates = history.rates[t]
        self.backlog, used = share_drain_step(
            self.backlog, rates, self.assignment, history.capacity, dt
        )
        for member, amount in used.items():
            self.consumed[member] = self.consumed.get(member, 0.0) + amount
        self.dts.append(dt)
        self.totals.append(sum(self.backlog))
        self.worst.append(
            max((time_lag(v, r) for v, r in zip(self.backlog, rates, strict=True)), default=0)
        )

    def apply(self, target: Assignment, now: float) -> None:
        before = {(m, p) for m, parts in self.assignment.items() for p in parts}
        after = {(m, p) for m, parts in target.items() for p in parts}
        self.moves += len(before ^ after)
        self.epochs += 1
        self.last_applied = now
        self.assignment = target


def _covered(assignment: Assignment, partitions: int) -> bool:
    held = {p for parts in assignment.values() for p in parts}
    return len(held) == partitions


def _simple(history: ShareHistory, present: Sequence[str], current: Assignment) -> Assignment:
    tps = list(range(len(history.partitions)))
    keyed = [("", p) for p in tps]
    result = simple_assignment(
        list(present), keyed, {m: frozenset(("", p) for p in current.get(m, ())) for m in present}
    )
    return {m: tuple(sorted(p for _t, p in parts)) for m, parts in sorted(result.items())}


def _planned(
    history: ShareHistory, candidate: ShareCandidate, state: _State, present: Sequence[str], t: int
) -> tuple[Assignment, float | None, float | None]:
    partitions = history.partitions
    topics = frozenset(t for t, _p in partitions)
    request = ShareRequest(
        partitions={
            tp: PartitionLoad(history.rates[t][i], state.backlog[i])
            for i, tp in enumerate(partitions)
        },
        members={m: ShareMemberInput(m, topics, 1.0) for m in present},
        current={m: frozenset(partitions[p] for p in state.assignment.get(m, ())) for m in present},
        drain_seconds=candidate.drain_s,
        max_moves=candidate.move_budget(len(partitions)),
    )
    plan = plan_share(request)
    index = {tp: i for i, tp in enumerate(partitions)}
    target = {
        m: tuple(sorted(index[(topic, p)] for topic, parts in topics_.items() for p in parts))
        for m, topics_ in sorted(plan.assignment.items())
    }
    return target, plan.peak_before, plan.peak_after


def replay_share(
    history: ShareHistory,
    candidate: ShareCandidate,
    *,
    slo_s: float = 60.0,
    series_points: int = 120,
) -> ShareReplayResult:
    """Replay the history under `candidate` (module docstring for the rules). Members weigh 1 in
    the plan, as the operator plans share consumers; the model drains with their capacities."""
    count = len(history.partitions)
    first = history.assignments[0] if history.polls else {}
    state = _State(dict(first), list(history.backlog[0]) if history.polls else [])
    rules = replanning.Rules(cooldown_s=candidate.cooldown_s)
    previous: tuple[str, ...] | None = None
    for t in range(history.polls):
        now = history.ts_s[t]
        if t > 0:
            state.advance(history, t)
        present = history.members[t]
        if not present:
            continue
        changed = present != previous
        previous = present
        if changed:
            state.assignment = {m: state.assignment.get(m, ()) for m in present}
        if candidate.strategy == SIMPLE:
            if changed:
                target = _simple(history, present, state.assignment)
                state.plans += 1
                if target != state.assignment:
                    state.apply(target, now)
            continue
        structural = not _covered(state.assignment, count)
        if not structural and replanning.cooldown_left(rules, now, state.last_applied) > 0:
            continue
        try:
            target, before, after = _planned(history, candidate, state, present, t)
        except Exception as exc:  # a planner bug must not kill the other groups' backtests
            return ShareReplayResult(
                candidate, score([0.0], [0.0], [0.0], slo_s, 0, 0, 0), {}, [], [],
                error=f"{type(exc).__name__}: {exc}",
            )  # fmt: skip
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
            state.apply(target, now)
    duration = sum(state.dts)
    utilisation = {
        m: round(state.consumed.get(m, 0.0) / duration / history.capacity[m], 4)
        for m in sorted(history.capacity)
        if duration > 0 and history.capacity[m] > 0
    }
    per_partition = [0] * count
    for parts in state.assignment.values():
        for p in parts:
            per_partition[p] += 1
    step = max(1, math.ceil(len(state.totals) / series_points)) if state.totals else 1
    return ShareReplayResult(
        candidate=candidate,
        score=score(
            state.totals, state.worst, state.dts, slo_s, state.moves, state.epochs, state.plans
        ),
        utilisation=utilisation,
        lag_series=[round(v, 1) for v in state.totals[::step]],
        members_per_partition=per_partition,
    )


def share_result_row(
    history: ShareHistory, result: ShareReplayResult, is_current: bool
) -> dict[str, Any]:
    """One backtest output row (the Parquet schema of `backtest_job`), `group_type` "share"."""
    c = result.candidate
    row: dict[str, Any] = {
        "cluster": history.cluster,
        "namespace": history.namespace,
        "policy": history.policy,
        "group": history.group,
        "candidate": c.id,
        "strategy": c.strategy,
        "weights": "none",
        "min_improvement": 0.0,
        "max_moves": c.max_moves,
        "cooldown_s": float(c.cooldown_s),
        "is_current": is_current,
        "current_strategy": SIMPLE,
        "partitions": len(history.partitions),
        "polls": history.polls,
        "error": result.error
        or (
            None if history.capacity else "no member capacity: no throughput row, no busy partition"
        ),
        "utilisation_json": json.dumps(result.utilisation, sort_keys=True),
        "weights_json": "{}",
        "capacity_json": json.dumps(
            {m: round(v, 3) for m, v in sorted(history.capacity.items())}, sort_keys=True
        ),
        "lag_series_json": json.dumps(result.lag_series),
        "group_type": "share",
        "drain_s": float(c.drain_s) if c.strategy == PLANNED else None,
        "members_per_partition_json": json.dumps(result.members_per_partition),
    }
    for name, value in result.score.as_dict().items():
        row[name] = float(value) if isinstance(value, float) else int(value)
    for name in ("max_lag", "p99_lag", "mean_lag", "time_over_slo_s", "duration_s"):
        row[name] = float(row[name]) if math.isfinite(row[name]) else None
    return row


def backtest_share_group(
    history: ShareHistory, grid: Sequence[ShareCandidate] | None = None, *, slo_s: float = 60.0
) -> list[dict[str, Any]]:
    """Every candidate of `grid` (default `share_grid()`) for one share group, as output rows;
    `simple` is the current policy."""
    candidates = share_grid() if grid is None else list(grid)
    return [
        share_result_row(history, replay_share(history, c, slo_s=slo_s), c.strategy == SIMPLE)
        for c in candidates
    ]
