"""The claims' check and global numbers in numpy (`numeric.claim_numbers`) give what the pure
lane arithmetic (`validation._lane_numbers`) gives, for clean blocks and for blocks with a
negative partition or one at or above its topic's count (counts on either side of 2**16, where
the pure path changes its method)."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_rebalance_assignors import numeric
from kafka_rebalance_assignors.validation import _lane_numbers

pytestmark = pytest.mark.skipif(not numeric.ENABLED, reason="numpy is not installed")


@st.composite
def _blocks(draw: st.DrawFn) -> tuple[list[int], list[int], list[list[int]]]:
    """(topic counts, bases, rows of one partition per topic), mostly clean."""
    counts = draw(
        st.lists(st.sampled_from([1, 2, 7, 255, 256, 257, 65_535, 65_536, 70_000]), min_size=1)
    )
    bases = list(
        draw(st.permutations([sum(counts[:i]) for i in range(len(counts))]))
    )  # any topic order: a base is just a number to add
    rows = draw(
        st.lists(
            st.tuples(*[st.integers(0, count - 1) for count in counts]).map(list),
            min_size=1,
            max_size=6,
        )
    )
    if draw(st.booleans()):  # one bad claim: negative, at its count, or far above
        row, column = draw(st.integers(0, len(rows) - 1)), draw(st.integers(0, len(counts) - 1))
        rows[row][column] = draw(
            st.sampled_from([-1, -(2**31), counts[column], counts[column] + 1, 2**31 - 1])
        )
    return counts, bases, rows


@given(_blocks())
def test_numpy_and_lane_arithmetic_agree(
    block: tuple[list[int], list[int], list[list[int]]],
) -> None:
    counts, bases, rows = block
    names = tuple(f"t{i}" for i in range(len(counts)))
    joined = array("i", [p for row in rows for p in row]).tobytes()
    topics = dict(zip(names, counts, strict=True))
    offsets = dict(zip(names, bases, strict=True))
    expected = _lane_numbers(joined, len(rows), names, topics, offsets)
    assert numeric.claim_numbers(joined, bases, counts) == expected
    clean = all(0 <= p < count for row in rows for p, count in zip(row, counts, strict=True))
    if clean:
        sums = [p + base for row in rows for p, base in zip(row, bases, strict=True)]
        assert expected == array("i", sums).tobytes()
    else:
        assert expected is None


def test_claim_numbers_refuses_a_block_that_is_not_whole_rows() -> None:
    with pytest.raises(ValueError, match="whole rows"):
        numeric.claim_numbers(array("i", [0, 1, 2]).tobytes(), [0, 5], [5, 5])
    with pytest.raises(ValueError, match="whole rows"):
        numeric.claim_numbers(b"", [], [])
    assert numeric.claim_numbers(b"", [0], [1]) == b""
