"""Streams groups (KIP-1071): from a topology and partition offsets to task loads, and a task
plan made with the consumer-group strategies. Pure: no I/O, deterministic.

A task is (subtopology id, partition). The planner sees each task as a pseudo partition whose
"topic" is the subtopology id, so every strategy (lag-aware, sticky, ...) plans tasks unchanged;
only the move budget and the choice of destination for stateful tasks are applied here:

- Task lag = the sum, over the subtopology's source topics (repartition source topics
  included), of the partition's end offset minus the group's committed offset (`lag.classify`
  states; an unknown partition makes the task's lag unknown). Task rate = the sum of the
  known production rates of the same partitions.
- Move cost (the unit `spec.rebalance.maxMovesPerRound` counts): 1 for a stateless task;
  `1 + changelog / mean changelog` for a stateful one (its changelog partitions' end offsets,
  over the mean of the group's stateful tasks), so an average stateful task costs 2 and a big
  one more. A stateful task moved to a member that holds its standby costs 1 (the state is
  already there): the standby discount.
- Standby preference: a stateful task the strategy moves to a member without its standby goes
  instead to the least loaded member holding its standby, when that raises neither the plan's
  largest task count nor its peak member load (over weight) by more than `STANDBY_SLACK`
  (landing elsewhere costs a restore of the whole changelog; load estimates are noisier than
  that); else it swaps destinations with a task moved to a holder of its standby, under the
  same peak bound (counts stay), best with a task moved away from its own destination (the
  swap then cancels that move).
- Budget: moves are kept in order of load per unit cost; the first always (so a big stateful
  task can move at all), the others while the cost fits; a move not kept leaves its task with
  its current owner. Tasks nobody present runs are granted, never counted.
- Standbys (`streams_standbys`): with `standby_replicas` > 0, each stateful task gets its
  standbys placed off its planned active's process, sticky to members holding its state.
- Peak: the plan's `peak_before` / `peak_after` are the most loaded member's load over its
  capacity weight (the planner's own objective), so a plan that takes load off a slow member
  counts as the improvement it is even when the fast member's raw load rises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import kafka_rebalance_assignors as assignors
from kafka_rebalance_assignors.streams_standbys import plan_standbys

Task = tuple[str, int]
TaskAssignment = dict[str, dict[str, list[int]]]  # member -> subtopology -> partitions
STANDBY_SLACK = 0.05  # how far the standby preference may raise the plan's peak (a fraction)


@dataclass(frozen=True)
class SubtopologyTopics:
    """What task loads need of a subtopology: its id, the topics it reads (repartition
    source topics included) and its changelog topics (none: stateless)."""

    subtopology_id: str
    source_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...] = ()


def task_counts(
    subtopologies: Sequence[SubtopologyTopics], partitions: Mapping[str, int]
) -> dict[str, int]:
    """subtopology -> number of tasks: the largest partition count of its source topics
    (topics not found count 0; a subtopology with no partition found has no task)."""
    counts = {
        s.subtopology_id: max((partitions.get(t, 0) for t in s.source_topics), default=0)
        for s in subtopologies
    }
    return {s: n for s, n in sorted(counts.items()) if n > 0}


def task_loads(
    subtopologies: Sequence[SubtopologyTopics],
    partitions: Mapping[str, int],
    lag: Mapping[tuple[str, int], float | None],
    rate: Mapping[tuple[str, int], float | None],
) -> tuple[dict[Task, float | None], dict[Task, float | None]]:
    """(lag, rate) per task. A task's lag is the sum of its input partitions' lags, None when
    any of them is unknown; its rate the sum of the known rates, None when none is known. A
    source topic with fewer partitions than the subtopology has tasks adds nothing to the
    tasks it has no partition for."""
    counts = task_counts(subtopologies, partitions)
    task_lag: dict[Task, float | None] = {}
    task_rate: dict[Task, float | None] = {}
    for s in subtopologies:
        for p in range(counts.get(s.subtopology_id, 0)):
            keys = [(t, p) for t in s.source_topics if p < partitions.get(t, 0)]
            lags = [lag.get(k) for k in keys]
            total_lag: float | None = None
            if keys and all(v is not None for v in lags):
                total_lag = float(sum(v for v in lags if v is not None))
            rates = [r for r in (rate.get(k) for k in keys) if r is not None]
            task = (s.subtopology_id, p)
            task_lag[task] = total_lag
            task_rate[task] = float(sum(max(0.0, r) for r in rates)) if rates else None
    return task_lag, task_rate


def changelog_sizes(
    subtopologies: Sequence[SubtopologyTopics],
    partitions: Mapping[str, int],
    ends: Mapping[tuple[str, int], int | None],
) -> dict[Task, int]:
    """Stateful task -> its changelog size in records: the sum of the end offsets of its
    changelog partitions (partition p of each changelog topic; unknown ends count 0).
    Stateless tasks are absent."""
    counts = task_counts(subtopologies, partitions)
    sizes: dict[Task, int] = {}
    for s in subtopologies:
        if not s.changelog_topics:
            continue
        for p in range(counts.get(s.subtopology_id, 0)):
            sizes[(s.subtopology_id, p)] = sum(
                max(0, ends.get((t, p)) or 0) for t in s.changelog_topics
            )
    return sizes


@dataclass(frozen=True)
class TaskPlanInput:
    counts: Mapping[str, int]  # subtopology -> tasks (`task_counts`)
    members: Sequence[str]  # streams member ids
    active: Mapping[str, Mapping[str, Sequence[int]]]  # member -> subtopology -> partitions now
    standby: Mapping[str, Mapping[str, Sequence[int]]]
    lag: Mapping[Task, float | None]
    rate: Mapping[Task, float | None]
    changelog: Mapping[Task, int]  # stateful tasks only (`changelog_sizes`)
    strategy: str = "lag-aware"
    options: assignors.PlanOptions = field(default_factory=assignors.PlanOptions)
    budget: float | None = None  # move cost units per round; None: no limit
    weights: Mapping[str, float] | None = None  # member -> capacity weight (absent: 1.0)
    drain_seconds: float = 300.0  # a task's load = lag + rate * drain_seconds
    standby_replicas: int = 0  # the group's streams.num.standby.replicas (0: none planned)
    processes: Mapping[str, str] | None = None  # member -> process id (absent: its own)


@dataclass(frozen=True)
class TaskMove:
    task: Task
    from_member: str
    to_member: str
    cost: float
    to_standby: bool


@dataclass(frozen=True)
class TaskPlan:
    assignment: TaskAssignment  # every member present, subtopologies and partitions sorted
    moves: tuple[TaskMove, ...]  # the moves kept
    deferred: tuple[TaskMove, ...]  # moves the budget held back (tasks stay where they are)
    cost: float  # budget units the kept moves use
    redirected: int  # stateful tasks sent to a standby holder instead of the planner's pick
    peak_before: float  # max over members of load / weight now (unowned tasks left out)
    peak_after: float  # the same for the plan
    strategy: str
    standby: TaskAssignment = field(default_factory=dict)  # every member present when planned
    standbys_short: int = 0  # standbys wanted that no process other than the active's could take


def task_load(lag: float | None, rate: float | None, drain_seconds: float) -> float:
    """The work a task brings: its lag plus what arrives within the drain target (unknowns
    count 0 here; the strategy has its own rule for them)."""
    return max(0.0, lag or 0.0) + max(0.0, rate or 0.0) * drain_seconds


def _owners(
    assignment: Mapping[str, Mapping[str, Sequence[int]]], present: set[str]
) -> dict[Task, str]:
    owners: dict[Task, str] = {}
    for member in sorted(assignment):
        if member not in present:
            continue
        for s, parts in assignment[member].items():
            for p in parts:
                owners.setdefault((s, int(p)), member)
    return owners


def _weight(weights: Mapping[str, float] | None, member: str) -> float:
    """A member's capacity weight: absent or non-positive counts 1.0."""
    w = (weights or {}).get(member, 1.0)
    return w if w > 0 else 1.0


