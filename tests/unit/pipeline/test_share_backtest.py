"""The pipeline's share groups without Spark: share rows, the share model, capacity estimated
from telemetry, the replay of `simple` and of share plans, and their recommendation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_pipeline.generate import ShareFleetSpec, generate_share_group
from kafka_rebalance_pipeline.recommend import choose, patch_document
from kafka_rebalance_pipeline.schema import (
    FIELDS,
    SHARE_FIELDS,
    SHARE_MEMBER_FIELDS,
    row_errors,
)
from kafka_rebalance_pipeline.share_replay import (
    SIMPLE,
    ShareCandidate,
    backtest_share_group,
    replay_share,
    share_grid,
    share_history_from_rows,
)
from kafka_rebalance_pipeline.share_simulate import estimate_capacity, share_drain_step

EXAMPLES = settings(max_examples=150, deadline=None)
KEY = {"cluster": "local", "namespace": "queues", "policy": "jobs", "group": "jobs"}
SHARE_ROW: dict[str, Any] = {
    "ts_ms": 1, "kind": "share", "group": "jobs", "topic": "jobs", "partition": 0,
    "log_end": 100, "lag": 40, "rate": 2.5, "members": ["a", "b"], "epoch": 0,
}  # fmt: skip


def rows(**changes: Any) -> list[dict[str, Any]]:
    return list(generate_share_group(ShareFleetSpec(**changes), 0))


# ------------------------------------------------------------------------------------ rows


def test_generated_share_rows_are_valid_and_use_only_their_fields() -> None:
    generated = rows(polls=3)
    assert {r["kind"] for r in generated} == {"share", "share-member"}
    for row in generated:
        assert row_errors(row) is None, row
        expected = SHARE_FIELDS if row["kind"] == "share" else SHARE_MEMBER_FIELDS
        assert set(row) <= set(FIELDS) and set(expected) - {"cluster"} <= set(row)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"topic": ""}, "missing-topic"),
        ({"partition": -1}, "bad-partition"),
        ({"lag": -1}, "negative-offset"),
        ({"rate": -0.5}, "negative-rate"),
        ({"members": "a,b"}, "malformed-json"),  # Spark cannot read a string as an array
        ({"members": [["a"]]}, "malformed-json"),
        ({"group": None}, "missing-group"),
    ],
)
def test_a_broken_share_row_names_its_first_broken_rule(
    change: dict[str, Any], reason: str
) -> None:
    assert row_errors(SHARE_ROW) is None
    assert row_errors({**SHARE_ROW, **change}) == reason


def test_share_rows_need_neither_backlog_nor_rate_nor_members() -> None:
    assert row_errors({**SHARE_ROW, "lag": None, "rate": None, "members": None}) is None


def test_a_member_row_needs_its_member_and_a_non_negative_throughput() -> None:
    member = {"ts_ms": 1, "kind": "share-member", "group": "jobs", "owner": "a", "throughput": 3.0}
    assert row_errors(member) is None
    assert row_errors({**member, "throughput": None}) is None
    assert row_errors({**member, "owner": ""}) == "missing-owner"
    assert row_errors({**member, "throughput": -1}) == "negative-rate"


# ------------------------------------------------------------------------------- the model

loads = st.lists(st.floats(0, 1e4), min_size=1, max_size=6)


@EXAMPLES
@given(loads, st.data())
def test_the_share_model_consumes_what_is_there_within_each_members_capacity(
    backlog: list[float], data: st.DataObject
) -> None:
    count = len(backlog)
    rates = data.draw(st.lists(st.floats(0, 500), min_size=count, max_size=count))
    members = data.draw(
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "d"]),
            st.lists(st.integers(0, count - 1), max_size=count, unique=True),
        )
    )
    capacity = {m: data.draw(st.floats(0, 1000)) for m in members}
    dt = 10.0
    after, used = share_drain_step(backlog, rates, members, capacity, dt)
    before = [b + r * dt for b, r in zip(backlog, rates, strict=True)]
    assert all(a >= 0 for a in after)
    assert sum(before) - sum(after) == pytest.approx(sum(used.values()), rel=1e-6, abs=1e-6)
    for member, amount in used.items():
        assert amount <= capacity[member] * dt * (1 + 1e-9) + 1e-9
    held = {p for parts in members.values() for p in parts}
    for p in range(count):
        if p not in held:
            assert after[p] == pytest.approx(before[p])


def test_a_member_gives_a_dry_partitions_share_to_its_busy_one() -> None:
    # a holds a busy partition and one with 10 records: it spends 90 of its 100 on the busy one
    after, used = share_drain_step([1000.0, 10.0], [0.0, 0.0], {"a": [0, 1]}, {"a": 10.0}, 10.0)
    assert after == pytest.approx([910.0, 0.0])
    assert used == pytest.approx({"a": 100.0})


def test_members_on_one_partition_add_up() -> None:
    together = {"a": [0], "b": [0], "c": [0]}
    after, _ = share_drain_step([1000.0], [0.0], together, dict.fromkeys("abc", 10.0), 10.0)
    assert after == pytest.approx([700.0])


def test_capacity_is_estimated_from_busy_members_without_throughput_rows() -> None:
    history = share_history_from_rows(KEY, [r for r in rows() if r["kind"] == "share"])
    assert history.capacity_source == "estimated"
    truth = 1.5 * (100 + 10 + 10 + 10) / 3  # ShareFleetSpec's members
    assert len(history.capacity) == 3
    assert list(history.capacity.values()) == pytest.approx([truth] * 3)


def test_no_busy_interval_gives_no_estimate() -> None:
    assert estimate_capacity([[0.0], [0.0]], [[0.0], [5.0]], [{}, {"a": [0]}], [0.0, 1.0]) is None


# ------------------------------------------------------------------------------ the history


def test_the_history_carries_gaps_and_reads_rates_from_the_log_ends() -> None:
    given_rows = [
        {**SHARE_ROW, "ts_ms": 0, "partition": 0, "log_end": 0, "lag": 50, "members": ["a"]},
        {**SHARE_ROW, "ts_ms": 0, "partition": 1, "log_end": 0, "lag": 5, "members": ["b"]},
        {**SHARE_ROW, "ts_ms": 10_000, "partition": 0, "log_end": 300, "lag": 70, "members": ["a"]},
        # partition 1 has no row at the second poll: it keeps its last values
    ]  # fmt: skip
    history = share_history_from_rows(KEY, given_rows)
    assert history.partitions == [("jobs", 0), ("jobs", 1)]
    assert history.rates[1] == [30.0, 0.0]
    assert history.rates[0] == [2.5, 2.5]  # no earlier log end: the rows' own rate
    assert history.backlog[1] == [70.0, 5.0]
    assert history.assignments[1] == {"a": (0,), "b": (1,)}
    assert history.members == [("a", "b"), ("a", "b")]


# ------------------------------------------------------------------------------ the replay


def test_simple_keeps_its_shape_and_a_share_plan_puts_members_on_the_hot_partition() -> None:
    history = share_history_from_rows(KEY, rows())
    assert history.capacity_source == "measured"
    simple = replay_share(history, ShareCandidate(SIMPLE))
    assert simple.members_per_partition == [1, 1, 1, 1]
    assert simple.score.moves == 0 and simple.score.epochs == 0
    planned = replay_share(history, ShareCandidate("share", drain_s=60.0))
    assert planned.members_per_partition[0] >= 2
    assert planned.score.mean_lag <= 0.5 * simple.score.mean_lag
    assert planned.score.max_lag <= simple.score.max_lag


def test_a_move_budget_bounds_every_applied_plan() -> None:
    history = share_history_from_rows(KEY, rows())
    budget = ShareCandidate("share", drain_s=60.0, max_moves="25%")  # 1 of 4 partitions
    result = replay_share(history, budget)
    assert result.score.epochs >= 1
    assert result.score.moves <= result.score.epochs * budget.move_budget(4)  # type: ignore[operator]


def test_the_cooldown_holds_a_new_plan() -> None:
    history = share_history_from_rows(KEY, rows())
    quick = replay_share(history, ShareCandidate("share", drain_s=60.0, max_moves="25%"))
    slow = replay_share(
        history, ShareCandidate("share", drain_s=60.0, max_moves="25%", cooldown_s=300.0)
    )
    assert slow.score.epochs == quick.score.epochs  # the same plans, later
    assert slow.score.mean_lag > quick.score.mean_lag


def test_the_backtest_rows_recommend_a_share_plan_over_simple() -> None:
    history = share_history_from_rows(KEY, rows())
    out = backtest_share_group(history)
    assert [r["candidate"] for r in out] == [c.id for c in share_grid()]
    assert [r["is_current"] for r in out] == [True] + [False] * (len(out) - 1)
    assert all(r["error"] is None and r["group_type"] == "share" for r in out)
    rec = choose(out)
    assert rec.change and rec.current["strategy"] == SIMPLE
    assert rec.best["strategy"] == "share"
    assert json.loads(rec.best["members_per_partition_json"])[0] >= 2
    patch = patch_document(rec)
    assert patch["spec"]["load"] == {"targetDrainSeconds": round(rec.best["drain_s"])}
    assert "strategy" not in patch["spec"]


def test_a_group_without_capacity_says_so_in_every_row() -> None:
    idle = [r for r in rows(hot_factor=1.0, initial_backlog_s=0.0) if r["kind"] == "share"]
    history = share_history_from_rows(KEY, idle)
    assert history.capacity == {}
    out = backtest_share_group(history, [ShareCandidate(SIMPLE)])
    assert out[0]["error"] == "no member capacity: no throughput row, no busy partition"


# ---------------------------------------------------------------------------------- the CLI


def generate(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kafka_rebalance.cli", "pipeline", "generate", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_pipeline_generate_writes_share_groups_beside_consumer_groups(tmp_path: Path) -> None:
    done = generate("--groups", "1", "--share-groups", "2", "--polls", "3", "-o", str(tmp_path))
    assert done.returncode == 0, done.stderr
    written = [json.loads(line) for f in tmp_path.glob("*.jsonl") for line in f.open()]
    kinds = {(r["group"], r.get("kind")) for r in written}
    assert {("share-0000", "share"), ("share-0001", "share-member")} <= kinds
    assert all(row_errors(r) is None for r in written)


def test_a_negative_share_group_count_exits_2_with_one_line(tmp_path: Path) -> None:
    done = generate("--share-groups", "-1", "-o", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == "pipeline generate: --share-groups must be >= 0"
