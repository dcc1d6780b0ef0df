"""Replay one streams group's history under Kafka's `sticky` task assignor and under candidate
task plans.

A candidate is either `sticky` (the shape of Kafka's default streams task assignor,
`streams_sticky`: what a streams group runs without a plan, and the current policy the others
are judged against) or the operator's task planner (`kafka_rebalance_assignors.streams_tasks.
plan_tasks`, strategy lag-aware, as a `spec.groupType: streams` policy runs it) with a drain
time, a move budget (in the planner's move cost units) and a cooldown. The loop is
`replay_loop.replay`; the model is `streams_simulate` (each member drains its tasks with its
capacity; a moved task pauses for the hand-over, longer for a stateful one restored off its
standbys). Pure: no I/O; the Spark job (`backtest_job`) feeds it one group's rows.

Invariants: what `replay_loop` promises; every task has one member or none; standbys are the
ones the telemetry shows at each poll (neither candidate's own standby placement is replayed);
moves count tasks whose member changed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import kafka_rebalance_assignors as assignors
from kafka_rebalance_assignors import streams_tasks

from kafka_rebalance_pipeline import replay_loop
from kafka_rebalance_pipeline.poll_grid import carry_forward, layout, number, production_rates
from kafka_rebalance_pipeline.replay import capacity_weights
from kafka_rebalance_pipeline.replay_loop import Outcome, PlanCandidate, ReplayState
from kafka_rebalance_pipeline.schema import STREAMS
from kafka_rebalance_pipeline.simulate import drain_step
from kafka_rebalance_pipeline.streams_simulate import fill_capacity, member_capacity, pauses
from kafka_rebalance_pipeline.streams_sticky import sticky_tasks

STICKY = "sticky"
PLANNED = "streams"
STRATEGY = "lag-aware"  # the task planner's strategy in a streams policy by default
MIN_IMPROVEMENT = 0.1  # spec.rebalance.minImprovement's default, as the operator plans
Task = tuple[str, int]
Assignment = dict[str, tuple[int, ...]]  # member -> task indices, sorted


@dataclass(frozen=True)
class StreamsCandidate(PlanCandidate):
    """One point of the streams grid (`replay_loop.PlanCandidate`); `sticky` has no options.
    `weights` "adaptive" plans with capacity weights (`spec.members.weightFrom: adaptive`: each
    member's measured capacity over the fastest's), "none" with every member at 1."""

    BASELINE: ClassVar[str] = STICKY

    weights: str = "none"

    @property
    def id(self) -> str:
        base = super().id
        return base if self.weights == "none" else f"{base} weightFrom={self.weights}"


def streams_grid() -> list[StreamsCandidate]:
    """`sticky` first (the current policy), then the task planner over drain times {60 s,
    300 s} x move budgets {none, 25%} x cooldowns {0, 5m} x weights {none, adaptive}."""
    grid = StreamsCandidate.grid(PLANNED)
    return grid + [dataclasses.replace(c, weights="adaptive") for c in grid[1:]]


@dataclass
class StreamsHistory:
    """One streams group's telemetry as aligned lists: poll t, task index k."""

    cluster: str
    namespace: str
    policy: str
    group: str
    ts_s: list[float]
    tasks: list[Task]
    rates: list[list[float]]  # input production (records/s) in the interval ending at poll t
    backlog: list[list[float]]  # observed input backlog at poll t (unknown: last known, else 0)
    owners: list[list[str | None]]  # the member running each task at poll t, as observed
    standbys: list[list[tuple[str, ...]]]  # the members holding each task's standby at poll t
    stateful: list[bool]
    changelog: list[int]  # changelog size (records) at the last poll that told; 0 stateless
    members: list[tuple[str, ...]]  # members present at poll t (running or standing by)
    processes: dict[str, str]  # member -> process id, as last reported
    capacity: dict[str, float]
    capacity_source: str  # "measured" (busy intervals) | "none"

    @property
    def polls(self) -> int:
        return len(self.ts_s)


