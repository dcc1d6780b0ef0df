"""Planning as columns (issue 35): lag and rate passed as float arrays plan as the lists do
(NaN standing for null), a plan's assignment read as columns (`PlanColumns`) is the same
assignment, and claim columns checked all together (`validation._settle`) drop and count stale
parts exactly as the lists' path does."""

from __future__ import annotations

import math
import random
from array import array
from typing import Any

import pytest
from kafka_rebalance_assignors import (
    MemberRequest,
    OwnedColumns,
    PlanAssignment,
    PlanInputError,
    PlanRequest,
    numeric,
    plan,
    plan_request,
)
from kafka_rebalance_assignors.model import PartitionClaims
from kafka_rebalance_assignors.registry import STRATEGY_NAMES
from kafka_rebalance_assignors.validation import validate


def _loads(rng: random.Random, topics: dict[str, int]) -> dict[str, list[float | None]]:
    """Per topic, values >= 0 with a None now and then; some topics left out."""
    values: dict[str, list[float | None]] = {}
    for topic, count in topics.items():
        if rng.random() < 0.8:
            values[topic] = [
                None if rng.random() < 0.1 else float(rng.randint(0, 1000)) for _ in range(count)
            ]
    return values


def _as_column(values: list[float | None], code: str) -> array[float]:
    return array(code, [math.nan if value is None else value for value in values])


def _request(seed: int, strategy: str) -> tuple[PlanRequest, PlanRequest]:
    """A random request with lag and rate as lists, and the same with float arrays."""
    rng = random.Random(seed)
    topics = {f"t{i:02d}": rng.randint(1, 9) for i in range(rng.randint(1, 6))}
    names = sorted(topics)
    members = {
        f"m{i}": MemberRequest(names, weight=rng.choice([1.0, 2.0]))
        for i in range(rng.randint(1, 6))
    }
    lag, rate = _loads(rng, topics), _loads(rng, topics)
    code = rng.choice("df")
    if code == "f":  # float32 holds these integers exactly: the same values either way
        lag = {t: [None if v is None else float(v) for v in vs] for t, vs in lag.items()}
    lists = PlanRequest(topics=topics, members=members, strategy=strategy, lag=lag, rate=rate)
    columns = PlanRequest(
        topics=topics,
        members=members,
        strategy=strategy,
        lag={t: _as_column(vs, code) for t, vs in lag.items()},
        rate={t: _as_column(vs, "d") for t, vs in rate.items()},
    )
    return lists, columns


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("seed", range(12))
def test_float_columns_of_lag_and_rate_plan_as_lists(strategy: str, seed: int) -> None:
    """The same plan; the request's document writes NaN as null (the lists' document)."""
    lists, columns = _request(seed, strategy)
    expected = plan_request(lists).to_document()
    assert plan_request(columns).to_document() == expected
    assert columns.to_document() == lists.to_document()
    assert plan(columns.to_document()) == expected


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (array("d", [1.0, -2.0]), r"^lag\.t\[1\]: must be a finite number >= 0 or null"),
        (array("d", [math.inf, 0.0]), r"^lag\.t\[0\]: must be a finite number >= 0 or null"),
        (array("d", [1.0]), r"^lag\.t: has 1 values but topic t has 2 partitions"),
        (array("i", [1, 2]), r"^lag\.t: must be a list with one number per partition"),
    ],
)
def test_bad_float_columns_are_refused_naming_the_value(values: Any, message: str) -> None:
    request = PlanRequest(topics={"t": 2}, members={"m": MemberRequest(["t"])}, lag={"t": values})
    with pytest.raises(PlanInputError, match=message):
        plan_request(request)


def _random_plan(seed: int, strategy: str) -> tuple[PlanRequest, Any]:
    rng = random.Random(seed)
    topics = {f"t{i:02d}": rng.randint(0, 9) for i in range(rng.randint(1, 6))}
    names = sorted(topics)
    members = {}
    for i in range(rng.randint(1, 6)):
        subscribed = names if rng.random() < 0.7 else rng.sample(names, rng.randint(0, len(names)))
        members[f"m{i}"] = MemberRequest(subscribed)
    request = PlanRequest(topics=topics, members=members, strategy=strategy)
    return request, plan_request(request)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("seed", range(12))
