"""The typed planning API: a `PlanRequest` plans exactly as its plan-contract document does, the
group builder shared by the operator and the replay, the one "unknown lag" rule, and the one
moves rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors import (
    MemberRequest,
    Plan,
    PlanInputError,
    PlanOptions,
    PlanRequest,
    group_request,
    moves_between,
    plan,
    plan_request,
)
from kafka_rebalance_assignors.context import prepare
from kafka_rebalance_assignors.load import partition_loads
from kafka_rebalance_assignors.model import Options
from kafka_rebalance_assignors.parsing import parse_request
from kafka_rebalance_assignors.registry import STRATEGY_NAMES

EXAMPLES = settings(max_examples=60, deadline=None)


@st.composite
def requests(draw: st.DrawFn) -> PlanRequest:
    """Up to 4 topics of up to 8 partitions, up to 6 members with random subscriptions (unknown
    topics included), weights, claims (stale and conflicting ones included) and generations,
    lags and rates with unobserved values, and any strategy and options."""
    topics = {f"t{i}": draw(st.integers(0, 8)) for i in range(draw(st.integers(1, 4)))}
    names = [*topics, "gone"]
    members: dict[str, MemberRequest] = {}
    for i in range(draw(st.integers(1, 6))):
        subscription = draw(st.lists(st.sampled_from(names), unique=True))
        owned = {
            topic: draw(st.lists(st.integers(0, 9), unique=True, max_size=4))
            for topic in draw(st.lists(st.sampled_from(names), unique=True, max_size=3))
        }
        members[f"m{i}"] = MemberRequest(
            topics=subscription,
            weight=draw(st.sampled_from([1.0, 0.5, 2.0, 3.0])),
            owned={t: ps for t, ps in owned.items() if ps},
            generation=draw(st.none() | st.integers(0, 3)),
        )
    value = st.none() | st.floats(0, 1000, allow_nan=False)
    lag = {t: draw(st.lists(value, min_size=n, max_size=n)) for t, n in topics.items()}
    rate = {t: draw(st.lists(value, min_size=n, max_size=n)) for t, n in topics.items()}
    options = PlanOptions(
        count_balance=draw(st.sampled_from([None, "strict", "relaxed"])),
        max_moves=draw(st.sampled_from([None, 0, 2, "50%"])),
        min_improvement=draw(st.sampled_from([None, 0.0, 0.1])),
        load_model=draw(st.sampled_from([None, "count", "lag", "rate", "drain"])),
    )
    return PlanRequest(
        topics=topics,
        members=members,
        strategy=draw(st.sampled_from(STRATEGY_NAMES)),
        lag=draw(st.sampled_from([{}, lag])),
        rate=draw(st.sampled_from([{}, rate])),
        options=options,
    )


@EXAMPLES
@given(requests())
def test_a_request_plans_as_its_document_does_through_json(request: PlanRequest) -> None:
    """What `kafka-rebalance plan` previews (the document as JSON text) is what an in-process
    caller gets, byte for byte, and the typed plan converts back to the same document."""
    typed = plan_request(request)
    previewed = plan(json.loads(json.dumps(request.to_document())))
    assert json.dumps(typed.to_document()) == json.dumps(previewed)
    assert Plan.from_document(previewed) == typed


@EXAMPLES
@given(requests())
def test_moves_between_counts_what_the_plan_counts(request: PlanRequest) -> None:
    """The one moves rule: from the resolved previous ownership to the plan's assignment,
    `moves_between` finds exactly the plan's moves."""
    typed = plan_request(request)
    parsed = parse_request(request.to_document())
    resolved = prepare(parsed.group, parsed.options).ownership.resolved
    found = moves_between(parsed.group.topics, resolved, typed.assignment)
    assert list(found) == list(typed.moves)


def test_a_bad_request_is_refused_naming_the_field() -> None:
    request = PlanRequest(topics={"t": 2}, members={"a": MemberRequest(["t"], weight=0.0)})
    with pytest.raises(PlanInputError, match=r"^members\.a\.weight: "):
        plan_request(request)


def _request(**changes: Any) -> PlanRequest:
    members = {"a": MemberRequest(["t"], owned={"t": [0]}, generation=1), "b": MemberRequest(["t"])}
    fields: dict[str, Any] = {"topics": {"t": 3}, "members": members} | changes
    return PlanRequest(**fields)


