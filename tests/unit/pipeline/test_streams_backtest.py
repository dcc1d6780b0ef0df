"""The pipeline's streams groups without Spark: streams rows and their validation, the shape of
Kafka's sticky task assignor, the streams model and its measured capacities, the replay of
`sticky` and of task plans, and their recommendation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors import streams_tasks
from kafka_rebalance_pipeline.generate import StreamsFleetSpec, generate_streams_group
from kafka_rebalance_pipeline.recommend import choose, patch_document
from kafka_rebalance_pipeline.schema import FIELDS, STREAMS_FIELDS, row_errors
from kafka_rebalance_pipeline.streams_replay import (
    STICKY,
    StreamsCandidate,
    backtest_streams_group,
    replay_streams,
    streams_grid,
    streams_history_from_rows,
)
from kafka_rebalance_pipeline.streams_simulate import member_capacity, pauses
from kafka_rebalance_pipeline.streams_sticky import sticky_tasks

EXAMPLES = settings(max_examples=150, deadline=None)
KEY = {"cluster": "local", "namespace": "apps", "policy": "app", "group": "app"}
STREAMS_ROW: dict[str, Any] = {
    "ts_ms": 1, "kind": "streams", "group": "app", "subtopology": "1", "partition": 0,
    "lag": 40, "rate": 2.5, "log_end": 100, "owner": "a", "process": "pa", "stateful": True,
    "changelog": 5_000, "standbys": ["b"], "epoch": 0,
}  # fmt: skip


def rows(**changes: Any) -> list[dict[str, Any]]:
    return list(generate_streams_group(StreamsFleetSpec(**changes), 0))


# ------------------------------------------------------------------------------------ rows


def test_generated_streams_rows_are_valid_and_use_only_their_fields() -> None:
    generated = rows(polls=3)
    assert {r["kind"] for r in generated} == {"streams"} and len(generated) == 3 * 8
    for row in generated:
        assert row_errors(row) is None, row
        assert set(row) - {"kind"} == set(STREAMS_FIELDS) and set(row) <= set(FIELDS)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"subtopology": ""}, "missing-subtopology"),
        ({"subtopology": None}, "missing-subtopology"),
        ({"partition": -1}, "bad-partition"),
        ({"lag": -1}, "negative-offset"),
        ({"changelog": -5}, "negative-offset"),
        ({"rate": -0.5}, "negative-rate"),
        ({"stateful": "yes"}, "malformed-json"),
        ({"standbys": "b"}, "malformed-json"),
        ({"group": ""}, "missing-group"),
        ({"kind": "stream"}, "unknown-kind"),
    ],
)
def test_a_bad_streams_row_is_named_by_its_first_broken_rule(
    change: dict[str, Any], reason: str
) -> None:
    assert row_errors(STREAMS_ROW) is None
    assert row_errors({**STREAMS_ROW, **change}) == reason


def test_a_streams_row_with_unknowns_is_valid() -> None:
    unknown = {"lag": None, "rate": None, "log_end": None, "owner": None, "changelog": None}
    assert row_errors({**STREAMS_ROW, **unknown, "stateful": False, "standbys": []}) is None


# ------------------------------------------------------------------------- sticky's shape


def test_sticky_places_stateful_tasks_first_and_balances_each_flavour_by_count() -> None:
    stateful = [("1", p) for p in range(4)]
    stateless = [("0", p) for p in range(4)]
    placed = sticky_tasks(["a", "b", "c"], stateful, stateless, {})
    counts = {m: sum(1 for v in placed.values() if v == m) for m in "abc"}
    assert sorted(counts.values()) == [2, 3, 3] and len(placed) == 8
    heavy = {m: sum(1 for t in stateful if placed[t] == m) for m in "abc"}
    assert sorted(heavy.values()) == [1, 1, 2]


def test_sticky_keeps_a_members_tasks_below_its_quota_and_gives_a_new_member_the_excess() -> None:
    tasks = [("0", p) for p in range(6)]
    previous = {t: ("a" if t[1] < 4 else "b") for t in tasks}
    placed = sticky_tasks(["a", "b", "c"], [], tasks, previous)
    assert [placed[("0", p)] for p in range(6)] == ["a", "a", "c", "c", "b", "b"]
    kept = sticky_tasks(["a", "b"], [], tasks, {t: ("a" if t[1] < 3 else "b") for t in tasks})
    assert kept == {t: ("a" if t[1] < 3 else "b") for t in tasks}  # nothing moves


def test_sticky_hands_a_task_to_its_standby_before_anyone_else() -> None:
    tasks = [("1", p) for p in range(4)]
    previous = {("1", 0): "gone", ("1", 1): "a", ("1", 2): "b", ("1", 3): "gone"}
    placed = sticky_tasks(["a", "b", "c"], tasks, [], previous, {("1", 0): ["b"]})
    assert placed[("1", 0)] == "b" and placed[("1", 3)] == "c"


@EXAMPLES
@given(
    members=st.integers(1, 6),
    heavy=st.integers(0, 10),
    light=st.integers(0, 10),
    seed=st.integers(0, 10_000),
)
def test_sticky_places_every_task_once_within_one_of_even_when_nothing_sticks(
    members: int, heavy: int, light: int, seed: int
) -> None:
    names = [f"m{i}" for i in range(members)]
    stateful = [("1", p) for p in range(heavy)]
    stateless = [("0", p) for p in range(light)]
    placed = sticky_tasks(names, stateful, stateless, {})
    assert set(placed) == set(stateful) | set(stateless)
    counts = [sum(1 for v in placed.values() if v == m) for m in names]
    assert max(counts) - min(counts) <= 1
    # sticky: from its own output, nothing moves
    assert sticky_tasks(names, stateful, stateless, placed) == placed


# --------------------------------------------------------------------------------- model


def test_a_moved_stateful_task_pauses_for_its_restore_unless_it_lands_on_its_standby() -> None:
    due = pauses(
        ["a", "a", "a", None, "b"],
        ["b", "c", "c", "c", "b"],
        [True, True, False, True, True],
        [["b"], ["b"], [], [], []],
        handoff_s=10.0,
        restore_s=30.0,
    )
    assert due == [10.0, 30.0, 10.0, 0.0, 0.0]


def test_capacity_is_measured_per_member_from_its_busy_intervals() -> None:
    backlog = [[100.0, 0.0, 50.0], [80.0, 0.0, 0.0], [60.0, 0.0, 0.0]]
    produced = [[0.0] * 3, [10.0, 5.0, 10.0], [10.0, 5.0, 0.0]]
    owners = [[None] * 3, ["slow", "slow", "fast"], ["slow", "slow", "fast"]]
    measured = member_capacity(backlog, produced, owners, [0.0, 10.0, 10.0])
    # slow: (100 + 10 - 80) + (0 + 5 - 0) = 35 in 10 s each interval; fast never busy
    assert measured == {"slow": 3.5}


def test_a_generated_groups_history_recovers_its_capacities_and_shape() -> None:
    truth: list[Any] = []
    history = streams_history_from_rows(KEY, generate_streams_group(StreamsFleetSpec(), 0, truth))
    record = truth[0]
    assert history.capacity_source == "measured"
    for member, capacity in record.capacity.items():
        assert history.capacity[member] == pytest.approx(capacity, rel=0.01)
    hot = history.tasks.index(record.extra["hot"])
    assert history.owners[0][hot] == record.slow_member
    assert history.rates[5][hot] == pytest.approx(8 * 10.0)
    assert history.stateful == [False] * 4 + [True] * 4
    assert all(len(history.standbys[0][k]) == 1 for k in range(4, 8))


def test_a_task_missing_at_a_poll_keeps_its_last_row() -> None:
    generated = rows(polls=3)
    first = generated[0]["ts_ms"]
    gap = [
        r
        for r in generated
        if r["ts_ms"] > first and (r["subtopology"], r["partition"]) == ("0", 1)
    ]
    dropped = [r for r in generated if r not in gap]
    full, sparse = (streams_history_from_rows(KEY, g) for g in (generated, dropped))
    assert sparse.owners == full.owners and sparse.backlog[2][1] == full.backlog[0][1]
    assert full.rates[1][1] == sparse.rates[1][1] == 10.0  # the last rate told over the gap


def test_a_null_stateful_flag_is_stateless_as_pandas_gives_it() -> None:
    generated = rows(polls=2)
    nulls = [{**r, "stateful": float("nan") if r["ts_ms"] == generated[0]["ts_ms"] else None}
             for r in generated]  # fmt: skip
    assert streams_history_from_rows(KEY, nulls).stateful == [False] * 8
    told_once = [{**r, "stateful": None} if r is not generated[-1] else r for r in generated]
    assert streams_history_from_rows(KEY, told_once).stateful == [False] * 7 + [True]


# -------------------------------------------------------------------------------- replay


def test_the_task_planner_with_measured_weights_beats_sticky_on_a_hot_task_on_a_slow_instance() -> (
    None
):
    history = streams_history_from_rows(KEY, rows())
    out = {r["candidate"]: r for r in backtest_streams_group(history)}
    assert set(out) == {c.id for c in streams_grid()} and len(out) == 17
    sticky = out[STICKY]
    assert sticky["is_current"] and sticky["moves"] == 0 and sticky["error"] is None
    assert all(not r["is_current"] for c, r in out.items() if c != STICKY)
    best = min(out.values(), key=lambda r: r["mean_lag"])
    assert best["weights"] == "adaptive" and best["moves"] >= 1
    assert best["mean_lag"] <= 0.5 * sticky["mean_lag"]
    assert best["max_lag"] < sticky["max_lag"]
    assert {r["group_type"] for r in out.values()} == {"streams"}
    assert {r["partitions"] for r in out.values()} == {8}


def test_sticky_follows_a_member_that_leaves() -> None:
    history = streams_history_from_rows(KEY, rows(polls=6))
    gone = history.members[0][0]
    history.members[3:] = [tuple(m for m in ms if m != gone) for ms in history.members[3:]]
    result = replay_streams(history, StreamsCandidate(STICKY))
    # one new assignment; the tasks it grants had no member, so they are not moves (as the
    # operator counts them)
    assert result.error is None and result.score.epochs == 1 and result.score.moves == 0
    assert result.score.plans == 2  # the first poll's membership, and the one without `gone`


def test_a_planner_that_raises_fails_its_candidate_only(monkeypatch: pytest.MonkeyPatch) -> None:
    history = streams_history_from_rows(KEY, rows(polls=4))

    def broken(_inp: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(streams_tasks, "plan_tasks", broken)
    out = {r["candidate"]: r for r in backtest_streams_group(history)}
    assert out[STICKY]["error"] is None
    assert {r["error"] for c, r in out.items() if c != STICKY} == {"ValueError: boom"}


def test_the_recommendation_is_a_streams_policys_patch() -> None:
    history = streams_history_from_rows(KEY, rows())
    rec = choose(backtest_streams_group(history))
    assert rec.change and rec.best["strategy"] == "streams"
    patch = patch_document(rec)
    assert patch["spec"]["strategy"] == "lag-aware"
    assert patch["spec"]["members"] == {"weightFrom": "adaptive"}
    assert patch["spec"]["load"]["targetDrainSeconds"] == rec.best["drain_s"]
    assert "cooldown" in patch["spec"]["rebalance"]
    keep = choose([r for r in backtest_streams_group(history) if r["candidate"] == STICKY])
    assert not keep.change and patch_document(keep)["spec"] == {}
