"""Standby placement in a streams task plan (`streams_standbys.plan_standbys`, and through
`streams_tasks.plan_tasks`): never on the active's process, never two replicas of a task on one
process, sticky to state holders, balanced by count over capacity weight."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors.streams_standbys import plan_standbys
from kafka_rebalance_assignors.streams_tasks import TaskPlanInput, plan_tasks

SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

Sets = dict[str, dict[str, list[int]]]


def _tasks(assignment: Sets, member: str) -> set[tuple[str, int]]:
    return {(s, p) for s, parts in assignment.get(member, {}).items() for p in parts}


@st.composite
def groups(draw: Any) -> dict[str, Any]:
    members = [f"m{i}" for i in range(draw(st.integers(1, 6)))]
    processes = {m: f"p{draw(st.integers(0, len(members) - 1))}" for m in members}
    counts = {"0": draw(st.integers(0, 6)), "1": draw(st.integers(0, 6))}
    stateful = {("1", p) for p in range(counts["1"])}
    if draw(st.booleans()):
        stateful |= {("0", p) for p in range(counts["0"])}
    active: Sets = {m: {} for m in members}
    for s, n in counts.items():
        for p in range(n):
            active[draw(st.sampled_from(members))].setdefault(s, []).append(p)
    current: Sets = {m: {} for m in members}
    for task in sorted(stateful):
        for m in draw(st.lists(st.sampled_from(members), max_size=3, unique=True)):
            current[m].setdefault(task[0], []).append(task[1])
    previous: Sets = {m: {} for m in members}
    for s, n in counts.items():
        for p in range(n):
            previous[draw(st.sampled_from(members))].setdefault(s, []).append(p)
    return {
        "active": active,
        "current_standby": current,
        "stateful": stateful,
        "replicas": draw(st.integers(0, 3)),
        "members": members,
        "previous_active": previous,
        "processes": processes,
        "weights": {m: draw(st.sampled_from([0.5, 1.0, 2.0])) for m in members},
    }


def _plan(g: dict[str, Any]) -> Any:
    return plan_standbys(
        g["active"],
        g["current_standby"],
        g["stateful"],
        g["replicas"],
        g["members"],
        previous_active=g["previous_active"],
        processes=g["processes"],
        weights=g["weights"],
    )


@SETTINGS
@given(groups())
def test_no_standby_on_its_actives_process_nor_two_replicas_on_one_process(g: dict[str, Any]):
    plan = _plan(g)
    proc = g["processes"]
    active_proc = {t: proc[m] for m in g["members"] for t in _tasks(g["active"], m)}
    holders: dict[tuple[str, int], list[str]] = {}
    for m in g["members"]:
        for task in _tasks(plan.standby, m):
            assert proc[m] != active_proc[task], f"{task} standby on its active's process"
            holders.setdefault(task, []).append(proc[m])
    for task, procs in holders.items():
        assert len(procs) == len(set(procs)), f"{task}: two replicas on one process"
        assert task in g["stateful"]
    assert set(plan.standby) == set(g["members"])


@SETTINGS
@given(groups())
def test_every_stateful_task_gets_its_replicas_or_the_shortfall_is_counted(g: dict[str, Any]):
    plan = _plan(g)
    processes = len(set(g["processes"].values()))
    placed = {t: 0 for t in g["stateful"]}
    for m in g["members"]:
        for task in _tasks(plan.standby, m):
            placed[task] += 1
    for n in placed.values():
        assert n == min(g["replicas"], processes - 1)
    assert plan.short == sum(g["replicas"] - n for n in placed.values())


@SETTINGS
@given(groups())
def test_a_plan_is_a_fixed_point_of_itself(g: dict[str, Any]):
    """Sticky: planned again from its own standbys, the placement does not change."""
    first = _plan(g)
    again = _plan({**g, "current_standby": first.standby})
    assert again.standby == first.standby


def test_standbys_stay_with_their_holders_when_that_is_balanced():
    active: Sets = {"a": {"1": [0, 1]}, "b": {"1": [2, 3]}, "c": {}}
    current: Sets = {"a": {"1": [2]}, "b": {"1": [0]}, "c": {"1": [1, 3]}}
    plan = plan_standbys(active, current, [("1", p) for p in range(4)], 1, ["a", "b", "c"])
    assert plan.standby == current
    assert plan.kept == 4 and plan.short == 0


def test_a_moved_tasks_standby_goes_to_its_previous_active_owner():
    # 1_0 moved a -> c (c held its standby): a has the state now, so a is its standby
    before: Sets = {"a": {"1": [0]}, "b": {}, "c": {}}
    after: Sets = {"a": {}, "b": {}, "c": {"1": [0]}}
    current: Sets = {"a": {}, "b": {}, "c": {"1": [0]}}
    plan = plan_standbys(after, current, [("1", 0)], 1, ["a", "b", "c"], previous_active=before)
    assert plan.standby == {"a": {"1": [0]}, "b": {}, "c": {}}


def test_new_standbys_are_balanced_by_count_over_weight():
    active: Sets = {"a": {"1": [0, 1, 2]}, "b": {"1": [3, 4, 5]}, "c": {}, "d": {}}
    weights = {"a": 1.0, "b": 1.0, "c": 2.0, "d": 1.0}
    tasks = [("1", p) for p in range(6)]
    plan = plan_standbys(active, {}, tasks, 1, list(weights), weights=weights)
    counts = {m: len(_tasks(plan.standby, m)) for m in weights}
    assert counts == {"a": 1, "b": 1, "c": 3, "d": 1}


def test_members_of_one_process_never_share_a_task():
    active: Sets = {"a1": {"1": [0]}, "a2": {}, "b": {}}
    processes = {"a1": "pa", "a2": "pa", "b": "pb"}
    plan = plan_standbys(active, {}, [("1", 0)], 2, ["a1", "a2", "b"], processes=processes)
    assert plan.standby == {"a1": {}, "a2": {}, "b": {"1": [0]}}
    assert plan.short == 1


def test_stateless_tasks_and_zero_replicas_get_no_standby():
    active: Sets = {"a": {"0": [0], "1": [0]}, "b": {}}
    assert plan_standbys(active, {}, [("1", 0)], 0, ["a", "b"]).standby == {"a": {}, "b": {}}
    assert plan_standbys(active, {}, [("1", 0)], 1, ["a", "b"]).standby == {
        "a": {},
        "b": {"1": [0]},
    }
    with pytest.raises(ValueError, match="standby replicas: must be >= 0, got -1"):
        plan_standbys(active, {}, [], -1, ["a"])


def test_a_task_plan_carries_its_standbys_off_the_planned_actives():
    counts = {"0": 4}
    plan = plan_tasks(
        TaskPlanInput(
            counts=counts,
            members=["a", "b", "c"],
            active={"a": {"0": [0, 1, 2, 3]}, "b": {}, "c": {}},
            standby={"b": {"0": [0, 1]}, "c": {"0": [2, 3]}},
            lag={("0", p): 100.0 for p in range(4)},
            rate={("0", p): 1.0 for p in range(4)},
            changelog={("0", p): 1000 for p in range(4)},
            standby_replicas=1,
        )
    )
    owner = {t: m for m in plan.assignment for t in _tasks(plan.assignment, m)}
    holders = {t: m for m in plan.standby for t in _tasks(plan.standby, m)}
    assert sorted(holders) == [("0", p) for p in range(4)]
    assert all(holders[t] != owner[t] for t in owner)
    # moved tasks went to their standby holders (the state is there)
    assert all(m.to_standby for m in plan.moves)
    assert plan.standbys_short == 0


def test_two_moved_tasks_swap_destinations_so_both_land_on_their_standbys():
    # a leaves (weight ~0): 1_0 (standby on b) and 1_1 (standby on c) move; whichever way the
    # strategy splits them, each lands on the member holding its state
    plan = plan_tasks(
        TaskPlanInput(
            counts={"1": 6},
            members=["a", "b", "c"],
            active={"a": {"1": [0, 1]}, "b": {"1": [2, 3]}, "c": {"1": [4, 5]}},
            standby={"b": {"1": [0]}, "c": {"1": [1]}},
            lag={("1", p): 100.0 + p for p in range(6)},
            rate={("1", p): 1.0 for p in range(6)},
            changelog={("1", p): 1000 for p in range(6)},
            weights={"a": 0.001, "b": 1.0, "c": 1.0},
        )
    )
    owner = {t: m for m in plan.assignment for t in _tasks(plan.assignment, m)}
    assert owner[("1", 0)] == "b" and owner[("1", 1)] == "c", plan.assignment
    assert all(m.to_standby for m in plan.moves if m.task in {("1", 0), ("1", 1)})


@pytest.mark.parametrize(("holder_lag", "lands_on_standby"), [(1_030.0, True), (1_200.0, False)])
def test_a_moved_task_goes_to_its_standby_unless_that_raises_the_peak_beyond_the_slack(
    holder_lag: float, lands_on_standby: bool
):
    # a leaves; its task 1_0 (lag 500) goes to b or c. c holds its standby but is a little
    # (3%) or much (20%) more loaded than b: within STANDBY_SLACK the state wins.
    plan = plan_tasks(
        TaskPlanInput(
            counts={"1": 3},
            members=["a", "b", "c"],
            active={"a": {"1": [0]}, "b": {"1": [1]}, "c": {"1": [2]}},
            standby={"c": {"1": [0]}},
            lag={("1", 0): 500.0, ("1", 1): 1_000.0, ("1", 2): holder_lag},
            rate={},
            changelog={("1", p): 1000 for p in range(3)},
            weights={"a": 0.001, "b": 1.0, "c": 1.0},
        )
    )
    owner = {t: m for m in plan.assignment for t in _tasks(plan.assignment, m)}
    assert (owner[("1", 0)] == "c") is lands_on_standby, plan.assignment
