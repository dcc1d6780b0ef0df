"""The planning input model: validation that names the field, stale facts, KIP-341, load models."""

from __future__ import annotations

import importlib
import json
import math

import pytest
from kafka_rebalance_assignors import PlanInputError, parse_request, plan
from kafka_rebalance_assignors.load import (
    choose_load_model,
    lower_bound,
    max_load_ratio,
    partition_loads,
)
from kafka_rebalance_assignors.model import FlatAssignment, Group, Member, Options
from kafka_rebalance_assignors.ownership import resolve, resolve_ownership
from kafka_rebalance_assignors.parsing import parse_max_moves


def _doc(**overrides):
    document = {
        "topics": {"orders": 3, "payments": 2},
        "members": {
            "a": {"topics": ["orders", "payments"]},
            "b": {"topics": ["orders"], "weight": 2.0},
        },
    }
    document.update(overrides)
    return document


def _field_of(document, strategy=None) -> str:
    with pytest.raises(PlanInputError) as caught:
        plan(document, strategy)
    assert str(caught.value).startswith(caught.value.field_path + ": ")
    return caught.value.field_path


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("weight", "shown"),
    [(0, "0"), (-1.5, "-1.5"), (math.nan, "nan"), (math.inf, "inf"), ("2", "'2'"), (True, "True")],
)
def test_bad_weight_names_the_member_field(weight, shown):
    document = _doc()
    document["members"]["b"]["weight"] = weight
    with pytest.raises(PlanInputError) as caught:
        plan(document)
    assert caught.value.field_path == "members.b.weight"
    assert shown in caught.value.problem


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (_doc(topics={"orders": -1}), "topics.orders"),
        (_doc(topics={"orders": 2.5}), "topics.orders"),
        (_doc(topics={"orders": 20_000_000}), "topics"),
        (_doc(topics=[1]), "topics"),
        (_doc(members=[]), "members"),
        (_doc(lag={"orders": [1, 2]}), "lag.orders"),
        (_doc(rate={"payments": [1.0, 2.0, 3.0]}), "rate.payments"),
        (_doc(lag={"orders": [1, -2, 3]}), "lag.orders[1]"),
        (_doc(lag={"orders": [1, math.nan, 3]}), "lag.orders[1]"),
        (_doc(rate={"orders": [1, 2, math.inf]}), "rate.orders[2]"),
        (_doc(lag={"orders": [1, "2", 3]}), "lag.orders[1]"),
        (_doc(lag={"orders": 5}), "lag.orders"),
        (_doc(extra=1), "extra"),
        (_doc(strategy=7), "strategy"),
        (_doc(strategy="best"), "strategy"),
        (_doc(options={"max_moves": -1}), "options.max_moves"),
        (_doc(options={"max_moves": "150%"}), "options.max_moves"),
        (_doc(options={"min_improvement": 1.0}), "options.min_improvement"),
        (_doc(options={"count_balance": "loose"}), "options.count_balance"),
        (_doc(options={"load_model": "bytes"}), "options.load_model"),
        (_doc(options={"target_drain_seconds": 0}), "options.target_drain_seconds"),
        (_doc(options={"maxMoves": 3}), "options.maxMoves"),
    ],
)
def test_bad_input_names_the_field(document, field):
    assert _field_of(document) == field


def test_bad_member_fields():
    document = _doc()
    document["members"]["a"]["colour"] = "red"
    assert _field_of(document) == "members.a.colour"
    document = _doc()
    document["members"]["a"]["topics"] = "orders"
    assert _field_of(document) == "members.a.topics"
    document = _doc()
    document["members"]["a"]["owned"] = {"orders": [0, "1"]}
    assert _field_of(document) == "members.a.owned.orders"
    document = _doc()
    document["members"]["a"]["generation"] = 1.5
    assert _field_of(document) == "members.a.generation"


def test_non_object_input_and_missing_sections():
    assert _field_of([1, 2]) == "input"
    assert _field_of({"members": {}}) == "topics"
    assert _field_of({"topics": {}}) == "members"


def test_unknown_strategy_override_is_refused():
    assert _field_of(_doc(), strategy="fastest") == "strategy"


