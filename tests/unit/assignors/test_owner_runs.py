"""A fresh deal's owners as runs (`model.OwnerRun`): the plan checks them run by run
(`planner._runs_unassigned`) and measures the result as it measures an owner array; runs that
are not well formed send the result to the list-by-list check, which names the problem. And
`validation._below`, the byte-plane bound check of claim columns, agrees with a plain
comparison."""

from __future__ import annotations

import importlib
import json
import random
from array import array

import pytest
from kafka_rebalance_assignors import plan
from kafka_rebalance_assignors.model import FlatAssignment, OwnerRun, owner_array
from kafka_rebalance_assignors.validation import _below

planner = importlib.import_module("kafka_rebalance_assignors.planner")

# two topics of 3 partitions (global numbers 0-2 and 3-5), members a, b, c all subscribing
DOCUMENT = {
    "topics": {"orders": 3, "payments": 3},
    "members": {m: {"topics": ["orders", "payments"]} for m in ("a", "b", "c")},
    "lag": {"orders": [5, 1, 7], "payments": [2, 3, 4]},
}
LISTS = {
    "a": {"orders": [0], "payments": [2]},
    "b": {"orders": [1], "payments": [0]},
    "c": {"orders": [2], "payments": [1]},
}
# members [0, 1, 2] over orders from shift 0, over payments from shift 1: b, c, a
GOOD = [OwnerRun(0, 3, [0, 1, 2], 0), OwnerRun(3, 3, [0, 1, 2], 1)]


def _runs_result(runs: list[OwnerRun]):
    def assign(context):
        result = FlatAssignment(context.group, None, runs=runs)
        result.update(LISTS)
        return result

    return assign


def test_owner_array_of_runs() -> None:
    assert owner_array(GOOD, 6) == [0, 1, 2, 1, 2, 0]
    assert owner_array([OwnerRun(1, 5, [4, 7], 1)], 7) == [-1, 7, 4, 7, 4, 7, -1]


def test_a_result_of_runs_is_measured_like_a_plain_one(monkeypatch) -> None:
    monkeypatch.setattr(planner, "strategy_function", lambda name: _runs_result(GOOD))
    with monkeypatch.context() as patched:  # the runs' own path, not the list-by-list one
        patched.setattr(planner, "_check_and_measure", None)
        from_runs = plan(DOCUMENT)
    monkeypatch.setattr(planner, "strategy_function", lambda name: lambda context: LISTS)
    assert json.dumps(from_runs) == json.dumps(plan(DOCUMENT))
    assert from_runs["members"]["a"]["load"] == 9.0  # orders-0 5 + payments-2 4


@pytest.mark.parametrize(
    ("runs", "why"),
    [
        ([OwnerRun(0, 3, [0, 1, 2], 0)], "payments left without an owner"),
        ([OwnerRun(0, 4, [0, 1, 2], 0), OwnerRun(4, 2, [0, 1], 0)], "a run across two topics"),
        ([OwnerRun(0, 3, [0, 1, 2], 0), OwnerRun(2, 4, [0, 1, 2], 1)], "overlapping runs"),
        ([OwnerRun(0, 3, [0, 1, 3], 0), OwnerRun(3, 3, [0, 1, 2], 1)], "no member 3"),
        ([OwnerRun(0, 3, [0, -1, 2], 0), OwnerRun(3, 3, [0, 1, 2], 1)], "an owner -1"),
        ([OwnerRun(0, 3, [0, 1, 2], 3), OwnerRun(3, 3, [0, 1, 2], 1)], "a shift past the list"),
    ],
)
def test_runs_not_well_formed_are_not_trusted(monkeypatch, runs, why) -> None:
    """The runs decide only whether the result is trusted: here the lists are fine, so the
    list-by-list check passes them (and the plan is the lists' plan)."""
    checked = []
    slow = planner._check_and_measure

    def check(*args, **kwargs):
        checked.append(why)
        return slow(*args, **kwargs)

    monkeypatch.setattr(planner, "_check_and_measure", check)
    monkeypatch.setattr(planner, "strategy_function", lambda name: _runs_result(runs))
    from_runs = plan(DOCUMENT)
    assert checked == [why]
    monkeypatch.setattr(planner, "strategy_function", lambda name: lambda context: LISTS)
    assert from_runs == plan(DOCUMENT)


def test_a_topic_nobody_subscribes_to_in_a_run_is_not_trusted(monkeypatch) -> None:
    """payments has no subscriber: runs handing it out go to the list-by-list check."""
    document = {
        "topics": {"orders": 3, "payments": 3},
        "members": {m: {"topics": ["orders"]} for m in ("a", "b", "c")},
    }

    def refuse(context, raw, unit=False):
        raise planner.PlanInvariantError("sent to the list-by-list check")

    monkeypatch.setattr(planner, "_check_and_measure", refuse)
    monkeypatch.setattr(planner, "strategy_function", lambda name: _runs_result(GOOD))
    with pytest.raises(planner.PlanInvariantError, match="list-by-list"):
        plan(document)


def test_the_fresh_deal_gives_runs_and_the_same_plan_as_lists() -> None:
    """The constrained sticky path's fresh deal (identical subscriptions, as many partitions
    per topic as members) returns runs, and its plan equals the one of its lists."""
    document = {
        "topics": {f"t{i}": 4 for i in range(5)},
        "members": {f"m{i}": {"topics": [f"t{t}" for t in range(5)]} for i in range(4)},
    }
    context_result = {}
    real = planner.strategy_function

    def spy(name):
        assign = real(name)

        def wrapped(context):
            result = assign(context)
            context_result["runs"] = getattr(result, "runs", None)
            return result

        return wrapped

    original = plan(document | {"strategy": "cooperative-sticky"})
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(planner, "strategy_function", spy)
        again = plan(document | {"strategy": "cooperative-sticky"})
    assert context_result["runs"]  # the deal's runs, not an array
    assert again == original
    owners = owner_array(context_result["runs"], 20)
    members = list(document["members"])
    for member, topics in original["assignment"].items():
        for topic, partitions in topics.items():
            for partition in partitions:
                assert owners[int(topic[1:]) * 4 + partition] == members.index(member)


@pytest.mark.parametrize("seed", range(40))
def test_below_agrees_with_a_comparison(seed: int) -> None:
    rng = random.Random(seed)
    bound = rng.choice([1, 2, 255, 256, 257, 2000, 2048, 4097, 65535, 65536, 65537, 100_000])
    values = [rng.randrange(0, bound) for _ in range(rng.randint(0, 300))]
    if values and rng.random() < 0.5:  # one value at or above the bound, somewhere
        values[rng.randrange(len(values))] = bound + rng.choice([0, 0, 1, 255, 256, 70_000])
    expected = all(value < bound for value in values)
    answer = _below(array("i", values).tobytes(), bound)
    if bound > 2**16:
        assert answer is False  # cannot tell: the caller checks lane by lane
    else:
        assert answer is expected