def test_plan_columns_hold_the_assignment(strategy: str, seed: int) -> None:
    """Every partition of the group in the owner array, owned by the member whose lists hold
    it, -1 exactly where no list does; `owner` reads the same."""
    request, result = _random_plan(seed, strategy)
    columns = result.assignment.columns()
    assert columns.topics == tuple(sorted(request.topics))
    assert columns.members == tuple(sorted(request.members))
    assert list(columns.starts) == [
        sum(request.topics[t] for t in columns.topics[:i]) for i in range(len(columns.topics) + 1)
    ]
    expected = [-1] * sum(request.topics.values())
    for index, member_id in enumerate(columns.members):
        for topic, partitions in result.assignment[member_id].items():
            start = columns.starts[columns.topics.index(topic)]
            for partition in partitions:
                expected[start + partition] = index
                assert columns.owner(topic, partition) == member_id
    assert columns.owners.tolist() == expected
    by_hand = PlanAssignment(dict(result.assignment)).columns()  # from the lists alone
    assigned = {t for m in result.assignment.values() for t, ps in m.items() if ps}
    assert set(by_hand.topics) == assigned
    for topic in by_hand.topics:
        for partition in range(
            by_hand.starts[by_hand.topics.index(topic) + 1]
            - by_hand.starts[by_hand.topics.index(topic)]
        ):
            assert by_hand.owner(topic, partition) == columns.owner(topic, partition)


def test_plan_columns_owner_refuses_what_the_plan_does_not_have() -> None:
    result = plan_request(
        PlanRequest(topics={"a": 2}, members={"m": MemberRequest(["a"])}, strategy="sticky")
    )
    columns = result.assignment.columns()
    assert columns.owner("a", 1) == "m"
    for topic, partition in (("b", 0), ("a", 2), ("a", -1)):
        with pytest.raises(KeyError):
            columns.owner(topic, partition)


@pytest.mark.parametrize("vectorised", [True, False])
def test_claim_columns_checked_together_drop_stale_parts_as_lists_do(
    vectorised: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Members sharing one topic list: clean ones become `PartitionClaims` with the right
    global numbers; a negative partition, one at its own topic's count (above the smallest
    count), and a deleted topic each send only their member down its own path, where the stale
    part is dropped and counted as the lists' path does."""
    if vectorised and not numeric.ENABLED:
        pytest.skip("numpy is not installed")
    monkeypatch.setattr(numeric, "ENABLED", vectorised)  # numpy's passes, or the pure ones
    topics = {"a": 4, "b": 2, "c": 6}
    names = ("a", "b", "c")
    claims = {
        "m0": [0, 0, 5],
        "m1": [1, 1, 4],
        "m2": [2, -1, 3],  # b -1: negative
        "m3": [3, 0, 6],  # c 6: at c's count
        "m4": [3, 1, 2],  # b is fine, but a 3 and m3's a 3 conflict: resolved as lists are
    }
    members = {
        m: MemberRequest(list(names), owned=OwnedColumns(tuple(names), array("i", ps)))
        for m, ps in claims.items()
    }
    members["m5"] = MemberRequest(
        list(names), owned=OwnedColumns(("a", "gone"), array("i", [1, 0]))
    )
    request = PlanRequest(topics=topics, members=members, strategy="cooperative-sticky")
    group = validate(request).group
    m0 = group.members["m0"].claimed
    assert type(m0) is PartitionClaims
    assert list(m0.numbers) == [0, 4, 11]  # a0, b0 (a has 4), c5 (a and b have 6)
    assert dict(group.members["m2"].claimed) == {"a": (2,), "c": (3,)}
    assert dict(group.members["m3"].claimed) == {"a": (3,), "b": (0,)}
    assert dict(group.members["m5"].claimed) == {"a": (1,)}
    assert group.stale_ownership_dropped == 3
    lists = PlanRequest(
        topics=topics,
        members={m: MemberRequest(r.topics, owned=dict(r.owned)) for m, r in members.items()},
        strategy="cooperative-sticky",
    )
    assert plan_request(request).to_document() == plan_request(lists).to_document()
