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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kafka_rebalance_assignors.share import (
    PartitionLoad,
    ShareMemberInput,
    ShareRequest,
    plan_share,
)
from kafka_rebalance_assignors.share_simple import simple_assignment

from kafka_rebalance_pipeline import replay_loop
from kafka_rebalance_pipeline.poll_grid import carry_forward, layout, number, production_rates
from kafka_rebalance_pipeline.replay_loop import Outcome, PlanCandidate, ReplayState
from kafka_rebalance_pipeline.schema import SHARE, SHARE_MEMBER
from kafka_rebalance_pipeline.share_simulate import estimate_capacity, share_drain_step
from kafka_rebalance_pipeline.simulate import percentile

SIMPLE = "simple"
PLANNED = "share"
TopicPartition = tuple[str, int]
Assignment = dict[str, tuple[int, ...]]  # member -> partition indices, sorted


@dataclass(frozen=True)
class ShareCandidate(PlanCandidate):
    """One point of the share grid (`replay_loop.PlanCandidate`); `simple` has no options."""

    BASELINE: ClassVar[str] = SIMPLE


def share_grid() -> list[ShareCandidate]:
    """`simple` first (the current policy), then the planner over drain times {60 s, 300 s} x
    move budgets {none, 25%} x cooldowns {0, 5m}."""
    return ShareCandidate.grid(PLANNED)


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
            value = number(row.get("throughput"))
            if row.get("owner") and value is not None:
                throughput.setdefault(str(row["owner"]), []).append(value)
        elif row.get("kind") == SHARE:
            share_rows.append(row)
    ts_ms, partitions, poll, index = layout(share_rows, "topic")
    polls, count = len(ts_ms), len(partitions)
    log_end: list[list[float | None]] = [[None] * count for _ in range(polls)]
    backlog: list[list[float | None]] = [[None] * count for _ in range(polls)]
    rate: list[list[float | None]] = [[None] * count for _ in range(polls)]
    holders: list[list[tuple[str, ...] | None]] = [[None] * count for _ in range(polls)]
    for r in share_rows:
        t, p = poll[int(r["ts_ms"])], index[(r["topic"], int(r["partition"]))]
        log_end[t][p] = number(r.get("log_end"))
        backlog[t][p] = number(r.get("lag"))
        rate[t][p] = number(r.get("rate"))
        members = r.get("members")
        holders[t][p] = tuple(sorted(str(m) for m in members)) if members is not None else None
    carry_forward(log_end)
    carry_forward(backlog)
    carry_forward(holders)
    ts_s = [ts / 1000.0 for ts in ts_ms]
    rates = production_rates(log_end, rate, ts_s)
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
class ShareReplayResult(Outcome):
    """A share replay's scores, and its candidate and shape at the end."""

    candidate: ShareCandidate = ShareCandidate(SIMPLE)
    members_per_partition: list[int] = field(default_factory=list)  # at the end of the replay


def _pairs(assignment: Assignment) -> set[tuple[str, int]]:
    return {(m, p) for m, parts in assignment.items() for p in parts}


@dataclass(frozen=True)
class _ShareKind:
    """The share model and assignors for `replay_loop.replay` (module docstring)."""

    history: ShareHistory

    def advance(self, state: ReplayState[Assignment], t: int) -> None:
        history = self.history
        dt = history.ts_s[t] - history.ts_s[t - 1]
        rates = history.rates[t]
        backlog, used = share_drain_step(
            state.backlog, rates, state.assignment, history.capacity, dt
        )
        state.record(backlog, used, rates, dt)

    def restrict(self, assignment: Assignment, present: Sequence[str]) -> Assignment:
        return {m: assignment.get(m, ()) for m in present}

    def baseline(self, present: Sequence[str], assignment: Assignment, t: int) -> Assignment:
        keyed = [("", p) for p in range(len(self.history.partitions))]
        current = {m: frozenset(("", p) for p in assignment.get(m, ())) for m in present}
        result = simple_assignment(list(present), keyed, current)
        return {m: tuple(sorted(p for _t, p in parts)) for m, parts in sorted(result.items())}

    def plan(
        self,
        candidate: PlanCandidate,
        state: ReplayState[Assignment],
        present: Sequence[str],
        t: int,
    ) -> tuple[Assignment, float | None, float | None]:
        history = self.history
        partitions = history.partitions
        topics = frozenset(t for t, _p in partitions)
        request = ShareRequest(
            partitions={
                tp: PartitionLoad(history.rates[t][i], state.backlog[i])
                for i, tp in enumerate(partitions)
            },
            members={m: ShareMemberInput(m, topics, 1.0) for m in present},
            current={
                m: frozenset(partitions[p] for p in state.assignment.get(m, ())) for m in present
            },
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

    def covered(self, assignment: Assignment) -> bool:
        held = {p for parts in assignment.values() for p in parts}
        return len(held) == len(self.history.partitions)

    def applied(self, before: Assignment, after: Assignment, t: int) -> int:
        return len(_pairs(before) ^ _pairs(after))


def replay_share(
    history: ShareHistory,
    candidate: ShareCandidate,
    *,
    slo_s: float = 60.0,
    series_points: int = 120,
) -> ShareReplayResult:
    """Replay the history under `candidate` (module docstring for the rules). Members weigh 1 in
    the plan, as the operator plans share consumers; the model drains with their capacities."""
    first = history.assignments[0] if history.polls else {}
    state = ReplayState(dict(first), list(history.backlog[0]) if history.polls else [])
    error = replay_loop.replay(_ShareKind(history), candidate, state, history.ts_s, history.members)
    result = replay_loop.outcome(
        state, history.capacity, error, slo_s=slo_s, series_points=series_points
    )
    per_partition = [0] * len(history.partitions)
    for parts in state.assignment.values():
        for p in parts:
            per_partition[p] += 1
    return ShareReplayResult(
        result.score,
        result.utilisation,
        result.lag_series,
        result.error,
        candidate=candidate,
        members_per_partition=[] if error else per_partition,
    )


def share_result_row(
    history: ShareHistory, result: ShareReplayResult, is_current: bool
) -> dict[str, Any]:
    """One backtest output row (the Parquet schema of `backtest_job`), `group_type` "share"."""
    key = {
        "cluster": history.cluster,
        "namespace": history.namespace,
        "policy": history.policy,
        "group": history.group,
    }
    row = replay_loop.result_row(
        key,
        result.candidate,
        result,
        group_type="share",
        units=len(history.partitions),
        polls=history.polls,
        capacity=history.capacity,
        no_capacity="no member capacity: no throughput row, no busy partition",
    )
    row["is_current"] = is_current
    row["members_per_partition_json"] = json.dumps(result.members_per_partition)
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