# --------------------------------------------------------------------------- stale facts


def test_stale_facts_are_dropped_and_counted():
    document = {
        "topics": {"orders": 2},
        "members": {
            # orders-5 no longer exists, "gone" was deleted (3 partitions claimed).
            "a": {"topics": ["orders", "gone"], "owned": {"orders": [0, 5], "gone": [0, 1, 2]}},
            "b": {"topics": ["orders", "also-gone"], "owned": {"orders": [1, 1]}},
        },
        # A load array for a deleted topic is a stale fact too, whatever its length.
        "lag": {"orders": [5, 6], "gone": [1]},
    }
    result = plan(document, "weighted-sticky")
    assert result["stats"]["stale_ownership_dropped"] == 4
    assert result["stats"]["unknown_subscriptions_ignored"] == 2
    assert result["assignment"] == {"a": {"orders": [0]}, "b": {"orders": [1]}}
    assert result["moves"] == []


def test_owned_lists_are_sorted_deduplicated_and_trimmed_to_existing_partitions():
    # Each shape the parser meets: one partition, several unsorted with a repeat, one out of
    # range on either side, a boolean (refused) and a repeated subscription (counted once).
    document = {
        "topics": {"orders": 4, "payments": 2},
        "members": {
            "a": {
                "topics": ["orders", "payments", "orders", "gone", "gone"],
                "owned": {"orders": [3, 1, 3], "payments": [1]},
            },
            "b": {"topics": ["orders"], "owned": {"orders": [2, -1, 0, 4], "payments": [7]}},
        },
    }
    group = parse_request(document).group
    assert group.members["a"].topics == ("orders", "payments")
    assert dict(group.members["a"].claimed) == {"orders": (1, 3), "payments": (1,)}
    assert dict(group.members["b"].claimed) == {"orders": (0, 2)}
    assert group.stale_ownership_dropped == 3
    assert group.unknown_subscriptions_ignored == 1
    document["members"]["b"]["owned"] = {"orders": [0, True]}
    assert _field_of(document) == "members.b.owned.orders"
    # All claims clean (the path taken at scale): still sorted and deduplicated, nothing stale.
    document["members"]["b"]["owned"] = {"payments": [1, 0, 1], "orders": [2, 0]}
    group = parse_request(document).group
    assert dict(group.members["b"].claimed) == {"orders": (0, 2), "payments": (0, 1)}
    assert list(group.members["b"].claimed) == ["orders", "payments"]
    assert group.stale_ownership_dropped == 0
    assert group.subscribers() == {"orders": ["a", "b"], "payments": ["a"]}


def test_members_without_subscriptions_appear_empty():
    document = {"topics": {"t": 2}, "members": {"idle": {"topics": []}, "x": {"topics": ["t"]}}}
    for strategy in ("kip169", "weighted-sticky", "lag-aware"):
        result = plan(document, strategy)
        assert result["assignment"] == {"idle": {}, "x": {"t": [0, 1]}}


# --------------------------------------------------------------------------- KIP-341 ownership


def test_highest_generation_wins_and_ties_are_dropped():
    document = {
        "topics": {"t": 3},
        "members": {
            "old": {"topics": ["t"], "owned": {"t": [0, 1]}, "generation": 4},
            "new": {"topics": ["t"], "owned": {"t": [0, 2]}, "generation": 5},
            "twin": {"topics": ["t"], "owned": {"t": [2]}, "generation": 5},
        },
    }
    request = parse_request(document)
    resolved, conflicts = resolve_ownership(request.group)
    assert resolved == {"new": {"t": (0,)}, "old": {"t": (1,)}, "twin": {}}
    assert conflicts == 2


def test_missing_generation_loses_to_any_generation():
    document = {
        "topics": {"t": 1},
        "members": {
            "a": {"topics": ["t"], "owned": {"t": [0]}},
            "b": {"topics": ["t"], "owned": {"t": [0]}, "generation": 0},
        },
    }
    resolved, _ = resolve_ownership(parse_request(document).group)
    assert resolved["b"] == {"t": (0,)}
    assert resolved["a"] == {}