def streams_history_from_rows(
    key: Mapping[str, str], rows: Iterable[Mapping[str, Any]]
) -> StreamsHistory:
    """A history from one group's streams rows (`schema.STREAMS_FIELDS`). A task missing at a
    poll keeps its last values; rates come from the input log end's growth between two polls
    that told it, else from the row's `rate` (the last one told); capacity is each member's
    median consumption over its busy intervals (`streams_simulate.member_capacity`), the median
    of those for members never busy."""
    rows = [r for r in rows if r.get("kind", STREAMS) == STREAMS]
    ts_ms, tasks, poll, index = layout(rows, "subtopology")
    polls, count = len(ts_ms), len(tasks)
    log_end: list[list[float | None]] = [[None] * count for _ in range(polls)]
    backlog: list[list[float | None]] = [[None] * count for _ in range(polls)]
    rate: list[list[float | None]] = [[None] * count for _ in range(polls)]
    owners: list[list[str | None]] = [[None] * count for _ in range(polls)]
    standbys: list[list[tuple[str, ...] | None]] = [[None] * count for _ in range(polls)]
    stateful = [False] * count
    changelog = [0] * count
    processes: dict[str, str] = {}
    for r in sorted(rows, key=lambda r: int(r["ts_ms"])):
        t, k = poll[int(r["ts_ms"])], index[(str(r["subtopology"]), int(r["partition"]))]
        log_end[t][k] = number(r.get("log_end"))
        backlog[t][k] = number(r.get("lag"))
        rate[t][k] = number(r.get("rate"))
        owner = r.get("owner")
        owners[t][k] = str(owner) if isinstance(owner, str) and owner else None
        held = r.get("standbys")
        standbys[t][k] = tuple(sorted(str(m) for m in held)) if held is not None else None
        flag = r.get("stateful")  # None or NaN (pandas' null) when not told: not stateful
        stateful[k] = stateful[k] or (flag is not None and flag == flag and bool(flag))
        size = number(r.get("changelog"))
        changelog[k] = int(size) if size is not None else changelog[k]
        if owners[t][k] is not None and isinstance(r.get("process"), str) and r["process"]:
            processes[str(owner)] = str(r["process"])
    ts_s = [ts / 1000.0 for ts in ts_ms]
    carry_forward(rate)  # a gap's production is the last rate told, not a carried log end's 0
    rates = production_rates(log_end, rate, ts_s)
    carry_forward(backlog)
    carry_forward(owners)
    carry_forward(standbys)
    observed = [[b if b is not None else 0.0 for b in row] for row in backlog]
    held_by = [[s or () for s in row] for row in standbys]
    members = [
        tuple(sorted({m for m in owners[t] if m} | {m for s in held_by[t] for m in s}))
        for t in range(polls)
    ]
    dts = [0.0] + [ts_s[t] - ts_s[t - 1] for t in range(1, polls)]
    produced = [[r * dts[t] for r in rates[t]] for t in range(polls)]
    # the interval ending at poll t ran on the owners observed at poll t - 1
    nobody: list[str | None] = [None] * count
    ran = [nobody, *owners[:-1]] if polls else []
    capacity, source = fill_capacity(
        member_capacity(observed, produced, ran, dts), sorted({m for ms in members for m in ms})
    )
    return StreamsHistory(
        cluster=str(key.get("cluster", "")),
        namespace=str(key.get("namespace", "")),
        policy=str(key.get("policy", "")),
        group=str(key.get("group", "")),
        ts_s=ts_s,
        tasks=tasks,
        rates=rates,
        backlog=observed,
        owners=owners,
        standbys=held_by,
        stateful=stateful,
        changelog=changelog,
        members=members,
        processes=processes,
        capacity=capacity,
        capacity_source=source,
    )


def _owner_list(assignment: Assignment, count: int) -> list[str | None]:
    owners: list[str | None] = [None] * count
    for member, ks in sorted(assignment.items()):
        for k in ks:
            if owners[k] is None:
                owners[k] = member
    return owners


def _assignment(owners: Mapping[int, str], members: Sequence[str]) -> Assignment:
    held: dict[str, list[int]] = {m: [] for m in members}
    for k, member in owners.items():
        held.setdefault(member, []).append(k)
    return {m: tuple(sorted(ks)) for m, ks in sorted(held.items())}


