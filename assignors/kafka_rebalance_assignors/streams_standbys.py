"""Standby placement for a streams group's task plan (KIP-1071): which members keep a warm copy
of each stateful task's state, given where the plan runs the tasks. Pure: no I/O, deterministic.

Invariants of `plan_standbys` (each stateful task, `replicas` wanted):
- a standby is never on the process that runs the task's active (members of one process share
  its state directory), and no process holds two replicas of one task;
- every stateful task gets `replicas` standbys, or as many as there are processes other than
  its active's (the rest are counted in `short`); stateless tasks get none;
- sticky: a member that holds the task's state now (its standby, or its active owner before
  the plan) keeps or takes the standby while its standby count is below its fair share
  (`ceil(total standbys * weight / total weight)`); these are placed before any new copy;
- balanced: every other standby goes to the eligible member whose standby count over its
  capacity weight is lowest once it takes it (ties: the smaller member id).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Task = tuple[str, int]
TaskAssignment = dict[str, dict[str, list[int]]]  # member -> subtopology -> partitions


@dataclass(frozen=True)
class StandbyPlan:
    standby: TaskAssignment  # every member present, subtopologies and partitions sorted
    short: int  # standbys wanted that no eligible process could take
    kept: int  # standbys placed on a member that held the task's state already


def _tasks(assignment: Mapping[str, Mapping[str, Sequence[int]]], member: str) -> set[Task]:
    return {(s, int(p)) for s, parts in assignment.get(member, {}).items() for p in parts}


def plan_standbys(
    active: Mapping[str, Mapping[str, Sequence[int]]],
    current_standby: Mapping[str, Mapping[str, Sequence[int]]],
    stateful: Iterable[Task],
    replicas: int,
    members: Sequence[str],
    *,
    previous_active: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
    processes: Mapping[str, str] | None = None,
    weights: Mapping[str, float] | None = None,
) -> StandbyPlan:
    """Standbys for the stateful tasks of a plan whose active tasks are `active` (member ->
    subtopology -> partitions), sticky to `current_standby` and to `previous_active` (where
    the tasks ran before the plan), over `members` (others are ignored). `processes` maps a
    member to its process id (absent: its own); `weights` its capacity (absent or <= 0: 1.0).
    See the module docstring for the rules. Raises ValueError for a negative `replicas`."""
    if replicas < 0:
        raise ValueError(f"standby replicas: must be >= 0, got {replicas}")
    ids = sorted(set(members))
    empty: TaskAssignment = {m: {} for m in ids}
    tasks = sorted(set(stateful))
    if replicas == 0 or not tasks or not ids:
        return StandbyPlan(empty, 0, 0)
    proc = {m: (processes or {}).get(m, m) for m in ids}
    weight = {m: w if (w := (weights or {}).get(m, 1.0)) > 0 else 1.0 for m in ids}
    active_process: dict[Task, str] = {}
    for m in ids:
        for task in sorted(_tasks(active, m)):
            active_process.setdefault(task, proc[m])
    holders: dict[Task, list[str]] = {}  # task -> members holding its state, best first
    for source in (current_standby, previous_active or {}):
        for m in ids:
            for task in sorted(_tasks(source, m)):
                if m not in holders.setdefault(task, []):
                    holders[task].append(m)

    processes_total = len(set(proc.values()))
    wanted = {t: min(replicas, processes_total - (1 if t in active_process else 0)) for t in tasks}
    total = sum(wanted.values())
    weight_sum = sum(weight.values())
    share = {m: math.ceil(total * weight[m] / weight_sum) for m in ids}
    count = dict.fromkeys(ids, 0)
    placed: dict[Task, set[str]] = {t: set() for t in tasks}  # task -> processes holding it
    out: dict[str, set[Task]] = {m: set() for m in ids}

    def eligible(task: Task, member: str) -> bool:
        p = proc[member]
        return p != active_process.get(task) and p not in placed[task]

    def place(task: Task, member: str) -> None:
        placed[task].add(proc[member])
        out[member].add(task)
        count[member] += 1

    kept = 0
    for task in tasks:
        for m in holders.get(task, []):
            if len(placed[task]) < wanted[task] and count[m] < share[m] and eligible(task, m):
                place(task, m)
                kept += 1
    short = 0
    for task in tasks:
        while len(placed[task]) < wanted[task]:
            candidates = [m for m in ids if eligible(task, m)]
            if not candidates:  # cannot happen: `wanted` counts the processes there are
                break
            place(task, min(candidates, key=lambda m: ((count[m] + 1) / weight[m], m)))
        short += replicas - len(placed[task])
    standby: TaskAssignment = {m: {} for m in ids}
    for m in ids:
        for s, p in sorted(out[m]):
            standby[m].setdefault(s, []).append(p)
    return StandbyPlan(standby, short, kept)