def test_disjoint_claims_keep_their_owner_in_the_flat_array_too():
    # Claims given out of order by a caller that builds the Group itself: sorted on resolution,
    # and the flat array (global numbers: orders 0-2, payments 3-4) says the same. Claims in
    # parsing's normal form (`b`) are kept as they are, not copied.
    group = Group(
        topics={"orders": 3, "payments": 2},
        members={
            "a": Member("a", ("orders", "payments"), claimed={"orders": (2, 0), "payments": (1,)}),
            "b": Member("b", ("orders",), claimed={"orders": (1,)}),
            "c": Member("c", ("orders",)),
        },
    )
    resolved, conflicts = resolve_ownership(group)
    assert resolved == {"a": {"orders": (0, 2), "payments": (1,)}, "b": {"orders": (1,)}, "c": {}}
    assert resolved["b"] is group.members["b"].claimed
    assert conflicts == 0
    assert resolve(group).owners == [0, 1, 0, -1, 0]


def test_a_claim_twice_over_is_resolved_topic_by_topic():
    group = Group(
        topics={"t": 2},
        members={
            "a": Member("a", ("t",), claimed={"t": (0, 1)}, generation=1),
            "b": Member("b", ("t",), claimed={"t": (1,)}, generation=2),
        },
    )
    assert resolve_ownership(group) == ({"a": {"t": (0,)}, "b": {"t": (1,)}}, 1)
    assert resolve(group).owners == [0, 1]


def _flat_result(group: Group, owners: list[int], lists: dict) -> FlatAssignment:
    result = FlatAssignment(group, owners)
    result.update(lists)
    return result


@pytest.mark.parametrize(
    ("owners", "lists", "message"),
    [
        ([0, -1, 1], {"a": {"orders": [0]}, "b": {"orders": [2]}}, "orders-1 left unassigned"),
        ([0, 2, 1], {"a": {"orders": [0]}, "b": {"orders": [2]}, "c": {"orders": [1]}}, "c got"),
    ],
)
def test_a_flat_result_failing_its_array_check_is_checked_list_by_list(
    monkeypatch, owners, lists, message
):
    # The array check only decides whether to trust the result; the list-by-list check then
    # names the problem as for any strategy.
    planner = importlib.import_module("kafka_rebalance_assignors.planner")
    document = {
        "topics": {"orders": 3},
        "members": {"a": {"topics": ["orders"]}, "b": {"topics": ["orders"]}, "c": {"topics": []}},
    }
    flat = lambda context: _flat_result(context.group, owners, lists)  # noqa: E731
    monkeypatch.setattr(planner, "strategy_function", lambda name: flat)
    with pytest.raises(planner.PlanInvariantError, match=message):
        plan(document)


def test_a_flat_result_is_measured_like_a_plain_one(monkeypatch):
    planner = importlib.import_module("kafka_rebalance_assignors.planner")
    document = _doc(lag={"orders": [5, 1, 7], "payments": [2, 3]})
    document["members"]["a"]["owned"] = {"orders": [0, 1], "payments": [0, 1]}
    document["members"]["b"]["owned"] = {"orders": [2]}
    lists = {"a": {"orders": [0], "payments": [0, 1]}, "b": {"orders": [1, 2]}}
    flat = lambda context: _flat_result(context.group, [0, 1, 1, 0, 0], lists)  # noqa: E731
    monkeypatch.setattr(planner, "strategy_function", lambda name: flat)
    with monkeypatch.context() as patched:  # the array's own path, not the list-by-list one
        patched.setattr(planner, "_check_and_measure", None)
        from_array = plan(document)
    monkeypatch.setattr(planner, "strategy_function", lambda name: lambda context: lists)
    from_lists = plan(document)
    assert json.dumps(from_array) == json.dumps(from_lists)
    assert from_array["moves"] == [{"topic": "orders", "partition": 1, "from": "a", "to": "b"}]
    assert from_array["members"]["b"]["load"] == 8.0
    assert from_array["stats"]["max_load_before"] == 11.0  # a owned 5 + 1 + 2 + 3


