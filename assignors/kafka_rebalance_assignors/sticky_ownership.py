"""The sticky assignors' view of previous ownership, taken from the plan's one KIP-341
resolution (`assignors.ownership`), and the global-number helpers both sticky paths share.

Partitions are numbered globally in topic order (`Group.offsets`). Both paths track "taken"
partitions as one flag per global number (`Taken`). When no partition is claimed twice the flags
are read off the resolved owner array at C speed; with conflicting claims the paths set them from
what each member keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress
from operator import not_

from kafka_rebalance_assignors.context import PlanContext

# Per member (by index in id order): topic -> partitions it still owns after KIP-341 resolution.
Owned = list[Mapping[str, Sequence[int]]]
# topic -> partition -> member index of the previous-generation owner (KIP-341 runner-up).
Previous = dict[str, dict[int, int]]
# One flag per global partition number: 1 while some member keeps that partition.
Taken = bytearray


def sticky_claims(context: PlanContext) -> tuple[Owned, Previous, Taken | None]:
    """(what each member still owns, the runner-ups, the flags of every owned partition when no
    partition was claimed twice, else None). Read-only views of the context's resolution: both
    paths copy before changing anything (the flags are a fresh array, theirs to change).

    With conflicting claims each member's topics are listed in the order topics are first
    claimed (members by id, each member's topics by name), as are the runner-ups: the general
    path's move-back visits topics in that order."""
    ownership = context.ownership
    owned: Owned = list(ownership.resolved.values())
    if not ownership.conflicts:
        if not any(owned):  # a fresh group: no scan of the owner array
            return owned, {}, no_partitions_taken(len(ownership.owners))
        return owned, {}, bytearray(map((-1).__ne__, ownership.owners))
    members = context.group.members.values()
    order = dict.fromkeys(chain.from_iterable(member.claimed for member in members))
    owned = [{t: mine[t] for t in order if t in mine} if len(mine) > 1 else mine for mine in owned]
    return owned, ownership.runner_up, None


def no_partitions_taken(group_size: int) -> Taken:
    """Flags for a group of `group_size` partitions, none taken yet."""
    return bytearray(group_size)


def _collect(taken: Taken, mapping: Mapping[str, Sequence[int]], offsets: dict[str, int]) -> None:
    """Flag the partitions of a topic -> partitions mapping as taken. (A plain loop: measured
    faster than chaining iterator objects when most lists are short.)"""
    for topic, partitions in mapping.items():
        start = offsets[topic]
        for p in partitions:
            taken[start + p] = 1


def _discard(taken: Taken, mapping: Mapping[str, Sequence[int]], offsets: dict[str, int]) -> None:
    for topic, partitions in mapping.items():
        start = offsets[topic]
        for p in partitions:
            taken[start + p] = 0


def partition_numbers(counts: Iterable[int]) -> list[int]:
    """0 .. the largest count - 1, once: every topic's partition lists are slices of it and so
    share its int objects (at 1M partitions, not allocating 870,000 ints is measurable)."""
    return list(range(max(counts, default=0)))


def free_partitions(numbers: list[int], count: int, start: int, taken: Taken) -> list[int]:
    """The partitions of a topic (partition 0 at global number `start`) not flagged in `taken`,
    ascending, as shared ints from `numbers`."""
    return list(compress(numbers[:count], map(not_, taken[start : start + count])))
