"""Kafka's built-in share assignor, `simple`, for a group whose members all subscribe to the same
topics: the shape a share group has without a plan. Pure: no I/O, deterministic.

The rule, as Kafka 4.4.0 implements it (`org.apache.kafka.coordinator.group.assignor.
SimpleHomogeneousAssignmentBuilder` in the kafka-group-coordinator 4.4.0 jar, read with `javap`:
no 4.4 source was at hand, and the apache/kafka snapshot of October 2024 still has the earlier
`SimpleAssignor`, which gave every member every partition):

- with M members and P assignable partitions, each partition is to get
  `desiredSharing = (M + P - 1) // P` members (ceil(M / P)): one while partitions are at least as
  many as members, more only when members outnumber partitions;
- member i (in the coordinator's member order) is to hold
  `ceil(x * (i + 1)) - ceil(x * i)` partitions, `x = desiredSharing * P / M`: counts differ by at
  most one and add up to `desiredSharing * P`;
- sticky: a member keeps the partitions it holds while neither it nor the partition is over its
  count (the builder revokes from over-filled members and over-shared partitions first), then
  the partitions short of members go to members short of partitions.

Which member gets which free partition is this module's deterministic choice (partitions in
order, each to the member with the most room left that does not hold it); Kafka's iteration
order over hash maps is not reproduced. The shape (members per partition, partitions per member)
is Kafka's, and it is all the backtest needs: `simple` is blind to load either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

TopicPartition = tuple[str, int]


def desired_counts(members: int, partitions: int) -> tuple[int, list[int]]:
    """(members per partition, partitions per member in member order) for M members and P
    partitions, as Kafka's homogeneous builder computes them."""
    if members <= 0 or partitions <= 0:
        return 0, [0] * max(members, 0)
    sharing = (members + partitions - 1) // partitions
    per_member = sharing * partitions / members
    counts = [math.ceil(per_member * (i + 1)) - math.ceil(per_member * i) for i in range(members)]
    return sharing, counts


def simple_assignment(
    members: Sequence[str],
    partitions: Sequence[TopicPartition],
    current: Mapping[str, frozenset[TopicPartition]] | None = None,
) -> dict[str, frozenset[TopicPartition]]:
    """`simple`'s assignment of `partitions` to `members` (every member subscribed to all of
    them), keeping what `current` holds where the counts allow. Invariants: every partition has
    exactly `desiredSharing` members, member i exactly its count, no member twice on one
    partition (a partition is left short only where every member with room holds it already,
    which the counts make impossible when M <= P)."""
    sharing, counts = desired_counts(len(members), len(partitions))
    room = dict(zip(members, counts, strict=True))
    wanted = set(partitions)
    held: dict[str, set[TopicPartition]] = {m: set() for m in members}
    on: dict[TopicPartition, int] = {p: 0 for p in partitions}
    for member in members:  # sticky: keep current pairs while under both counts
        for tp in sorted((current or {}).get(member, frozenset())):
            if tp in wanted and room[member] > 0 and on[tp] < sharing:
                held[member].add(tp)
                room[member] -= 1
                on[tp] += 1
    order = {m: i for i, m in enumerate(members)}
    for tp in partitions:
        while on[tp] < sharing:
            free = [m for m in members if room[m] > 0 and tp not in held[m]]
            if not free:
                break
            member = max(free, key=lambda m: (room[m], -order[m]))
            held[member].add(tp)
            room[member] -= 1
            on[tp] += 1
    return {m: frozenset(parts) for m, parts in held.items()}
