"""Claims as columns (`OwnedColumns`): a member's ownership passed as arrays plans exactly as the
same claims passed as a mapping of lists, on random requests of every strategy (stale claims
counted the same), and bad columns are refused with a `PlanInputError` naming the field."""

from __future__ import annotations

import random
from array import array
from typing import Any

import pytest
from kafka_rebalance_assignors import (
    MemberRequest,
    OwnedColumns,
    PlanInputError,
    PlanRequest,
    numeric,
    plan,
    plan_request,
)
from kafka_rebalance_assignors.model import PartitionClaims
from kafka_rebalance_assignors.registry import STRATEGY_NAMES
from kafka_rebalance_assignors.validation import validate


@pytest.fixture(autouse=True, params=["numpy", "pure"])
def _path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test on both paths of the claims' check and global numbers: numpy's (when it is
    installed, as in the operator's install) and the pure one (the base install's)."""
    if request.param == "numpy" and not numeric.ENABLED:
        pytest.skip("numpy is not installed")
    monkeypatch.setattr(numeric, "ENABLED", request.param == "numpy")


def _claims(rng: random.Random, topics: dict[str, int], member_ids: list[str]) -> dict[str, Any]:
    """Per member, topic -> partitions: none, one per topic (the columns' fast shape), or
    several; with stale parts now and then (a deleted topic, a partition out of range or
    negative, a repeated claim) and conflicting claims between members."""
    shape = rng.choice(["fresh", "one-per-topic", "one-per-topic", "several"])
    owned: dict[str, dict[str, list[int]]] = {m: {} for m in member_ids}
    if shape == "fresh":
        return owned
    for topic, count in topics.items():
        partitions = list(range(count))
        rng.shuffle(partitions)
        for index, partition in enumerate(partitions):
            member = member_ids[index % len(member_ids)]
            if shape == "one-per-topic" and topic in owned[member]:
                continue
            owned[member].setdefault(topic, []).append(partition)
    for member in member_ids:
        if rng.random() < 0.3:
            stale = rng.choice(["gone", "range", "negative", "repeat", "conflict"])
            names = sorted(owned[member])
            if stale == "gone":
                owned[member]["gone"] = [0]
            elif stale == "conflict" and topics:
                topic = rng.choice(sorted(topics))
                if topics[topic]:
                    owned[member][topic] = [rng.randrange(topics[topic])]
            elif names and stale == "range":
                owned[member][names[0]] = [topics[names[0]] + 3]
            elif names and stale == "negative":
                owned[member][names[-1]] = [-1]
            elif names and stale == "repeat":
                owned[member][names[0]] = owned[member][names[0]] * 2
        owned[member] = {t: sorted(ps) for t, ps in sorted(owned[member].items())}
    return owned


def _columns(rng: random.Random, claims: dict[str, list[int]]) -> OwnedColumns:
    """The same claims as columns, in one of the forms a caller may pass: an int array or a
    list, with `starts` or (one partition per topic) without."""
    topics = list(claims)
    if rng.random() < 0.2:  # names out of order: not the fast path, the same plan
        topics.reverse()
    partitions = [p for t in topics for p in claims[t]]
    starts = [0]
    for topic in topics:
        starts.append(starts[-1] + len(claims[topic]))
    column: Any = array(rng.choice("iq"), partitions) if rng.random() < 0.7 else partitions
    names: Any = tuple(topics) if rng.random() < 0.5 else topics
    if len(partitions) == len(topics) and rng.random() < 0.5:
        return OwnedColumns(names, column)
    return OwnedColumns(names, column, array("i", starts) if rng.random() < 0.7 else starts)


def _pair(seed: int, strategy: str) -> tuple[PlanRequest, PlanRequest]:
    """A random request with claims as lists, and the same request with claims as columns."""
    rng = random.Random(seed)
    topics = {f"t{i:02d}": rng.randint(1, 9) for i in range(rng.randint(1, 8))}
    names = sorted(topics)
    member_ids = [f"m{i}" for i in range(rng.randint(1, 8))]
    claims = _claims(rng, topics, member_ids)
    as_lists: dict[str, MemberRequest] = {}
    as_columns: dict[str, MemberRequest] = {}
    for member_id in member_ids:
        subscribed = names if rng.random() < 0.8 else rng.sample(names, rng.randint(1, len(names)))
        generation = rng.choice([None, 1, 2])
        owned = claims[member_id]
        as_lists[member_id] = MemberRequest(subscribed, owned=owned, generation=generation)
        as_columns[member_id] = MemberRequest(
            subscribed, owned=_columns(rng, owned), generation=generation
        )
    return (
        PlanRequest(topics=topics, members=as_lists, strategy=strategy),
        PlanRequest(topics=topics, members=as_columns, strategy=strategy),
    )


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("seed", range(30))
def test_columns_plan_as_the_lists_do(strategy: str, seed: int) -> None:
    """The same plan, moves and figures (stale claims dropped and conflicting ones resolved the
    same), and the columns' request writes the same document as the lists' one."""
    lists, columns = _pair(seed, strategy)
    expected = plan_request(lists).to_document()
    assert plan_request(columns).to_document() == expected
    assert columns.to_document() == lists.to_document()
    assert plan(columns.to_document()) == expected


def test_one_partition_per_topic_stays_columns_and_stale_ones_are_counted() -> None:
    """Clean one-per-topic columns become `PartitionClaims` without a list per claim; a
    member whose columns hold stale parts plans as the lists do, and they are counted."""
    topics = {"a": 4, "b": 2, "c": 3}
    members = {
        "m0": MemberRequest(
            list(topics), owned=OwnedColumns(("a", "b", "c"), array("i", [0, 1, 2]))
        ),
        "m1": MemberRequest(
            list(topics), owned=OwnedColumns(("a", "b", "c", "gone"), array("i", [1, 5, 0, 0]))
        ),
        "m2": MemberRequest(
            list(topics),
            owned=OwnedColumns(["a", "c"], [2, -1, 3, 1], array("i", [0, 3, 4])),
        ),
    }
    request = PlanRequest(topics=topics, members=members, strategy="cooperative-sticky")
    group = validate(request).group
    assert type(group.members["m0"].claimed) is PartitionClaims
    assert dict(group.members["m0"].claimed) == {"a": (0,), "b": (1,), "c": (2,)}
    assert dict(group.members["m1"].claimed) == {"a": (1,), "c": (0,)}
    assert dict(group.members["m2"].claimed) == {"a": (2, 3), "c": (1,)}
    # m1: b's 5 is out of range and topic gone is deleted; m2: a's -1
    assert group.stale_ownership_dropped == 3
    lists = PlanRequest(
        topics=topics,
        members={m: MemberRequest(r.topics, owned=dict(r.owned)) for m, r in members.items()},
        strategy="cooperative-sticky",
    )
    assert plan_request(request).to_document() == plan_request(lists).to_document()


def test_the_plan_does_not_read_the_callers_columns_later() -> None:
    """A plan's assignment is built on read, from the columns of members that kept their
    claims; changing the caller's array after planning does not change it (validation keeps
    its own copy)."""
    first, second = array("i", [0, 0]), array("i", [1, 1])
    request = PlanRequest(
        topics={"a": 2, "b": 2},
        members={
            "m0": MemberRequest(["a", "b"], owned=OwnedColumns(("a", "b"), first), generation=1),
            "m1": MemberRequest(["a", "b"], owned=OwnedColumns(("a", "b"), second), generation=1),
        },
        strategy="cooperative-sticky",
    )
    result = plan_request(request)
    first[0] = 1
    assert result.assignment["m0"] == {"a": [0], "b": [0]}
    assert result.assignment["m1"] == {"a": [1], "b": [1]}


def _one(owned: Any) -> PlanRequest:
    return PlanRequest(topics={"t": 3, "u": 2}, members={"m": MemberRequest(["t"], owned=owned)})


BAD_COLUMNS = [
    (_one(OwnedColumns("tu", [0, 1])), r"^members\.m\.owned\.topics: must be a list"),
    (_one(OwnedColumns(["t", 7], [0, 1])), r"^members\.m\.owned\.topics: must be a list"),
    (_one(OwnedColumns(["t", "t"], [0, 1])), r"^members\.m\.owned\.topics: names topic t twice"),
    (_one(OwnedColumns(["t"], {0: 1})), r"^members\.m\.owned\.partitions: must be a sequence"),
    (_one(OwnedColumns(["t"], array("d", [0.0]))), r"^members\.m\.owned\.partitions: must be"),
    (_one(OwnedColumns(["t", "u"], [0])), r"^members\.m\.owned\.partitions: has 1 numbers"),
    (_one(OwnedColumns(["t"], [0, 1], [0, 2, 2])), r"^members\.m\.owned\.starts: must be 2 "),
    (_one(OwnedColumns(["t", "u"], [0, 1], [0, 2, 1])), r"^members\.m\.owned\.starts: "),
    (_one(OwnedColumns(["t", "u"], [0, 1], [1, 1, 2])), r"^members\.m\.owned\.starts: "),
    (_one(OwnedColumns(["t", "u"], [0, 1], [0, 1.0, 2])), r"^members\.m\.owned\.starts: "),
    (_one(OwnedColumns(["t", "u"], [0, "1"])), r"^members\.m\.owned\.u: must be a list of"),
    (_one(OwnedColumns(["t", "u"], [0, True])), r"^members\.m\.owned\.u: must be a list of"),
]


@pytest.mark.parametrize(("request_", "message"), BAD_COLUMNS)
def test_bad_columns_are_refused_naming_the_field(request_: PlanRequest, message: str) -> None:
    with pytest.raises(PlanInputError, match=message):
        plan_request(request_)


def test_a_bad_partition_in_columns_is_refused_as_in_the_document() -> None:
    """A partition that is not an int: the same message as the request's document gets."""
    request = _one(OwnedColumns(["t", "u"], [0, "1"]))
    with pytest.raises(PlanInputError) as typed:
        plan_request(request)
    with pytest.raises(PlanInputError) as previewed:
        plan(request.to_document())
    assert str(typed.value) == str(previewed.value)