def weighted_peak(
    owner: Mapping[Task, str],
    load: Mapping[Task, float],
    members: Sequence[str],
    weights: Mapping[str, float] | None = None,
) -> float:
    """The most loaded member's load over its capacity weight: the lag-aware planner's
    objective, so the minImprovement rule and the planner agree on what an improvement is."""
    per = dict.fromkeys(members, 0.0)
    for task, member in owner.items():
        per[member] = per.get(member, 0.0) + load.get(task, 0.0)
    return max((v / _weight(weights, m) for m, v in per.items()), default=0.0)


def plan_tasks(inp: TaskPlanInput) -> TaskPlan:
    """Plan the group's active tasks (see the module docstring for the rules). Raises
    `assignors.PlanInputError` on input the planner refuses."""
    members = sorted(set(inp.members))
    present = set(members)
    valid = {(s, p) for s, n in inp.counts.items() for p in range(n)}
    owned = {
        m: {
            s: sorted(p for p in parts if (s, p) in valid)
            for s, parts in inp.active.get(m, {}).items()
        }
        for m in members
    }
    options = assignors.PlanOptions(
        count_balance=inp.options.count_balance,
        max_moves=None,  # the budget is applied here, in move cost units
        min_improvement=inp.options.min_improvement,
        load_model=inp.options.load_model,
        target_drain_seconds=inp.options.target_drain_seconds,
    )
    request = assignors.group_request(
        strategy=inp.strategy,
        topics=dict(inp.counts),
        members=members,
        owned={m: {s: p for s, p in t.items() if p} for m, t in owned.items()},
        lag=dict(inp.lag),
        rate=dict(inp.rate),
        weights={m: (inp.weights or {}).get(m, 1.0) for m in members},
        options=options,
    )
    planned = assignors.plan_request(request)
    load = {t: task_load(inp.lag.get(t), inp.rate.get(t), inp.drain_seconds) for t in valid}
    before = _owners(owned, present)
    target = _owners(planned.assignment, present)
    standby = {
        m: {(s, int(p)) for s, parts in inp.standby.get(m, {}).items() for p in parts}
        for m in members
    }

    redirected = _prefer_standbys(
        target, before, standby, load, inp.changelog, members, inp.weights
    )
    sizes = [v for v in inp.changelog.values() if v > 0]
    unit = sum(sizes) / len(sizes) if sizes else 1.0

    def cost(task: Task, to: str) -> float:
        if task not in inp.changelog or task in standby.get(to, set()):
            return 1.0
        return 1.0 + inp.changelog[task] / unit

    moves = [
        TaskMove(t, before[t], target[t], cost(t, target[t]), t in standby.get(target[t], set()))
        for t in sorted(target)
        if t in before and before[t] != target[t]
    ]
    moves.sort(key=lambda m: (-load[m.task] / m.cost, m.task))
    kept: list[TaskMove] = []
    deferred: list[TaskMove] = []
    used = 0.0
    for move in moves:
        if inp.budget is None or not kept or used + move.cost <= inp.budget:
            kept.append(move)
            used += move.cost
        else:
            deferred.append(move)
            target[move.task] = move.from_member
    assignment: TaskAssignment = {m: {} for m in members}
    for (s, p), member in sorted(target.items()):
        assignment[member].setdefault(s, []).append(p)
    standbys = plan_standbys(
        assignment,
        inp.standby,
        inp.changelog,
        inp.standby_replicas,
        members,
        previous_active=owned,
        processes=inp.processes,
        weights=inp.weights,
    )
    return TaskPlan(
        assignment=assignment,
        moves=tuple(sorted(kept, key=lambda m: m.task)),
        deferred=tuple(sorted(deferred, key=lambda m: m.task)),
        cost=used,
        redirected=redirected,
        peak_before=weighted_peak(before, load, members, inp.weights),
        peak_after=weighted_peak(target, load, members, inp.weights),
        strategy=planned.stats.strategy,
        standby=standbys.standby,
        standbys_short=standbys.short,
    )


