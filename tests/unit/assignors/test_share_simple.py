"""Kafka's `simple` share assignor as a pure rule (`kafka_rebalance_assignors.share_simple`)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors.share_simple import desired_counts, simple_assignment

EXAMPLES = settings(max_examples=200, deadline=None)


def shape(members: int, partitions: int) -> tuple[list[str], list[tuple[str, int]]]:
    return [f"m{i}" for i in range(members)], [("t", p) for p in range(partitions)]


@pytest.mark.parametrize(
    ("members", "partitions", "sharing", "counts"),
    [
        (3, 4, 1, [2, 1, 1]),  # the integration test's groups: 2/1/1, one member per partition
        (4, 4, 1, [1, 1, 1, 1]),
        (5, 2, 3, [2, 1, 1, 1, 1]),  # members outnumber partitions: ceil(5/2) per partition
        (6, 3, 2, [1, 1, 1, 1, 1, 1]),
        (1, 7, 1, [7]),
    ],
)
def test_the_counts_are_kafkas(
    members: int, partitions: int, sharing: int, counts: list[int]
) -> None:
    assert desired_counts(members, partitions) == (sharing, counts)


@EXAMPLES
@given(st.integers(1, 12), st.integers(1, 12))
def test_every_partition_gets_its_sharing_and_member_counts_differ_by_at_most_one(
    members: int, partitions: int
) -> None:
    names, tps = shape(members, partitions)
    result = simple_assignment(names, tps)
    sharing, counts = desired_counts(members, partitions)
    per_partition = Counter(tp for parts in result.values() for tp in parts)
    assert all(per_partition[tp] == sharing for tp in tps)
    assert [len(result[m]) for m in names] == counts
    assert max(counts) - min(counts) <= 1
    if members <= partitions:
        assert sharing == 1  # a hot partition keeps one member while others idle


@EXAMPLES
@given(st.integers(1, 10), st.integers(1, 10))
def test_it_is_sticky_a_fixed_point_and_keeps_what_fits(members: int, partitions: int) -> None:
    names, tps = shape(members, partitions)
    first = simple_assignment(names, tps)
    assert simple_assignment(names, tps, first) == first
    # one member leaves (one member per partition before and after): the others keep every
    # partition their new counts allow
    if 1 < members <= partitions:
        rest = names[1:]
        again = simple_assignment(rest, tps, first)
        _sharing, counts = desired_counts(len(rest), partitions)
        for member, count in zip(rest, counts, strict=True):
            kept = len(first[member] & again[member])
            assert kept == min(count, len(first[member]))


def test_stale_and_unknown_partitions_in_the_current_assignment_are_dropped() -> None:
    names, tps = shape(2, 2)
    result = simple_assignment(names, tps, {"m0": frozenset({("t", 9), ("gone", 0)})})
    assert result == {"m0": frozenset({("t", 0)}), "m1": frozenset({("t", 1)})}
