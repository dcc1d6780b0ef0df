"""One planning round: validated input -> target assignment, moves and stats (the plan contract).

This is the function the `plan` command and the operator share, so what a user previews is what
the operator applies. Pure: no I/O, deterministic for the same input. Everything here works on
per-topic owner lists (index = partition) so that it stays linear and cheap at a million
partitions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from itertools import repeat
from typing import Any

from assignors.collector import collector_paused
from assignors.load import Loads, lower_bound, partition_loads
from assignors.model import (
    Assignment,
    Group,
    PlanInputError,
    PlanRequest,
    parse_request,
    resolve_ownership,
)
from assignors.registry import STRATEGY_MODULES, strategy_function

OwnerTable = dict[str, list[str | None]]  # topic -> owner per partition (None: nobody)


class PlanInvariantError(RuntimeError):
    """A strategy produced an invalid assignment: a bug, never the user's fault."""


def _fill(table: list[str | None], partitions: list[int], member_id: str) -> None:
    """table[p] = member_id for every p (this runs once per partition of the group): a plain
    loop for short lists, where it is cheaper, a C-speed map for long ones."""
    if len(partitions) < 16:
        for partition in partitions:
            table[partition] = member_id
    else:
        deque(map(table.__setitem__, partitions, repeat(member_id, len(partitions))), maxlen=0)


def _check_and_measure(
    group: Group, raw: Assignment, loads: Loads
) -> tuple[Assignment, OwnerTable, dict[str, float]]:
    """One pass over the strategy's result: normalise it (every member present, topics and
    partitions sorted, no empty lists), refuse anything Kafka would refuse (an unknown member, a
    topic the member does not subscribe to, a partition out of range or assigned twice, a
    subscribed partition left unassigned), and build the owner table and each member's load.

    A single pass matters at Kafka's scale: with 2,000 members on 500 topics the result holds a
    million (member, topic) lists.
    """
    unknown = sorted(set(raw) - set(group.members))
    if unknown:
        raise PlanInvariantError(f"assignment names unknown member {unknown[0]!r}")
    owners: OwnerTable = {topic: [None] * n for topic, n in group.topics.items()}
    listed = dict.fromkeys(group.topics, 0)
    assignment: Assignment = {}
    member_load: dict[str, float] = {}
    for member_id, member in group.members.items():
        owned = raw.get(member_id) or {}
        subscribed = set(member.topics)
        normalised: dict[str, list[int]] = {}
        total = 0.0
        for topic in sorted(owned):
            partitions = owned[topic]
            if not partitions:
                continue
            if topic not in subscribed:
                raise PlanInvariantError(f"{member_id} got topic {topic} it does not subscribe to")
            table = owners[topic]
            if len(partitions) == 1:  # the common case at scale, inlined
                (partition,) = partitions
                if not 0 <= partition < len(table):
                    raise PlanInvariantError(
                        f"{member_id} got {topic}-{partition}: no such partition"
                    )
                table[partition] = member_id
                listed[topic] += 1
                total += loads[topic][partition]
                normalised[topic] = [partition]
                continue
            partitions = sorted(partitions)
            if partitions[0] < 0 or partitions[-1] >= len(table):
                raise PlanInvariantError(
                    f"{member_id} got a partition of {topic} that does not exist"
                )
            if len(partitions) < 16:  # _fill, inlined for the short lists that dominate
                for partition in partitions:
                    table[partition] = member_id
            else:
                _fill(table, partitions, member_id)
            listed[topic] += len(partitions)
            total += sum(map(loads[topic].__getitem__, partitions))
            normalised[topic] = partitions
        assignment[member_id] = normalised
        member_load[member_id] = total
    subscribed_topics = group.subscribed_topics()
    for topic, table in owners.items():
        missing = table.count(None)
        if listed[topic] != len(table) - missing:
            raise PlanInvariantError(f"a partition of {topic} was assigned twice")
        if missing and topic in subscribed_topics:
            raise PlanInvariantError(f"{topic}-{table.index(None)} left unassigned")
    return assignment, owners, member_load


