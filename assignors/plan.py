"""One planning round: validated input -> target assignment, moves and stats (the plan contract).

This is the function the `plan` command and the operator share, so what a user previews is what
the operator applies. Pure: no I/O, deterministic for the same input.
"""

from __future__ import annotations

from typing import Any

from assignors.load import lower_bound, max_normalised_load, partition_loads
from assignors.model import Assignment, Group, PlanInputError, PlanRequest, parse_request, resolve_ownership
from assignors.registry import STRATEGY_MODULES, strategy_function


class PlanInvariantError(RuntimeError):
    """A strategy produced an invalid assignment: a bug, never the user's fault."""


def _owner_table(group: Group, assignment: Assignment) -> dict[str, list[str | None]]:
    """Topic -> owner per partition, checking that nothing is assigned twice or to a
    non-subscriber."""
    owners: dict[str, list[str | None]] = {topic: [None] * n for topic, n in group.topics.items()}
    for member_id, owned in assignment.items():
        member = group.members.get(member_id)
        if member is None:
            raise PlanInvariantError(f"assignment names unknown member {member_id!r}")
        for topic, partitions in owned.items():
            if topic not in member.topics:
                raise PlanInvariantError(f"{member_id} got topic {topic} it does not subscribe to")
            table = owners[topic]
            for partition in partitions:
                if table[partition] is not None:
                    raise PlanInvariantError(f"{topic}-{partition} assigned twice")
                table[partition] = member_id
    return owners


def _normalise(group: Group, assignment: Assignment) -> Assignment:
    return {
        member_id: {
            topic: sorted(partitions)
            for topic, partitions in sorted(assignment.get(member_id, {}).items())
            if partitions
        }
        for member_id in group.members
    }


def compute_moves(
    previous: dict[str, list[str | None]], target: dict[str, list[str | None]]
) -> list[dict[str, Any]]:
    """Partitions that change owner: what a cooperative protocol would revoke and re-grant.
    Partitions nobody owned before are grants, not moves."""
    moves = []
    for topic, owners in target.items():
        before = previous[topic]
        for partition, owner in enumerate(owners):
            if before[partition] is not None and before[partition] != owner:
                moves.append({"topic": topic, "partition": partition, "from": before[partition], "to": owner})
    return moves


def plan_group(request: PlanRequest) -> dict[str, Any]:
    """Run the request's strategy and return the plan document."""
    group, options = request.group, request.options
    assign = strategy_function(request.strategy)
    assignment = _normalise(group, assign(group, options))
    target = _owner_table(group, assignment)
    previous_assignment, conflicts = resolve_ownership(group)
    previous = _owner_table_unchecked(group, previous_assignment)
    moves = compute_moves(previous, target)

    model, loads = partition_loads(group, options)
    bound = lower_bound(group, loads)
    achieved = max_normalised_load(group, assignment, loads)
    subscribed = group.subscribers()
    counts = [sum(len(p) for p in owned.values()) for owned in assignment.values()]
    stats = {
        "strategy": request.strategy,
        "members": len(group.members),
        "topics": len(group.topics),
        "partitions": sum(group.topics.values()),
        "assigned": sum(counts),
        "unassigned": sum(group.topics[t] for t in subscribed) - sum(counts),
        "moves": len(moves),
        "granted_unowned": sum(
            1
            for topic, owners in target.items()
            for partition, owner in enumerate(owners)
            if owner is not None and previous[topic][partition] is None
        ),
        "count_spread": (max(counts) - min(counts)) if counts else 0,
        "load_model": model,
        "max_load": round(achieved, 6),
        "lower_bound": round(bound, 6),
        "max_load_ratio": round(achieved / bound, 6) if bound > 0 else 1.0,
        "conflicting_claims": conflicts,
        "stale_ownership_dropped": group.stale_ownership_dropped,
        "unknown_subscriptions_ignored": group.unknown_subscriptions_ignored,
    }
    return {"assignment": assignment, "moves": moves, "stats": stats}


def _owner_table_unchecked(group: Group, assignment: Assignment) -> dict[str, list[str | None]]:
    """Previous owners: may include topics the owner no longer subscribes to (those still move)."""
    owners: dict[str, list[str | None]] = {topic: [None] * n for topic, n in group.topics.items()}
    for member_id, owned in assignment.items():
        for topic, partitions in owned.items():
            for partition in partitions:
                owners[topic][partition] = member_id
    return owners


def plan(document: Any, strategy: str | None = None) -> dict[str, Any]:
    """Parse, validate and plan one plan-contract document. Raises PlanInputError on bad input."""
    request = parse_request(document, strategy)
    if request.strategy not in STRATEGY_MODULES:
        raise PlanInputError(
            "strategy", f"unknown strategy {request.strategy!r} (one of {', '.join(STRATEGY_MODULES)})"
        )
    return plan_group(request)
