"""`TopicPartitions` (a document's partitions, compact) reads, compares and copies like the dict
of lists it was made from; the report's owner codes and `placement_needed` give the same answers
from it as from dicts."""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest
from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_common.wire import AssignmentDocument
from kafka_rebalance_operator import planning
from kafka_rebalance_operator.kube.assignment_doc import (
    document_text,
    held,
    parse_document,
    render_documents,
)
from kafka_rebalance_operator.lag import Layout
from kafka_rebalance_operator.partition_sets import TopicPartitions
from kafka_rebalance_operator.phases.report import owner_codes

RAW = {"orders": [0, 2, 5], "audit": [1], "empty": [], "zeta": [7, 3]}


def test_reads_like_the_dict_it_was_made_from() -> None:
    parts = TopicPartitions(RAW)
    assert list(parts) == list(RAW)
    assert dict(parts) == RAW
    assert list(parts.items()) == list(RAW.items())
    assert list(parts.values()) == list(RAW.values())
    assert len(parts) == 4 and len(parts.items()) == 4
    assert parts["zeta"] == [7, 3]  # the order given, not sorted
    assert parts.get("missing") is None and parts.get("missing", []) == []
    assert "audit" in parts and "missing" not in parts and 3 not in parts
    assert ("orders", [0, 2, 5]) in parts.items()
    assert parts.count() == 6
    assert not TopicPartitions() and not TopicPartitions({}) and parts
    with pytest.raises(KeyError):
        parts["missing"]


def test_a_lookup_gives_a_new_list_each_time() -> None:
    parts = TopicPartitions(RAW)
    got = parts["orders"]
    got.append(99)
    assert parts["orders"] == [0, 2, 5]


@pytest.mark.parametrize(
    "other, equal",
    [
        (RAW, True),
        ({"zeta": [7, 3], "audit": [1], "orders": [0, 2, 5], "empty": []}, True),  # any order
        (TopicPartitions({"zeta": [7, 3], "audit": [1], "orders": [0, 2, 5], "empty": []}), True),
        ({**RAW, "zeta": [3, 7]}, False),  # lists compare in order, as in a dict of lists
        ({**RAW, "audit": (1,)}, False),  # a tuple is not a list, as in a dict of lists
        ({k: v for k, v in RAW.items() if k != "empty"}, False),
        ({**RAW, "more": [1]}, False),
        ([("orders", [0, 2, 5])], False),
    ],
)
def test_compares_like_a_dict_of_lists(other: object, equal: bool) -> None:
    parts = TopicPartitions(RAW)
    assert (parts == other) is equal
    assert (parts != other) is not equal


def test_copies_and_pickles() -> None:
    parts = TopicPartitions(RAW)
    assert copy.deepcopy(parts) == parts and copy.copy(parts) == parts
    assert pickle.loads(pickle.dumps(parts)) == parts
    assert repr(parts) == repr(RAW)
    with pytest.raises(TypeError):
        hash(parts)


def test_held_documents_keep_it_and_replace_shares_it() -> None:
    from dataclasses import replace

    document = held(
        AssignmentDocument("g", "m", 1, {"b": (1,), "a": (0,)}, {"c": (2,)}, "h", "now")
    )
    assert isinstance(document.partitions, TopicPartitions)
    assert isinstance(document.revoking, TopicPartitions)
    assert document.partitions == {"b": [1], "a": [0]}
    assert replace(document, generated_at="").partitions is document.partitions
    read = parse_document(document_text(document))
    assert read is not None and isinstance(read.partitions, TopicPartitions)
    assert read.partitions == {"a": [0], "b": [1]} and read.revoking == {"c": [2]}
    rendered = render_documents("g", Assignment({"m": {"b": [1], "a": [0]}}), 1, "h", "now")
    assert isinstance(rendered["m"].partitions, TopicPartitions)
    assert held(rendered["m"]) == rendered["m"] == parse_document(document_text(rendered["m"]))


def _random_assignment(
    rng: random.Random,
) -> tuple[dict[str, int], dict[str, dict[str, list[int]]]]:
    topics = {f"t{i}": rng.randint(1, 6) for i in range(rng.randint(1, 5))}
    members: dict[str, dict[str, list[int]]] = {f"m{i}": {} for i in range(rng.randint(1, 4))}
    for topic, count in topics.items():
        for p in range(count + 1):  # one past the count: not a partition of the topic
            if rng.random() < 0.8:
                members[rng.choice(list(members))].setdefault(topic, []).append(p)
    members[rng.choice(list(members))]["gone"] = [0]  # a topic the layout no longer has
    return topics, members


@pytest.mark.parametrize("seed", range(30))
def test_owner_codes_and_placement_match_the_dicts(seed: int) -> None:
    rng = random.Random(seed)
    topics, assignment = _random_assignment(rng)
    layout = Layout.of(topics)
    compact = {m: TopicPartitions(ts) for m, ts in assignment.items()}
    members, owner = owner_codes(layout, assignment)
    members_c, owner_c = owner_codes(layout, compact)
    assert members == members_c and np.array_equal(owner, owner_c)

    documents = {
        m: AssignmentDocument("g", m, 1, ts, plan_hash="h") for m, ts in assignment.items()
    }
    covered = {(t, p) for ts in assignment.values() for t, ps in ts.items() for p in ps}
    whole = all((t, p) in covered for t, n in topics.items() for p in range(n))
    assert planning.placement_needed(topics, sorted(assignment), documents) is (not whole)
