"""Previous ownership after the KIP-341 generation rule: the one resolver every strategy and the
plan's moves and stats use.

Claims come from `Member.claimed` with `Member.generation` (None counts as -1, Kafka's
DEFAULT_GENERATION). On a partition claimed by several members the highest generation wins; a tie
at the top leaves the partition unowned. The unique claimant of the next lower generation is the
partition's *runner-up*: the "previous owner" Kafka's sticky assignors move a partition back to
when balance allows.

Pure and computed once per plan (by `context.prepare`); the results are shared, so treat them as
read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from operator import add, itemgetter, lt

from kafka_rebalance_assignors.model import Group, PartitionClaims, global_numbers, scatter

# member id -> topic -> the ascending partitions it keeps (read-only: shared with the input).
Resolved = dict[str, Mapping[str, tuple[int, ...]]]

# topic -> partition -> index (in member order) of the runner-up claimant, in the order topics are
# first claimed (members in id order, each member's topics by name).
RunnerUp = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class Ownership:
    """The resolved previous ownership of one group, in the shapes the planners need."""

    # member id -> topic -> ascending partitions it keeps after resolution (every member present,
    # topics it no longer subscribes to included, topics in topic order).
    resolved: Resolved
    # partitions claimed by more than one member (0: no partition was claimed twice).
    conflicts: int
    # for every partition in the global numbering of `Group.offsets`, the index (in member
    # order) of its resolved owner, -1 for none.
    owners: list[int]
    runner_up: RunnerUp
    # how many entries of `owners` are -1 (partitions nobody owns after resolution)
    unowned: int = 0


def resolve(group: Group) -> Ownership:
    """Resolve the group's claims. Topics nobody else claims (the usual case) take whole lists at
    once; only a topic with overlapping claims is resolved partition by partition."""
    disjoint = _resolve_disjoint(group)
    if disjoint is not None:
        kept_claims, owner_array, written = disjoint
        return Ownership(kept_claims, 0, owner_array, {}, len(owner_array) - written)
    claims: dict[str, list[tuple[int, int, tuple[int, ...]]]] = {}
    for index, member in enumerate(group.members.values()):
        generation = -1 if member.generation is None else member.generation
        for topic, partitions in member.claimed.items():
            if partitions:
                claims.setdefault(topic, []).append((generation, index, partitions))
    member_ids = list(group.members)
    kept: dict[str, dict[str, list[int]]] = {member_id: {} for member_id in member_ids}
    conflicts = 0
    runner_up: RunnerUp = {}
    for topic in group.topics:
        topic_claims = claims.get(topic)
        if not topic_claims:
            continue
        if len(topic_claims) == 1 or sum(map(len, map(_CLAIM_PARTITIONS, topic_claims))) == len(
            set().union(*map(_CLAIM_PARTITIONS, topic_claims))
        ):
            for _, index, partitions in topic_claims:
                kept[member_ids[index]][topic] = sorted(partitions)
            continue
        owner_of, contested, second = _resolve_topic(group.topics[topic], topic_claims)
        conflicts += contested
        for partition, owner in enumerate(owner_of):
            if owner >= 0:
                kept[member_ids[owner]].setdefault(topic, []).append(partition)
        if second:
            runner_up[topic] = second
    resolved: Resolved = {
        member_id: {topic: tuple(partitions) for topic, partitions in mine.items()}
        for member_id, mine in kept.items()
    }
    owners = [-1] * sum(group.topics.values())
    adders = {topic: offset.__add__ for topic, offset in group.offsets().items()}
    for index, owned in enumerate(resolved.values()):
        if owned:
            scatter(owners, global_numbers(adders, owned), index)
    order = dict.fromkeys(topic for member in group.members.values() for topic in member.claimed)
    runner_up = {topic: runner_up[topic] for topic in order if topic in runner_up}
    return Ownership(resolved, conflicts, owners, runner_up, owners.count(-1))


def resolve_ownership(group: Group) -> tuple[Resolved, int]:
    """(resolved assignment, conflicting partitions): `resolve` in its two-value form."""
    ownership = resolve(group)
    return ownership.resolved, ownership.conflicts


_CLAIM_PARTITIONS = itemgetter(2)  # (generation, member index, partitions) -> partitions
_FIRST = itemgetter(0)
_ONE = {1}


def _resolve_disjoint(group: Group) -> tuple[Resolved, list[int], int] | None:
    """The usual case at scale: no partition is claimed twice. Then nothing needs resolving and
    each member keeps its claims as they are: the member's own mapping is shared, not copied,
    when its topics are in topic order and each claim is an ascending tuple of in-range
    partitions (what validation builds), otherwise a sorted copy. The flat owner array is filled
    member by member when each claim is one partition (the usual shape of a member owning a
    little of many topics), else claim by claim, and as many entries must end up set as were
    written. None when a claim names an unknown topic or a partition out of range, or some
    partition is claimed twice: the topic-by-topic resolution handles those (and gives the same
    owners otherwise)."""
    offsets: Mapping[str, int] = group.offsets()
    counts = group.topics
    position = {topic: i for i, topic in enumerate(counts)}
    owners = [-1] * sum(counts.values())
    written = 0
    resolved: Resolved = {}
    for index, (member_id, member) in enumerate(group.members.items()):
        claimed = member.claimed
        if type(claimed) is PartitionClaims and (
            claimed.offsets is offsets or claimed.offsets == offsets
        ):
            # Columns already in the group's numbering, topics in order, in range (validation
            # built them): the owner array straight from the array, no object read per claim.
            offsets = claimed.offsets  # the next member's (the same dict) is then checked by id
            scatter(owners, claimed.numbers, index)
            written += len(claimed.numbers)
            resolved[member_id] = claimed
            continue
        claimed_items: Iterable[tuple[str, tuple[int, ...]]]
        in_order = True
        if len(claimed) > 1:
            if not position.keys() >= claimed.keys():
                return None
            order = list(map(position.__getitem__, claimed))
            in_order = order == sorted(order)
        if len(claimed) > 1 and set(map(len, claimed.values())) == _ONE:
            # One partition per topic (a member owning a little of many topics, a million
            # claims at Kafka's scale): the whole member at once, in C-level maps.
            # Claims are in range (`Member`'s invariant, which validation establishes).
            numbers = map(add, map(offsets.__getitem__, claimed), map(_FIRST, claimed.values()))
            scatter(owners, numbers, index)
            written += len(claimed)
            claimed_items = ()
        else:
            claimed_items = claimed.items()
        for topic, partitions in claimed_items:
            start, count = offsets.get(topic), counts.get(topic)
            if start is None or count is None or not partitions:
                return None
            if len(partitions) == 1:
                partition = partitions[0]
                if not 0 <= partition < count:
                    return None
                owners[start + partition] = index
            else:
                ascending = all(map(lt, partitions, islice(partitions, 1, None)))
                low, high = (
                    (partitions[0], partitions[-1])
                    if ascending
                    else (
                        min(partitions),
                        max(partitions),
                    )
                )
                if low < 0 or high >= count:
                    return None
                in_order = in_order and ascending and type(partitions) is tuple
                scatter(owners, map(start.__add__, partitions), index)
            written += len(partitions)
        if in_order:
            resolved[member_id] = claimed
        else:
            in_topic_order = sorted(claimed, key=position.__getitem__)
            resolved[member_id] = {topic: tuple(sorted(claimed[topic])) for topic in in_topic_order}
    if len(owners) - owners.count(-1) != written:
        return None  # some partition was claimed twice
    return resolved, owners, written


def _resolve_topic(
    count: int, claims: list[tuple[int, int, tuple[int, ...]]]
) -> tuple[list[int], int, dict[int, int]]:
    """One topic with overlapping claims: the owner (member index, -1 for none) per partition,
    how many partitions had more than one claimant, and each contested partition's runner-up."""
    claimants: dict[int, list[tuple[int, int]]] = {}
    for generation, index, partitions in claims:
        for partition in partitions:
            claimants.setdefault(partition, []).append((generation, index))
    owner_of = [-1] * count
    runner_up: dict[int, int] = {}
    contested = 0
    for partition, contenders in claimants.items():
        if len(contenders) == 1:
            owner_of[partition] = contenders[0][1]
            continue
        contested += 1
        contenders.sort(key=lambda c: -c[0])  # stable: equal generations stay in member order
        top = contenders[0][0]
        if contenders[1][0] != top:
            owner_of[partition] = contenders[0][1]
        lower = [c for c in contenders if c[0] < top]
        if lower and (len(lower) == 1 or lower[1][0] != lower[0][0]):
            runner_up[partition] = lower[0][1]
    return owner_of, contested, runner_up
