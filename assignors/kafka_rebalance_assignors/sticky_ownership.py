"""The sticky assignors' view of previous ownership, taken from the plan's one KIP-341
resolution (`assignors.ownership`), and the global-number helpers both sticky paths share.

Partitions are numbered globally in topic order (`Group.offsets`). When no partition is claimed
twice, both paths track "taken" partitions as one set of global numbers, built here at C speed from
the resolved owner array; with conflicting claims they rebuild it from what each member keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress
from operator import not_

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import global_numbers

# Per member (by index in id order): topic -> partitions it still owns after KIP-341 resolution.
Owned = list[dict[str, Sequence[int]]]
# topic -> partition -> member index of the previous-generation owner (KIP-341 runner-up).
Previous = dict[str, dict[int, int]]


def sticky_claims(context: PlanContext) -> tuple[Owned, Previous, set[int] | None]:
    """(what each member still owns, the runner-ups, the global numbers of every owned partition
    when no partition was claimed twice, else None). Read-only views of the context's resolution:
    both paths copy before changing anything.

    With conflicting claims each member's topics are listed in the order topics are first
    claimed (members by id, each member's topics by name), as are the runner-ups: the general
    path's move-back visits topics in that order."""
    ownership = context.ownership
    owned: Owned = list(ownership.resolved.values())
    if not ownership.conflicts:
        # Each member's global numbers at C speed: the cost follows the claims, not the group.
        adders = {topic: offset.__add__ for topic, offset in context.offsets.items()}
        numbers: set[int] = set()
        for mine in owned:
            if mine:
                numbers.update(global_numbers(adders, mine))
        return owned, {}, numbers
    members = context.group.members.values()
    order = dict.fromkeys(chain.from_iterable(member.claimed for member in members))
    owned = [{t: mine[t] for t in order if t in mine} if len(mine) > 1 else mine for mine in owned]
    return owned, ownership.runner_up, None


def _collect(
    numbers: set[int], mapping: Mapping[str, Sequence[int]], offsets: dict[str, int]
) -> None:
    """Add the global partition numbers of a topic -> partitions mapping to `numbers`. (A plain
    loop: measured faster than chaining iterator objects when most lists are short.)"""
    add_number = numbers.add
    for topic, partitions in mapping.items():
        start = offsets[topic]
        for p in partitions:
            add_number(start + p)


def _discard(
    numbers: set[int], mapping: Mapping[str, Sequence[int]], offsets: dict[str, int]
) -> None:
    for topic, partitions in mapping.items():
        start = offsets[topic]
        for p in partitions:
            numbers.discard(start + p)


def partition_numbers(counts: Iterable[int]) -> list[int]:
    """0 .. the largest count - 1, once: every topic's partition lists are slices of it and so
    share its int objects (at 1M partitions, not allocating 870,000 ints is measurable)."""
    return list(range(max(counts, default=0)))


def free_partitions(numbers: list[int], count: int, start: int, taken: set[int]) -> list[int]:
    """The partitions of a topic (partition 0 at global number `start`) whose global numbers
    are not in `taken`, ascending, as shared ints from `numbers`."""
    return list(
        compress(numbers[:count], map(not_, map(taken.__contains__, range(start, start + count))))
    )
