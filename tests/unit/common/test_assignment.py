"""The assignment vocabulary (`kafka_rebalance_common.assignment`): an `Assignment` reads and
compares like the dict of lists it stands for, answers who owns what and what moved, and its
JSON text (`wire.encode_assignment` / `wire.decode_assignment`) round-trips and refuses bad input
naming the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_rebalance_common import wire
from kafka_rebalance_common.assignment import Assignment

members = st.text(alphabet="abcdefgh-0123", min_size=1, max_size=6)
topics = st.text(alphabet="xyz.", min_size=1, max_size=4)
partition_lists = st.frozensets(st.integers(0, 300), min_size=1, max_size=12).map(sorted)
raw_assignments = st.dictionaries(
    members, st.dictionaries(topics, partition_lists, max_size=4), max_size=6
)


def test_it_reads_and_compares_like_the_dict_it_holds() -> None:
    raw = {"a": {"t": [0, 2]}, "b": {}}
    assignment = Assignment(raw)
    assert assignment == raw and raw == assignment
    assert assignment == Assignment({"a": {"t": (0, 2)}, "b": {}})  # tuples read alike
    assert assignment != {"a": {"t": [0, 2]}}  # an empty member is a decision too
    assert assignment != {"a": {"t": [0, 1]}, "b": {}}
    assert assignment != {"a": {"t": [0, 2], "u": [1]}, "b": {}}
    assert list(assignment) == assignment.members() == ["a", "b"]
    assert assignment.partitions_of("a") == {"t": [0, 2]}
    assert assignment.partitions_of("nobody") == {}
    assert assignment.partition_count() == 2
    assert "a" in assignment and "c" not in assignment
    assert Assignment.of(assignment) is assignment
    with pytest.raises(TypeError):
        hash(assignment)


def test_it_keeps_what_it_is_given_without_copying() -> None:
    """The planner's result is passed on as it is (a million partitions are not copied)."""
    raw = {"a": {"t": [0]}}
    assert Assignment(raw)["a"] is raw["a"]


def test_normalised_sorts_dedupes_and_drops_empty_topics_but_not_empty_members() -> None:
    built = Assignment.normalised({"b": {"u": [3, 1, 3], "t": []}, "a": {}})
    assert built.to_dict() == {"a": {}, "b": {"u": [1, 3]}}
    assert built.members() == ["a", "b"]


def test_owners_and_moves() -> None:
    before = Assignment({"a": {"t": [0, 1]}, "b": {"t": [2]}})
    after = Assignment({"a": {"t": [0]}, "b": {"t": [1, 2]}, "c": {"t": [3]}})
    assert before.owner_of("t", 1) == "a" and after.owner_of("t", 1) == "b"
    assert before.owner_of("t", 3) is None
    # t-3 is granted from nobody: not a move
    assert before.moves_to(after) == {("t", 1): ("a", "b")}
    assert after.moves_to(before) == {("t", 1): ("b", "a")}
    assert before.moves_to(before) == {}


def test_with_empty_adds_members_without_replacing_any() -> None:
    assignment = Assignment({"a": {"t": [0]}})
    assert assignment.with_empty(["a", "z"]) == {"z": {}, "a": {"t": [0]}}


@given(raw_assignments)
def test_the_text_round_trips(raw: dict[str, dict[str, list[int]]]) -> None:
    assignment = Assignment(raw)
    text = wire.encode_assignment(assignment)
    assert wire.decode_assignment(text) == assignment
    assert wire.assignment_hash(wire.decode_assignment(text)) == wire.assignment_hash(raw)
    assert assignment.to_dict() == raw and assignment.to_dict() is not raw


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[", "input: not JSON"),
        ("[]", "input: not a JSON object (list)"),
        ('{"a": []}', "a: not an object (list)"),
        ('{"a": {"t": 3}}', "a.t: not a list (int)"),
        ('{"a": {"t": [0, "1"]}}', "a.t[1]: not an integer"),
        ('{"a": {"t": [true]}}', "a.t[0]: not an integer"),
        ('{"a": {"t": [-1]}}', "a.t[0]: negative partition -1"),
        ('{"a": {"t": [1, 1]}}', "a.t: a partition is listed twice"),
    ],
)
def test_bad_text_is_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(wire.AssignmentError) as refused:
        wire.decode_assignment(text)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)
