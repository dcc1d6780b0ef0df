"""The share planner (KIP-932 groups): each partition gets members in proportion to its load,
every subscribed partition at least one, sticky, within the move budget; and the plan command's
share documents. Pure functions: no broker."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors import PlanInputError
from kafka_rebalance_assignors.share import (
    PartitionLoad,
    ShareMemberInput,
    SharePlan,
    ShareRequest,
    parse_share_request,
    plan_share,
)

COMMAND = Path(sys.executable).with_name("kafka-rebalance")
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "plans" / "share-hot-partition.json"
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def request(
    rates: list[float],
    members: dict[str, list[int]],
    *,
    backlog: list[float] | None = None,
    weights: dict[str, float] | None = None,
    drain: float = 60.0,
    max_moves: int | None = None,
    topic: str = "jobs",
) -> ShareRequest:
    backlog = backlog or [0.0] * len(rates)
    return ShareRequest(
        partitions={(topic, p): PartitionLoad(rates[p], backlog[p]) for p in range(len(rates))},
        members={
            m: ShareMemberInput(m, frozenset({topic}), (weights or {}).get(m, 1.0)) for m in members
        },
        current={m: frozenset((topic, p) for p in parts) for m, parts in members.items()},
        drain_seconds=drain,
        max_moves=max_moves,
    )


def holders(plan: SharePlan, topic: str, partition: int) -> list[str]:
    return sorted(m for m, topics in plan.assignment.items() if partition in topics.get(topic, ()))


def test_a_hot_partition_gets_several_members_and_the_peak_drops() -> None:
    plan = plan_share(
        request([100, 10, 10, 10], {"a": [0], "b": [1], "c": [2, 3]}, backlog=[30000, 0, 0, 0])
    )
    assert len(holders(plan, "jobs", 0)) >= 2
    assert all(holders(plan, "jobs", p) for p in range(4))
    assert plan.peak_before == pytest.approx(600.0)  # (100 + 30000 / 60) records/s on one member
    assert plan.peak_after is not None and plan.peak_after < plan.peak_before / 1.5


def test_even_load_keeps_one_member_per_partition_and_moves_nothing() -> None:
    plan = plan_share(request([10, 10, 10], {"a": [0], "b": [1], "c": [2]}))
    assert plan.assignment == {"a": {"jobs": (0,)}, "b": {"jobs": (1,)}, "c": {"jobs": (2,)}}
    assert plan.moves == 0 and plan.improvement() == 0.0


def test_more_members_than_partitions_all_help_and_the_hot_one_gets_most() -> None:
    plan = plan_share(request([90, 10], {m: [] for m in "abcdefghij"}))
    counts = plan.members_per_partition
    assert counts[("jobs", 0)] > counts[("jobs", 1)] >= 1
    assert all(topics for topics in plan.assignment.values())  # nobody idles


def test_capacity_weights_count() -> None:
    # two partitions of equal load: the strong member alone matches two weak ones
    plan = plan_share(request([10, 10], {"big": [], "w1": [], "w2": []}, weights={"big": 2.0}))
    assert plan.peak_after == pytest.approx(5.0)


def test_a_zero_budget_only_covers_unread_partitions() -> None:
    plan = plan_share(request([100, 1, 1, 1], {"a": [0], "b": [1], "c": []}, max_moves=0))
    assert plan.budgeted_moves == 0 and plan.budget_exhausted
    assert holders(plan, "jobs", 2) and holders(plan, "jobs", 3)  # forced, free
    assert holders(plan, "jobs", 0) == ["a"]


def test_stale_ownership_is_dropped_and_unsubscribed_topics_are_not_planned() -> None:
    req = ShareRequest(
        partitions={("jobs", 0): PartitionLoad(1), ("other", 0): PartitionLoad(50)},
        members={"a": ShareMemberInput("a", frozenset({"jobs"}))},
        current={"a": frozenset({("jobs", 0), ("jobs", 7), ("other", 0)})},
    )
    plan = plan_share(req)
    assert plan.assignment == {"a": {"jobs": (0,)}}
    assert ("other", 0) not in plan.members_per_partition
    assert plan.moves == 2 and plan.budgeted_moves == 0


def test_no_current_assignment_has_no_before_figure() -> None:
    plan = plan_share(request([5, 5], {"a": [], "b": []}))
    assert plan.peak_before is None and plan.improvement() == 1.0


@st.composite
def share_requests(draw: st.DrawFn) -> ShareRequest:
    topics = {f"t{i}": draw(st.integers(0, 5)) for i in range(draw(st.integers(1, 3)))}
    partitions = {
        (topic, p): PartitionLoad(
            draw(st.floats(0, 1000, allow_nan=False)), draw(st.floats(0, 1e6, allow_nan=False))
        )
        for topic, count in topics.items()
        for p in range(count)
    }
    members: dict[str, ShareMemberInput] = {}
    current: dict[str, frozenset[tuple[str, int]]] = {}
    for i in range(draw(st.integers(1, 8))):
        name = f"m{i}"
        subscribed = frozenset(
            draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True))
        )
        members[name] = ShareMemberInput(
            name, subscribed, draw(st.sampled_from([0.5, 1.0, 1.0, 3.0]))
        )
        owned = draw(
            st.lists(st.sampled_from(sorted(partitions) or [("t0", 0)]), max_size=4, unique=True)
        )
        current[name] = frozenset(owned)
    budget = draw(st.one_of(st.none(), st.integers(0, 6)))
    return ShareRequest(
        partitions, members, current, draw(st.sampled_from([1.0, 60.0, 600.0])), budget
    )


@EXAMPLES
@given(share_requests())
def test_every_subscribed_partition_has_a_subscribed_member(req: ShareRequest) -> None:
    plan = plan_share(req)
    subscribed = {t for m in req.members.values() for t in m.topics}
    for topic, partition in req.partitions:
        owners = holders(plan, topic, partition)
        assert bool(owners) == (topic in subscribed)
        assert all(topic in req.members[m].topics for m in owners)
    assert set(plan.assignment) == set(req.members)


@EXAMPLES
@given(share_requests())
def test_moves_stay_within_the_budget_and_never_raise_the_peak(req: ShareRequest) -> None:
    plan = plan_share(req)
    if req.max_moves is not None:
        assert plan.budgeted_moves <= req.max_moves
    if plan.peak_before is not None and plan.peak_after is not None:
        assert plan.peak_after <= plan.peak_before * (1 + 1e-9) + 1e-9
    assert plan.peak_after is None or math.isfinite(plan.peak_after)


@EXAMPLES
@given(share_requests())
def test_a_plan_is_deterministic_and_a_fixed_point(req: ShareRequest) -> None:
    first = plan_share(req)
    assert plan_share(req) == first
    unbudgeted = ShareRequest(req.partitions, req.members, req.current, req.drain_seconds, None)
    settled = plan_share(unbudgeted)
    again = ShareRequest(
        req.partitions,
        req.members,
        {
            m: frozenset((t, p) for t, parts in topics.items() for p in parts)
            for m, topics in settled.assignment.items()
        },
        req.drain_seconds,
        None,
    )
    second = plan_share(again)
    assert (
        second.assignment == settled.assignment and second.moves == 0
    )  # sticky when nothing to gain


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"groupType": "share", "topics": {"jobs": -1}, "members": {}}, "topics.jobs"),
        (
            {"groupType": "share", "topics": {"jobs": 1}, "members": {"a": {"topics": "jobs"}}},
            "members.a.topics",
        ),
        (
            {
                "groupType": "share",
                "topics": {"jobs": 1},
                "members": {"a": {"topics": [], "weight": 0}},
            },
            "members.a.weight",
        ),
        (
            {"groupType": "share", "topics": {"jobs": 1}, "members": {}, "backlog": {"jobs": [-3]}},
            "backlog.jobs[0]",
        ),
        (
            {"groupType": "share", "topics": {"jobs": 1}, "members": {}, "rate": {"x": [1]}},
            "rate.x",
        ),
        (
            {"groupType": "share", "topics": {}, "members": {}, "options": {"drain_seconds": 0}},
            "options.drain_seconds",
        ),
        (
            {"groupType": "share", "topics": {}, "members": {}, "options": {"max_moves": -1}},
            "options.max_moves",
        ),
    ],
)
def test_bad_documents_name_the_field(document: dict[str, object], field: str) -> None:
    with pytest.raises(PlanInputError) as caught:
        parse_share_request(document)
    assert caught.value.field_path == field


def test_the_plan_command_previews_the_example() -> None:
    done = subprocess.run(
        [str(COMMAND), "plan", "-i", str(EXAMPLE)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["groupType"] == "share"
    assert result["members_per_partition"]["jobs"][0] >= 2
    assert result["stats"]["budgeted_moves"] <= 4


@pytest.mark.parametrize(
    ("stdin", "args", "needle"),
    [
        (
            '{"groupType":"share","topics":{"jobs":2},"members":{},"rate":{"jobs":[1]}}',
            (),
            "rate.jobs",
        ),
        (
            '{"groupType":"share","topics":{"jobs":1},"members":{}}',
            ("--strategy", "range"),
            "--strategy",
        ),
        (
            '{"groupType":"share","topics":{"jobs":1},"members":{}}',
            ("--format", "table"),
            "--format",
        ),
    ],
)
def test_the_plan_command_refuses_bad_share_input_in_one_line(
    stdin: str, args: tuple[str, ...], needle: str
) -> None:
    done = subprocess.run(
        [str(COMMAND), "plan", *args], input=stdin, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and needle in done.stderr


def test_a_topic_whose_hot_partition_cannot_gain_does_not_stop_another_topics_plan() -> None:
    # "solo" has one subscriber and the group's highest pressure; "jobs" still gains
    req = ShareRequest(
        partitions={
            ("solo", 0): PartitionLoad(1000),
            ("jobs", 0): PartitionLoad(100),
            ("jobs", 1): PartitionLoad(1),
        },
        members={
            "x": ShareMemberInput("x", frozenset({"solo"})),
            "y": ShareMemberInput("y", frozenset({"jobs"})),
            "z": ShareMemberInput("z", frozenset({"jobs"})),
        },
        current={
            "x": frozenset({("solo", 0)}),
            "y": frozenset({("jobs", 0), ("jobs", 1)}),
            "z": frozenset({("jobs", 1)}),
        },
    )
    plan = plan_share(req)
    assert plan.peak_after == plan.peak_before == pytest.approx(1000.0)
    assert holders(plan, "jobs", 0) == ["y", "z"]