def _previous_owners_and_loads(
    assignment: Assignment, topics: Mapping[str, int], loads: Loads
) -> tuple[OwnerTable, dict[str, float]]:
    """Previous owners (may include topics the owner no longer subscribes to: those still move)
    and each member's load over what it owned, in one pass over the ~60k (member, topic) lists
    of a large group. Loads are summed topic by topic in the owned order."""
    owners: OwnerTable = {topic: [None] * n for topic, n in topics.items()}
    member_load: dict[str, float] = {}
    for member_id, owned in assignment.items():
        total = 0
        for topic, partitions in owned.items():
            table, topic_loads = owners[topic], loads[topic]
            if len(partitions) == 1:
                (partition,) = partitions
                table[partition] = member_id
                total += topic_loads[partition]
                continue
            if len(partitions) < 16:  # _fill, inlined for the short lists that dominate
                for partition in partitions:
                    table[partition] = member_id
            else:
                _fill(table, partitions, member_id)
            total += sum(map(topic_loads.__getitem__, partitions))
        member_load[member_id] = total
    return owners, member_load


def compute_moves(previous: OwnerTable, target: OwnerTable) -> list[dict[str, Any]]:
    """Partitions that change owner: what a cooperative protocol would revoke and re-grant.
    Partitions nobody owned before are grants, not moves."""
    moves = []
    for topic, owners in target.items():
        before = previous[topic]
        if before == owners or before.count(None) == len(before):
            continue
        moves.extend(
            {"topic": topic, "partition": partition, "from": old, "to": new}
            for partition, (old, new) in enumerate(zip(before, owners, strict=True))
            if old != new and old is not None
        )
    return moves


def plan_group(request: PlanRequest) -> dict[str, Any]:
    """Run the request's strategy and return the plan document (collector paused: see
    `assignors.collector`)."""
    with collector_paused():
        return _plan_group(request)


def _plan_group(request: PlanRequest) -> dict[str, Any]:
    """Run the request's strategy and return the plan document."""
    group, options = request.group, request.options
    assign = strategy_function(request.strategy)
    raw = assign(group, options)
    model, loads = partition_loads(group, options)
    assignment, target, per_member = _check_and_measure(group, raw, loads)
    previous_assignment, conflicts = resolve_ownership(group)
    previous, owned_load = _previous_owners_and_loads(previous_assignment, group.topics, loads)
    moves = compute_moves(previous, target)
    subscriptions = {m: set(member.topics) for m, member in group.members.items()} if moves else {}
    budgeted = sum(1 for move in moves if move["topic"] in subscriptions[move["from"]])
    # Every subscribed partition is assigned (checked above): the grants are exactly the
    # subscribed partitions that had no previous owner.
    granted = sum(previous[topic].count(None) for topic in group.subscribed_topics())

    bound = lower_bound(group, loads)
    summary = {
        member_id: {
            "weight": member.weight,
            "partitions": sum(map(len, assignment[member_id].values())),
            "load": round(per_member[member_id], 6),
            "normalised_load": round(per_member[member_id] / member.weight, 6),
        }
        for member_id, member in group.members.items()
    }
    achieved = max(
        (per_member[m] / member.weight for m, member in group.members.items()), default=0.0
    )
    before = max(
        (owned_load[m] / member.weight for m, member in group.members.items()), default=0.0
    )
    subscribed = group.subscribed_topics()
    counts = [entry["partitions"] for entry in summary.values()]
    stats = {
        "strategy": request.strategy,
        "members": len(group.members),
        "topics": len(group.topics),
        "partitions": sum(group.topics.values()),
        "assigned": sum(counts),
        "unassigned": sum(group.topics[t] for t in subscribed) - sum(counts),
        "moves": len(moves),
        "budgeted_moves": budgeted,
        "granted_unowned": granted,
        "count_spread": (max(counts) - min(counts)) if counts else 0,
        "load_model": model,
        "max_load": round(achieved, 6),
        "lower_bound": round(bound, 6),
        "max_load_ratio": round(achieved / bound, 6) if bound > 0 else 1.0,
        "max_load_before": round(before, 6),
        "max_load_ratio_before": round(before / bound, 6) if bound > 0 else 1.0,
        "conflicting_claims": conflicts,
        "stale_ownership_dropped": group.stale_ownership_dropped,
        "unknown_subscriptions_ignored": group.unknown_subscriptions_ignored,
    }
    return {"assignment": assignment, "members": summary, "moves": moves, "stats": stats}


def plan(document: Any, strategy: str | None = None) -> dict[str, Any]:
    """Parse, validate and plan one plan-contract document. Raises PlanInputError on bad input."""
    with collector_paused():
        request = parse_request(document, strategy)
        if request.strategy not in STRATEGY_MODULES:
            raise PlanInputError(
                "strategy",
                f"unknown strategy {request.strategy!r} (one of {', '.join(STRATEGY_MODULES)})",
            )
        result = plan_group(request)
        # Freed by reference counting while the collector is still paused: the collection that
        # follows re-enabling it then scans only the plan, not the parsed group as well.
        del request
    return result