@dataclass
class _StreamsKind:
    """The streams model and assignors for `replay_loop.replay` (module docstring)."""

    history: StreamsHistory
    handoff_s: float
    restore_s: float
    paused: list[float] = field(default_factory=list)  # pause still due per task

    def advance(self, state: ReplayState[Assignment], t: int) -> None:
        history = self.history
        dt = history.ts_s[t] - history.ts_s[t - 1]
        rates = history.rates[t]
        owners = _owner_list(state.assignment, len(history.tasks))
        paused = self.paused or [0.0] * len(owners)
        backlog, consumed = drain_step(state.backlog, rates, owners, history.capacity, dt, paused)
        self.paused = [max(0.0, p - dt) for p in paused]
        used: dict[str, float] = {}
        for owner, amount in zip(owners, consumed, strict=True):
            if owner is not None:
                used[owner] = used.get(owner, 0.0) + amount
        state.record(backlog, used, rates, dt)

    def restrict(self, assignment: Assignment, present: Sequence[str]) -> Assignment:
        return {m: assignment.get(m, ()) for m in present}

    def baseline(self, present: Sequence[str], assignment: Assignment, t: int) -> Assignment:
        history = self.history
        tasks = history.tasks
        previous = {tasks[k]: m for k, m in enumerate(_owner_list(assignment, len(tasks))) if m}
        placed = sticky_tasks(
            present,
            [task for task, s in zip(tasks, history.stateful, strict=True) if s],
            [task for task, s in zip(tasks, history.stateful, strict=True) if not s],
            previous,
            {tasks[k]: held for k, held in enumerate(history.standbys[t])},
            history.processes,
        )
        index = {task: k for k, task in enumerate(tasks)}
        return _assignment({index[task]: m for task, m in placed.items()}, present)

    def weights(self, candidate: PlanCandidate, present: Sequence[str]) -> dict[str, float] | None:
        """The capacity weights `candidate` plans with (None: every member weighs 1)."""
        if getattr(candidate, "weights", "none") != "adaptive":
            return None
        return capacity_weights(self.history.capacity, present)

    def plan(
        self,
        candidate: PlanCandidate,
        state: ReplayState[Assignment],
        present: Sequence[str],
        t: int,
    ) -> tuple[Assignment, float | None, float | None]:
        history = self.history
        tasks = history.tasks

        def by_subtopology(ks: Iterable[int]) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {}
            for k in sorted(ks):
                out.setdefault(tasks[k][0], []).append(tasks[k][1])
            return out

        counts: dict[str, int] = {}
        for s, p in tasks:
            counts[s] = max(counts.get(s, 0), p + 1)
        standby: dict[str, list[int]] = {}
        for k, held in enumerate(history.standbys[t]):
            for m in held:
                standby.setdefault(m, []).append(k)
        plan = streams_tasks.plan_tasks(
            streams_tasks.TaskPlanInput(
                counts=counts,
                members=list(present),
                active={m: by_subtopology(state.assignment.get(m, ())) for m in present},
                standby={m: by_subtopology(standby.get(m, ())) for m in present},
                lag={task: state.backlog[k] for k, task in enumerate(tasks)},
                rate={task: history.rates[t][k] for k, task in enumerate(tasks)},
                changelog={
                    task: history.changelog[k]
                    for k, task in enumerate(tasks)
                    if history.stateful[k]
                },
                strategy=STRATEGY,
                options=assignors.PlanOptions(
                    min_improvement=MIN_IMPROVEMENT, target_drain_seconds=candidate.drain_s
                ),
                budget=candidate.move_budget(len(tasks)),
                weights=self.weights(candidate, present),
                drain_seconds=candidate.drain_s,
                processes={m: history.processes.get(m, m) for m in present},
            )
        )
        index = {task: k for k, task in enumerate(tasks)}
        owners = {
            index[(s, p)]: m
            for m, held in plan.assignment.items()
            for s, parts in held.items()
            for p in parts
        }
        return _assignment(owners, present), plan.peak_before, plan.peak_after

    def covered(self, assignment: Assignment) -> bool:
        return None not in _owner_list(assignment, len(self.history.tasks))

    def applied(self, before: Assignment, after: Assignment, t: int) -> int:
        history = self.history
        old = _owner_list(before, len(history.tasks))
        new = _owner_list(after, len(history.tasks))
        due = pauses(
            old,
            new,
            history.stateful,
            history.standbys[t],
            handoff_s=self.handoff_s,
            restore_s=self.restore_s,
        )
        current = self.paused or [0.0] * len(old)
        self.paused = [max(a, b) for a, b in zip(current, due, strict=True)]
        return sum(1 for a, b in zip(old, new, strict=True) if a is not None and a != b)


def replay_streams(
    history: StreamsHistory,
    candidate: StreamsCandidate,
    *,
    handoff_s: float = 10.0,
    restore_s: float = 30.0,
    slo_s: float = 60.0,
    series_points: int = 120,
) -> Outcome:
    """Replay the history under `candidate` (module docstring). Members weigh 1 in the plan, as
    the operator plans members without pod weights; the model drains with their capacities."""
    count = len(history.tasks)
    first: Assignment = {}
    if history.polls:
        first = _assignment(
            {k: m for k, m in enumerate(history.owners[0]) if m}, history.members[0]
        )
    state = ReplayState(first, list(history.backlog[0]) if history.polls else [0.0] * count)
    kind = _StreamsKind(history, handoff_s, restore_s)
    error = replay_loop.replay(kind, candidate, state, history.ts_s, history.members)
    return replay_loop.outcome(
        state, history.capacity, error, slo_s=slo_s, series_points=series_points
    )


def backtest_streams_group(
    history: StreamsHistory,
    grid: Sequence[StreamsCandidate] | None = None,
    *,
    handoff_s: float = 10.0,
    restore_s: float = 30.0,
    slo_s: float = 60.0,
) -> list[dict[str, Any]]:
    """Every candidate of `grid` (default `streams_grid()`) for one streams group, as backtest
    output rows (`group_type` "streams", `partitions` its task count); `sticky` is the current
    policy."""
    key = {
        "cluster": history.cluster,
        "namespace": history.namespace,
        "policy": history.policy,
        "group": history.group,
    }
    rows = []
    for candidate in streams_grid() if grid is None else grid:
        result = replay_streams(
            history, candidate, handoff_s=handoff_s, restore_s=restore_s, slo_s=slo_s
        )
        row = replay_loop.result_row(
            key,
            candidate,
            result,
            group_type="streams",
            units=len(history.tasks),
            polls=history.polls,
            capacity=history.capacity,
            no_capacity="no member capacity: no member was busy over an interval",
        )
        if candidate.weights != "none":
            members = sorted({m for ms in history.members for m in ms})
            row["weights"] = candidate.weights
            row["weights_json"] = json.dumps(
                capacity_weights(history.capacity, members), sort_keys=True
            )
        rows.append(row)
    return rows