# --------------------------------------------------------------------------- options


def test_max_moves_forms():
    assert parse_max_moves(None, 40) is None
    assert parse_max_moves(7, 40) == 7
    assert parse_max_moves("25%", 40) == 10
    assert parse_max_moves(" 10 % ", 41) == 5  # rounds up: a budget of 4.1 allows 5 moves
    assert parse_max_moves("0%", 41) == 0
    for bad in (-1, 1.5, "ten", "101%", True):
        with pytest.raises(PlanInputError):
            parse_max_moves(bad, 40)


def test_defaults():
    options = parse_request(_doc()).options
    assert options == Options()
    assert options.count_balance == "relaxed"
    assert options.max_moves is None
    assert options.min_improvement == 0.0
    assert options.target_drain_seconds == 300.0


# --------------------------------------------------------------------------- load models


def test_load_model_choice():
    group = parse_request(_doc()).group
    assert choose_load_model(group, Options()) == "count"
    group = parse_request(_doc(lag={"orders": [1, 2, 3]})).group
    assert choose_load_model(group, Options()) == "lag"
    group = parse_request(_doc(lag={"orders": [1, 2, 3]}, rate={"orders": [1, 1, 1]})).group
    assert choose_load_model(group, Options()) == "drain"
    assert choose_load_model(group, Options(load_model="rate")) == "rate"


def test_drain_load_and_unknown_partitions_take_the_mean():
    document = _doc(lag={"orders": [600, 0, 300]}, rate={"orders": [1.0, 2.0, 3.0]})
    request = parse_request(document)
    model, loads = partition_loads(request.group, Options(target_drain_seconds=300))
    assert model == "drain"
    assert loads["orders"] == [3.0, 2.0, 4.0]
    # payments: unknown rate -> mean rate 2.0; unknown lag -> mean lag 300 -> 1.0 per second
    assert loads["payments"] == [3.0, 3.0]


def test_lower_bound_takes_the_biggest_partition_into_account():
    document = {
        "topics": {"t": 3},
        "members": {"a": {"topics": ["t"], "weight": 1}, "b": {"topics": ["t"], "weight": 3}},
        "lag": {"t": [90, 5, 5]},
    }
    group = parse_request(document).group
    _, loads = partition_loads(group, Options())
    # total 100 over weight 4 = 25, but partition 0 alone on the weight-3 member is 30
    assert lower_bound(group, loads) == 30
    assert max_load_ratio(group, {"a": {"t": [1, 2]}, "b": {"t": [0]}}, loads) == 1.0
    assert max_load_ratio(group, {"a": {"t": [0]}, "b": {"t": [1, 2]}}, loads) == 3.0


# --------------------------------------------------------------------------- strategy output checks


@pytest.mark.parametrize(
    ("bad_assignment", "message"),
    [
        ({"a": {"orders": [0, 1, 2]}, "b": {"orders": [2]}}, "assigned twice"),
        ({"a": {"orders": [0, 1, 1, 2]}}, "assigned twice"),
        ({"a": {"orders": [0, 1]}}, "left unassigned"),
        ({"a": {"orders": [0, 1, 2, 3]}}, "does not exist"),
        ({"a": {"orders": [0, 1, 2]}, "zed": {}}, "unknown member"),
        ({"b": {"orders": [0, 1, 2], "payments": [0, 1]}, "a": {}}, "does not subscribe"),
    ],
)
def test_an_invalid_strategy_result_is_a_loud_bug(monkeypatch, bad_assignment, message):
    # The planner module, reached through importlib as the tests around it do.
    planner = importlib.import_module("kafka_rebalance_assignors.planner")

    monkeypatch.setattr(planner, "strategy_function", lambda name: lambda _: bad_assignment)
    document = _doc(topics={"orders": 3, "payments": 2})
    document["members"]["a"]["topics"] = ["orders"]
    document["members"]["b"]["topics"] = ["orders"]
    if message == "does not subscribe":
        document["members"]["a"]["topics"] = ["orders", "payments"]
    with pytest.raises(planner.PlanInvariantError, match=message):
        plan(document)
