"""The JSON form of a streams task plan (`kafka-rebalance plan` with `"groupType": "streams"`):
a document in, a `TaskPlanInput` out, and a `TaskPlan` back to JSON. Pure.

Input (docs/planning.md#previewing-a-streams-task-plan; examples/plans/streams-tasks.json):

    {"groupType": "streams", "strategy": "lag-aware",
     "tasks": {"0": 6, "1": 4},                      subtopology -> number of tasks
     "members": [{"id": "m-a", "weight": 1.0,        weight optional (1.0)
                  "process": "p-a",                  process id optional (its own)
                  "active": {"0": [0, 1]}, "standby": {"1": [0]}}],
     "lag": {"0": [900, 10, ...]},                   per task, by partition (null: unknown)
     "rate": {"0": [4.0, 0.5, ...]},                 records/s, same shape (optional)
     "changelog": {"1": [50000, ...]},               stateful subtopologies only (optional)
     "targetDrainSeconds": 300, "maxMovesPerRound": 8, "minImprovement": 0.1,
     "standbyReplicas": 1}                          standbys per stateful task (optional, 0)

Every error names its field (`PlanInputError`), so the command exits 2 with one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kafka_rebalance_assignors.model import PlanInputError
from kafka_rebalance_assignors.request import PlanOptions
from kafka_rebalance_assignors.streams_tasks import Task, TaskPlan, TaskPlanInput

GROUP_TYPE = "streams"


def is_task_document(document: Any) -> bool:
    return isinstance(document, Mapping) and document.get("groupType") == GROUP_TYPE


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PlanInputError(field, f"must be an object, got {type(value).__name__}")
    return value


def _number(value: Any, field: str, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PlanInputError(field, f"must be a finite number, got {value!r}")
    if value < minimum:
        raise PlanInputError(field, f"must be >= {minimum:g}, got {value!r}")
    return float(value)


def _counts(document: Mapping[str, Any]) -> dict[str, int]:
    tasks = _mapping(document.get("tasks"), "tasks")
    counts: dict[str, int] = {}
    for subtopology, n in tasks.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise PlanInputError(f"tasks.{subtopology}", f"must be a count >= 0, got {n!r}")
        counts[str(subtopology)] = n
    if not counts:
        raise PlanInputError("tasks", "names no subtopology")
    return counts


def _task_sets(value: Any, field: str, counts: Mapping[str, int]) -> dict[str, list[int]]:
    sets: dict[str, list[int]] = {}
    for subtopology, parts in _mapping(value if value is not None else {}, field).items():
        where = f"{field}.{subtopology}"
        if subtopology not in counts:
            raise PlanInputError(where, "is not a subtopology named in tasks")
        if not isinstance(parts, list) or any(
            isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < counts[subtopology]
            for p in parts
        ):
            raise PlanInputError(
                where, f"must list partitions in [0, {counts[subtopology]}), got {parts!r}"
            )
        sets[subtopology] = sorted(set(parts))
    return sets


def _per_task(
    document: Mapping[str, Any], field: str, counts: Mapping[str, int], *, nullable: bool
) -> dict[Task, float | None]:
    values: dict[Task, float | None] = {}
    for subtopology, column in _mapping(document.get(field) or {}, field).items():
        where = f"{field}.{subtopology}"
        if subtopology not in counts:
            raise PlanInputError(where, "is not a subtopology named in tasks")
        if not isinstance(column, list) or len(column) != counts[subtopology]:
            raise PlanInputError(where, f"must list one value per task ({counts[subtopology]})")
        for p, value in enumerate(column):
            if value is None and nullable:
                values[(subtopology, p)] = None
            else:
                values[(subtopology, p)] = _number(value, f"{where}[{p}]")
    return values


def parse_task_request(document: Any, strategy: str | None = None) -> TaskPlanInput:
    """The planner's input from a task-plan document (module docstring for its form)."""
    doc = _mapping(document, "input")
    counts = _counts(doc)
    members_doc = doc.get("members")
    if not isinstance(members_doc, list) or not members_doc:
        raise PlanInputError("members", "must be a non-empty list")
    members: list[str] = []
    active: dict[str, dict[str, list[int]]] = {}
    standby: dict[str, dict[str, list[int]]] = {}
    weights: dict[str, float] = {}
    processes: dict[str, str] = {}
    for i, entry in enumerate(members_doc):
        entry = _mapping(entry, f"members[{i}]")
        member = entry.get("id")
        if not isinstance(member, str) or not member:
            raise PlanInputError(f"members[{i}].id", "must be a non-empty string")
        if member in active:
            raise PlanInputError(f"members[{i}].id", f"{member!r} is listed twice")
        members.append(member)
        active[member] = _task_sets(entry.get("active"), f"members[{i}].active", counts)
        standby[member] = _task_sets(entry.get("standby"), f"members[{i}].standby", counts)
        if "process" in entry:
            process = entry["process"]
            if not isinstance(process, str) or not process:
                raise PlanInputError(f"members[{i}].process", "must be a non-empty string")
            processes[member] = process
        if "weight" in entry:
            weights[member] = _number(entry["weight"], f"members[{i}].weight", minimum=1e-9)
    changelog = {
        task: int(size or 0)
        for task, size in _per_task(doc, "changelog", counts, nullable=False).items()
    }
    drain = _number(doc.get("targetDrainSeconds", 300), "targetDrainSeconds", minimum=1.0)
    budget_value = doc.get("maxMovesPerRound")
    budget = None if budget_value is None else _number(budget_value, "maxMovesPerRound")
    min_improvement = _number(doc.get("minImprovement", 0.0), "minImprovement")
    if min_improvement >= 1:
        raise PlanInputError("minImprovement", f"must be in [0, 1), got {min_improvement!r}")
    replicas = doc.get("standbyReplicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise PlanInputError("standbyReplicas", f"must be a count >= 0, got {replicas!r}")
    chosen = strategy or doc.get("strategy") or "lag-aware"
    if not isinstance(chosen, str):
        raise PlanInputError("strategy", f"must be a strategy name, got {chosen!r}")
    return TaskPlanInput(
        counts=counts,
        members=members,
        active=active,
        standby=standby,
        lag=_per_task(doc, "lag", counts, nullable=True),
        rate=_per_task(doc, "rate", counts, nullable=True),
        changelog=changelog,
        strategy=chosen,
        options=PlanOptions(min_improvement=min_improvement, target_drain_seconds=drain),
        budget=budget,
        weights=weights or None,
        drain_seconds=drain,
        standby_replicas=replicas,
        processes=processes or None,
    )


def task_plan_document(plan: TaskPlan) -> dict[str, Any]:
    """A task plan as JSON: tasks written `<subtopology>_<partition>` as Kafka Streams names
    them."""

    def moves(kept: tuple[Any, ...]) -> list[dict[str, Any]]:
        return [
            {
                "task": f"{m.task[0]}_{m.task[1]}",
                "from": m.from_member,
                "to": m.to_member,
                "cost": round(m.cost, 3),
                "toStandby": m.to_standby,
            }
            for m in kept
        ]

    return {
        "groupType": GROUP_TYPE,
        "strategy": plan.strategy,
        "assignment": plan.assignment,
        "standby": {m: tasks for m, tasks in plan.standby.items() if tasks},
        "standbysShort": plan.standbys_short,
        "moves": moves(plan.moves),
        "deferred": moves(plan.deferred),
        "moveCost": round(plan.cost, 3),
        "standbyRedirects": plan.redirected,
        "peakBefore": round(plan.peak_before, 3),
        "peakAfter": round(plan.peak_after, 3),
    }