BAD_REQUESTS = [
    _request(topics={"t": -1}),
    _request(topics={"t": 2.5}),
    _request(topics={"t": 20_000_000}),
    _request(strategy="best"),
    _request(strategy=7),
    _request(members={"a": MemberRequest(["t"], weight=0.0)}),
    _request(members={"a": MemberRequest(["t"], weight=float("nan"))}),
    _request(members={"a": MemberRequest(["t"], weight="2")}),  # type: ignore[arg-type]
    _request(members={"a": MemberRequest(["t"], generation=1.5)}),  # type: ignore[arg-type]
    _request(members={"a": MemberRequest(["t"], owned={"t": [0, "1"]})}),
    _request(members={"a": MemberRequest(["t"], owned={"t": "0"})}),
    _request(lag={"t": [1.0, 2.0]}),
    _request(lag={"t": [1.0, -2.0, 3.0]}),
    _request(rate={"t": [1.0, 2.0, float("inf")]}),
    _request(options=PlanOptions(count_balance="loose")),
    _request(options=PlanOptions(max_moves=-1)),
    _request(options=PlanOptions(max_moves="150%")),
    _request(options=PlanOptions(min_improvement=1.0)),
    _request(options=PlanOptions(load_model="bytes")),
    _request(options=PlanOptions(target_drain_seconds=0.0)),
]


@pytest.mark.parametrize("request_", BAD_REQUESTS)
def test_a_bad_request_is_refused_as_its_document_is(request_: PlanRequest) -> None:
    """Typed input meets the plan contract's rules: the same field path and the same message
    as the `plan` command gives for the request's document."""
    with pytest.raises(PlanInputError) as typed:
        plan_request(request_)
    with pytest.raises(PlanInputError) as previewed:
        plan(request_.to_document())
    assert str(typed.value) == str(previewed.value)


def test_a_string_is_not_a_subscription() -> None:
    with pytest.raises(PlanInputError, match=r"^members\.a\.topics: must be a list of topic"):
        plan_request(_request(members={"a": MemberRequest("t")}))


def test_tuples_are_sequences_too() -> None:
    as_lists = _request(lag={"t": [1.0, None, 3.0]})
    as_tuples = PlanRequest(
        topics={"t": 3},
        members={
            "a": MemberRequest(("t",), owned={"t": (0,)}, generation=1),
            "b": MemberRequest(("t",)),
        },
        lag={"t": (1.0, None, 3.0)},
    )
    assert plan_request(as_tuples) == plan_request(as_lists)


# --------------------------------------------------------------------------- unknown values


def _loads(document: dict[str, Any], model: str = "lag") -> dict[str, list[float]]:
    group = parse_request(document).group
    _, loads = partition_loads(group, Options(load_model=model))  # type: ignore[arg-type]
    return loads


def test_an_unknown_lag_is_its_topics_mean_and_an_unknown_topic_the_mean_of_all() -> None:
    document = {
        "topics": {"a": 3, "b": 2, "c": 1},
        "members": {"m": {"topics": ["a", "b", "c"]}},
        "lag": {"a": [10, None, 40], "b": [None, None]},
    }
    loads = _loads(document)
    assert loads["a"] == [10.0, 25.0, 40.0]  # a's own mean, not the mean across topics
    assert loads["b"] == [25.0, 25.0] and loads["c"] == [25.0]  # nothing known: all topics' mean


def test_arrays_without_unknowns_are_taken_as_they_are() -> None:
    document = {
        "topics": {"a": 2, "b": 2},
        "members": {"m": {"topics": ["a", "b"]}},
        "lag": {"a": [1, 3]},
    }
    assert _loads(document) == {"a": [1.0, 3.0], "b": [2.0, 2.0]}


def test_an_unknown_value_must_be_null_not_anything_else() -> None:
    document = {"topics": {"a": 2}, "members": {"m": {"topics": ["a"]}}, "lag": {"a": [1, "x"]}}
    with pytest.raises(PlanInputError, match=r"^lag\.a\[1\]: must be a finite number >= 0 or null"):
        plan(document)


# --------------------------------------------------------------------------- the group builder


def test_group_request_subscribes_everyone_to_every_topic_and_keeps_unknowns_unknown() -> None:
    request = group_request(
        strategy="lag-aware",
        topics={"b": 2, "a": 3},
        members=["y", "x"],
        owned={"x": {"a": [0, 1]}},
        lag={("a", 0): 5.0, ("a", 2): 7.0},
        rate={("a", 0): -1.0, ("a", 1): 2.0},
        weights={"x": 2.0, "y": 1.0},
        generations={"x": 4},
        options=PlanOptions(max_moves="25%"),
    )
    assert list(request.topics) == ["a", "b"]
    assert list(request.members) == ["x", "y"]
    assert request.members["x"] == MemberRequest(["a", "b"], 2.0, {"a": [0, 1]}, 4)
    assert request.members["y"] == MemberRequest(["a", "b"], 1.0, {}, None)
    assert request.lag == {"a": [5.0, None, 7.0]}  # b: nothing observed, left out
    assert request.rate == {"a": [0.0, 2.0, None]}  # a rate below zero counts as 0
    document = request.to_document()
    assert document["options"] == {"max_moves": "25%"}
    assert document["lag"] == {"a": [5.0, None, 7.0]}
    assert "weight" not in document["members"]["y"] and "owned" not in document["members"]["y"]
