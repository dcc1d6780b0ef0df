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

from collections import deque
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

from kafka_rebalance_assignors.model import Assignment, Group, global_numbers

# topic -> partition -> index (in member order) of the runner-up claimant, in the order topics are
# first claimed (members in id order, each member's topics by name).
RunnerUp = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class Ownership:
    """The resolved previous ownership of one group, in the shapes the planners need."""

    # member id -> topic -> ascending partitions it keeps after resolution (every member present,
    # topics it no longer subscribes to included).
    resolved: Assignment
    # partitions claimed by more than one member (0: no partition was claimed twice).
    conflicts: int
    # for every partition in the global numbering of `Group.offsets`, the index (in member
    # order) of its resolved owner, -1 for none.
    owners: list[int]
    runner_up: RunnerUp


def resolve(group: Group) -> Ownership:
    """Resolve the group's claims. Topics nobody else claims (the usual case) take whole lists at
    once; only a topic with overlapping claims is resolved partition by partition."""
    disjoint = _resolve_disjoint(group)
    if disjoint is not None:
        resolved, owners = disjoint
        return Ownership(resolved, 0, owners, {})
    claims: dict[str, list[tuple[int, int, tuple[int, ...]]]] = {}
    for index, member in enumerate(group.members.values()):
        generation = -1 if member.generation is None else member.generation
        for topic, partitions in member.claimed.items():
            if partitions:
                claims.setdefault(topic, []).append((generation, index, partitions))
    member_ids = list(group.members)
    resolved: Assignment = {member_id: {} for member_id in member_ids}
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
                resolved[member_ids[index]][topic] = (
                    [partitions[0]] if len(partitions) == 1 else sorted(partitions)
                )
            continue
        owner_of, contested, second = _resolve_topic(group.topics[topic], topic_claims)
        conflicts += contested
        for partition, owner in enumerate(owner_of):
            if owner >= 0:
                resolved[member_ids[owner]].setdefault(topic, []).append(partition)
        if second:
            runner_up[topic] = second
    owners = [-1] * sum(group.topics.values())
    adders = {topic: offset.__add__ for topic, offset in group.offsets().items()}
    for index, owned in enumerate(resolved.values()):
        if owned:
            deque(map(owners.__setitem__, global_numbers(adders, owned), repeat(index)), maxlen=0)
    order = dict.fromkeys(topic for member in group.members.values() for topic in member.claimed)
    runner_up = {topic: runner_up[topic] for topic in order if topic in runner_up}
    return Ownership(resolved, conflicts, owners, runner_up)


def resolve_ownership(group: Group) -> tuple[Assignment, int]:
    """(resolved assignment, conflicting partitions): `resolve` in its two-value form."""
    ownership = resolve(group)
    return ownership.resolved, ownership.conflicts


_CLAIM_PARTITIONS = itemgetter(2)  # (generation, member index, partitions) -> partitions


def _resolve_disjoint(group: Group) -> tuple[Assignment, list[int]] | None:
    """The usual case at scale, recognised member by member at C speed: every claim is a
    non-empty list of an existing topic, each member's claims are in topic order, and no
    partition is claimed twice anywhere (each member's global numbers are written into one flat
    array, and as many entries must end up set as were written). Then nothing needs resolving
    and each member keeps its claims, sorted. None otherwise: the topic-by-topic resolution
    handles every other case (and gives the same result when this one applies)."""
    position = {topic: i for i, topic in enumerate(group.topics)}
    adders = {topic: offset.__add__ for topic, offset in group.offsets().items()}
    total = sum(group.topics.values())
    owners = [-1] * total
    written = 0
    resolved: Assignment = {}
    for index, (member_id, member) in enumerate(group.members.items()):
        claimed = member.claimed
        if not claimed:
            resolved[member_id] = {}
            continue
        if not position.keys() >= claimed.keys() or not all(claimed.values()):
            return None
        order = list(map(position.__getitem__, claimed))
        if len(order) > 1 and order != sorted(order):
            return None
        numbers = list(global_numbers(adders, claimed))
        if min(numbers) < 0 or max(numbers) >= total:
            return None
        deque(map(owners.__setitem__, numbers, repeat(index)), maxlen=0)
        written += len(numbers)
        resolved[member_id] = dict(zip(claimed, map(sorted, claimed.values()), strict=True))
    if total - owners.count(-1) != written:
        return None  # some partition was claimed twice
    return resolved, owners


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