def test_columns_read_as_the_mapping_they_stand_for() -> None:
    columns = OwnedColumns(("a", "b"), array("i", [3, 1, 2]), array("i", [0, 1, 3]))
    assert columns == {"a": [3], "b": [1, 2]}
    assert list(columns) == ["a", "b"] and len(columns) == 2 and "b" in columns
    assert columns["b"] == [1, 2]
    columns["b"].append(9)  # a fresh list each read
    assert columns["b"] == [1, 2]
    assert OwnedColumns(["x", "y"], [4, 5]) == {"x": [4], "y": [5]}


@pytest.mark.parametrize("as_array", [True, False])
def test_global_numbers_near_the_partition_cap_are_exact(as_array: bool) -> None:
    """The claims' global numbers are added as lanes of one integer: exact up to the group's
    largest number (just below MAX_PARTITIONS), from columns and from lists alike."""
    topics = {"a": 3_000_000, "b": 4_000_000, "c": 2_999_999}
    partitions = [2_999_999, 3_999_999, 2_999_998]
    owned: Any = (
        OwnedColumns(("a", "b", "c"), array("i", partitions))
        if as_array
        else dict(zip(topics, ([p] for p in partitions), strict=True))
    )
    request = PlanRequest(topics=topics, members={"m": MemberRequest(list(topics), owned=owned)})
    claimed = validate(request).group.members["m"].claimed
    assert type(claimed) is PartitionClaims
    assert list(claimed.numbers) == [2_999_999, 3_000_000 + 3_999_999, 7_000_000 + 2_999_998]
    assert dict(claimed) == {"a": (2_999_999,), "b": (3_999_999,), "c": (2_999_998,)}