def _prefer_standbys(
    target: dict[Task, str],
    before: Mapping[Task, str],
    standby: Mapping[str, set[Task]],
    load: Mapping[Task, float],
    changelog: Mapping[Task, int],
    members: Sequence[str],
    weights: Mapping[str, float] | None = None,
) -> int:
    """Send moved stateful tasks to a standby holder where that costs no balance beyond the
    slack (module docstring; loads over capacity weights), directly or by swapping
    destinations with a task moved to the holder (`_swap_onto_standby`); updates `target` in
    place and returns how many tasks were sent onto their standby."""
    w = {m: _weight(weights, m) for m in members}
    per_load = dict.fromkeys(members, 0.0)
    per_count = dict.fromkeys(members, 0)
    for task, member in target.items():
        per_load[member] += load.get(task, 0.0)
        per_count[member] += 1
    peak = max((per_load[m] / w[m] for m in members), default=0.0) * (1.0 + STANDBY_SLACK)
    top = max(per_count.values(), default=0)
    moved = [
        t
        for t, m in target.items()
        if t in changelog and t in before and before[t] != m and t not in standby.get(m, set())
    ]
    moved.sort(key=lambda t: (-load.get(t, 0.0), t))
    sent = 0
    for task in moved:
        chosen = target[task]
        holders = [
            m
            for m in members
            if task in standby.get(m, set())
            and m != chosen
            and (per_load[m] + load.get(task, 0.0)) / w[m] <= peak
            and per_count[m] + 1 <= top
        ]
        if not holders:
            sent += _swap_onto_standby(task, target, before, standby, load, w, per_load, peak)
            continue
        to = min(holders, key=lambda m: (per_load[m] / w[m], m))
        per_load[chosen] -= load.get(task, 0.0)
        per_count[chosen] -= 1
        per_load[to] += load.get(task, 0.0)
        per_count[to] += 1
        target[task] = to
        sent += 1
    return sent


