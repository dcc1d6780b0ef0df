"""Group mode verification: does the group's actual assignment (describe_groups) match the plan?

Static members identify themselves by group_instance_id = pod name, so the actual assignment
can be compared member by member. Pure: works on the describe_groups dict kafka-python returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_rebalance_common.assignment import Assignment, WireAssignment


@dataclass(frozen=True)
class Verification:
    state: str  # converged | converging | no-consumers | unknown
    message: str


def actual_assignment(group: Mapping[str, Any]) -> Assignment:
    """Each member's partitions as describe_groups shows them (topics as listed, partitions
    ascending); a static member is named by its group_instance_id."""
    result: WireAssignment = {}
    for member in group.get("members") or []:
        name = member.get("group_instance_id") or member.get("member_id") or "?"
        result[name] = _partitions(member.get("member_assignment") or {})
    return Assignment(result)


def _partitions(assignment: Any) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    if isinstance(assignment, Mapping):
        for entry in assignment.get("assigned_partitions") or []:
            parts = sorted(entry.get("partitions") or [])
            if parts:
                topics[entry.get("topic")] = parts
    return topics


def target_differs(group: Mapping[str, Any] | None, plan: Assignment) -> bool:
    """KIP-848 groups: does the coordinator's *target* for a planned member differ from the
    plan? (Members reach their target over a heartbeat or two; a target that differs means
    the coordinator has not taken the plan at all.) False when nothing says so."""
    for member in (group or {}).get("members") or []:
        name = member.get("group_instance_id")
        if name in plan and "target_assignment" in member:
            want = {t: sorted(p) for t, p in plan[name].items() if p}
            if _partitions(member["target_assignment"]) != want:
                return True
    return False


def recompute_pending(group: Mapping[str, Any] | None) -> bool:
    """KIP-848 groups: has the group epoch moved past the epoch of the last target assignment?
    The coordinator then computes the next target at a member's next heartbeat (a nudge's leave
    bumps the epoch but computes nothing; KIP-1263 batches computations), so a target that
    still differs is on its way, not missed. False when nothing says so."""
    group_epoch = (group or {}).get("group_epoch")
    assignment_epoch = (group or {}).get("assignment_epoch")
    if not isinstance(group_epoch, int) or not isinstance(assignment_epoch, int):
        return False
    return group_epoch > assignment_epoch


def verify(group: Mapping[str, Any] | None, plan: Assignment) -> Verification:
    if group is None:
        return Verification("unknown", "the group could not be described")
    members = group.get("members") or []
    if not members:
        return Verification(
            "no-consumers", f"no consumer has joined (group {group.get('group_state')})"
        )
    actual = actual_assignment(group)
    planned = {m: {t: sorted(p) for t, p in ts.items() if p} for m, ts in plan.items()}
    differing = sorted(m for m in planned if m in actual and actual[m] != planned[m])
    absent = sorted(m for m in planned if m not in actual)
    if not differing and not absent and group.get("group_state") == "Stable":
        return Verification("converged", "the group's assignment matches the plan")
    parts = []
    if differing:
        parts.append(f"{len(differing)} members differ from the plan ({', '.join(differing[:5])})")
    if absent:
        parts.append(f"{len(absent)} planned members not in the group ({', '.join(absent[:5])})")
    if group.get("group_state") != "Stable":
        parts.append(f"group {group.get('group_state')}")
    return Verification("converging", "; ".join(parts))
