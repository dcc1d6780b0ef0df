"""The sticky assignors' view of previous ownership, taken from the plan's one KIP-341
resolution (`assignors.ownership`), and the global-number helpers both sticky paths share.

Partitions are numbered globally in topic order (`Group.offsets`). Both paths track "taken"
partitions as one flag per global number (`Taken`). When no partition is claimed twice the flags
are read off the resolved owner array at C speed; with conflicting claims the paths set them from
what each member keeps.
"""

from __future__ import annotations

import sys
from array import array
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
        return owned, {}, owned_flags(ownership.owners, len(owned))
    members = context.group.members.values()
    order = dict.fromkeys(chain.from_iterable(member.claimed for member in members))
    owned = [{t: mine[t] for t in order if t in mine} if len(mine) > 1 else mine for mine in owned]
    return owned, ownership.runner_up, None


# byte -> flag: 0x00 (the top byte of a member index below 2**24) -> 1, 0xFF (of -1) -> 0
_TOP_BYTE_FLAG = bytes([1] + [0] * 255)


def owned_flags(owners: list[int], members: int) -> Taken:
    """The flags of an owner array (1 where some member owns the partition, 0 for -1), read off
    the array's machine bytes at C speed when every index fits in three bytes: as 32-bit ints,
    the most significant byte of each entry is 0xFF for -1 and 0 for an index below 2**24."""
    if members >= 1 << 24 or array("i").itemsize != 4:
        return bytearray(map((-1).__ne__, owners))
    raw = array("i", owners).tobytes()
    top = raw[3::4] if sys.byteorder == "little" else raw[0::4]
    return bytearray(top.translate(_TOP_BYTE_FLAG))


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
    ascending, as shared ints from `numbers`. Few free ones (the steady state: a topic's
    partitions are nearly all kept) are found by a C-level search each, the rest in one pass."""
    end = start + count
    free = taken.count(0, start, end)
    if free * 16 > count:
        return list(compress(numbers[:count], map(not_, taken[start:end])))
    found = []
    position = start
    for _ in range(free):
        position = taken.index(0, position, end)
        found.append(numbers[position - start])
        position += 1
    return found