def _swap_onto_standby(
    task: Task,
    target: dict[Task, str],
    before: Mapping[Task, str],
    standby: Mapping[str, set[Task]],
    load: Mapping[Task, float],
    w: Mapping[str, float],
    per_load: dict[str, float],
    peak: float,
) -> int:
    """Swap destinations with another task moved this round to a holder of `task`'s standby,
    when neither member then exceeds `peak` (load over weight): task counts stay. The partner
    is, best first: a task moved from `task`'s destination (the swap cancels its move, so the
    plan moves one task fewer), a task whose standby is at `task`'s destination (both land on
    their state), any other task moved there and not onto its own standby. Updates `target`
    and `per_load`; returns the tasks that land on their standby (0 when no swap fits)."""
    chosen = target[task]
    options = []
    for holder in sorted(m for m in w if task in standby.get(m, set()) and m != chosen):
        for other, at in sorted(target.items()):
            home = before.get(other, holder)
            if at != holder or other == task or home == holder:
                continue  # only a task moved onto `holder` this round
            stays = home == chosen
            if not stays and other in standby.get(holder, set()):
                continue  # it lands on its own state there
            delta = load.get(task, 0.0) - load.get(other, 0.0)
            if (per_load[holder] + delta) / w[holder] > peak:
                continue
            if (per_load[chosen] - delta) / w[chosen] > peak:
                continue
            both = other in standby.get(chosen, set())
            options.append((not stays, not both, abs(delta), holder, other))
    if not options:
        return 0
    moves_on, alone, _, holder, other = min(options)
    change = load.get(task, 0.0) - load.get(other, 0.0)
    per_load[holder] += change
    per_load[chosen] -= change
    target[task], target[other] = holder, chosen
    return 2 if moves_on and not alone else 1
