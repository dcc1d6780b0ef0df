"""Backtest and recommendation on small synthetic groups whose right answer is known (no Spark).

The generator runs a fleet through the same fluid model, so a slow member really lags under the
count-based `range`, and a uniform group really has nothing to gain. Capacities here are the
generator's true ones; the Spark tests check that `rates` measures them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from kafka_rebalance_pipeline.generate import FleetSpec, GroupTruth, generate_group
from kafka_rebalance_pipeline.recommend import (
    POD_NAME_LABEL,
    choose,
    duration_text,
    patch_document,
    patch_yaml,
)
from kafka_rebalance_pipeline.replay import (
    Candidate,
    GroupHistory,
    backtest_group,
    capacity_weights,
    default_grid,
    history_from_rows,
    replay,
)

from tests.pipeline_fleets import (
    mostly_idle_rows,
    slow_member_fleet,
    sparse_like_the_operator,
    uniform_fleet,
)

CRD = Path(__file__).resolve().parents[3] / "crds" / "consumergrouppolicies.yaml"

UNIFORM = uniform_fleet(polls=60)
SLOW = slow_member_fleet(polls=60)


def group_history(spec: FleetSpec, index: int = 0) -> tuple[GroupHistory, GroupTruth]:
    truth: list[GroupTruth] = []
    rows = [r for r in generate_group(spec, index, truth) if r.get("kind") != "plan"]
    record = truth[0]
    key = {"cluster": "local", "namespace": record.namespace, "policy": record.policy}
    key["group"] = record.group
    history = history_from_rows(key, pd.DataFrame(rows), record.capacity, spec.current_strategy)
    return history, record


def test_default_grid_covers_every_strategy_once_per_option_set_current_first() -> None:
    grid = default_grid("cooperative-sticky")
    assert grid[0] == Candidate("cooperative-sticky")
    ids = [c.id for c in grid]
    assert len(ids) == len(set(ids))
    assert {c.strategy for c in grid} == {
        "range", "roundrobin", "sticky", "cooperative-sticky", "kip169", "weighted-sticky",
        "lag-aware",
    }  # fmt: skip
    assert {c.weights for c in grid if c.strategy == "lag-aware"} == {"none", "capacity"}


def test_plan_options_use_the_plan_contract_names() -> None:
    assert Candidate("lag-aware", min_improvement=0.1, max_moves="25%").plan_options() == {
        "min_improvement": 0.1,
        "max_moves": "25%",
    }
    assert Candidate("lag-aware", max_moves="10").plan_options() == {"max_moves": 10}
    assert Candidate("range").plan_options() == {}


def test_capacity_weights_put_the_fastest_member_at_one() -> None:
    weights = capacity_weights({"a": 200.0, "b": 50.0, "c": 100.0}, ["a", "b", "c", "d"])
    assert weights == {"a": 1.0, "b": 0.25, "c": 0.5, "d": 1.0}


def test_history_recovers_rates_from_end_offsets_and_carries_gaps() -> None:
    rows = pd.DataFrame(
        [
            {"ts_ms": 0, "topic": "t", "partition": 0, "log_end": 0, "lag": 5, "owner": "a"},
            {"ts_ms": 30_000, "topic": "t", "partition": 0, "log_end": 300, "lag": 7, "owner": "a"},
            {"ts_ms": 60_000, "topic": "t", "partition": 0, "log_end": 900, "lag": 9, "owner": "a"},
            {"ts_ms": 0, "topic": "t", "partition": 2, "log_end": 10, "lag": 0, "owner": "b"},
            # partition 2 missing at 30 s: carried forward; partition 1 never seen: zero
            {"ts_ms": 60_000, "topic": "t", "partition": 2, "log_end": 70, "lag": 1, "owner": "b"},
        ]
    )
    history = history_from_rows({"group": "g"}, rows, {"a": 10.0, "b": 10.0}, "range")
    assert history.topics == {"t": 3}
    assert history.ts_s == [0.0, 30.0, 60.0]
    assert [r[0] for r in history.rates] == pytest.approx([10.0, 10.0, 20.0])
    assert [r[2] for r in history.rates] == pytest.approx([0.0, 0.0, 2.0])
    assert [r[1] for r in history.rates] == [0.0, 0.0, 0.0]
    assert history.initial_lag == [5.0, 0.0, 0.0]
    assert history.initial_owner == ["a", None, "b"]
    assert history.members == [("a", "b")] * 3


def test_replaying_the_current_count_based_strategy_moves_nothing() -> None:
    history, _ = group_history(SLOW)
    result = replay(history, Candidate("range"))
    assert result.error is None
    assert (result.score.moves, result.score.epochs) == (0, 0)


def test_a_member_that_leaves_has_its_partitions_reassigned() -> None:
    polls, count = 8, 4
    history = GroupHistory(
        cluster="c",
        namespace="n",
        policy="p",
        group="g",
        ts_s=[30.0 * t for t in range(polls)],
        topics={"t": count},
        partitions=[("t", p) for p in range(count)],
        rates=[[10.0] * count for _ in range(polls)],
        initial_lag=[0.0] * count,
        initial_owner=["a", "a", "b", "b"],
        members=[("a", "b")] * 3 + [("a",)] * (polls - 3),
        capacity={"a": 100.0, "b": 100.0},
    )
    result = replay(history, Candidate("range"), handoff_s=0.0)
    assert result.score.epochs == 1  # the one change: b's partitions go to a
    # a (100/s) keeps up with all 40/s: nothing piles up after b left.
    assert result.score.max_lag == pytest.approx(0.0)
    assert result.utilisation["a"] > result.utilisation["b"]


SKEWED = FleetSpec(groups=1, polls=60, partitions=(10, 16), slow_fraction=1.0, seed=11)


@pytest.mark.parametrize("spec", [SLOW, SKEWED, UNIFORM], ids=["slow", "skewed", "uniform"])
def test_sharing_planner_answers_between_candidates_changes_no_result(
    spec: FleetSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-group plan cache is a speed-up only: every output row is the same without it,
    and it does spare planner calls (candidates that differ only in cooldown, at least)."""
    import kafka_rebalance_assignors as assignors

    history, _ = group_history(spec)
    real_plan = assignors.plan_request
    calls = {False: 0, True: 0}
    rows = {}
    for share in (False, True):

        def counting(request: assignors.PlanRequest, share: bool = share) -> assignors.Plan:
            calls[share] += 1
            return real_plan(request)

        monkeypatch.setattr(assignors, "plan_request", counting)
        rows[share] = backtest_group(history, "full", share_plans=share)
        monkeypatch.setattr(assignors, "plan_request", real_plan)
    assert rows[True] == rows[False]
    assert sum(r["plans"] for r in rows[False]) == calls[False]  # every decision, one call
    assert 0 < calls[True] < calls[False]


def test_slow_member_lags_under_range_and_the_recommendation_weights_it_down() -> None:
    history, truth = group_history(SLOW)
    assert truth.slow_member is not None
    rows = backtest_group(history)
    current = next(r for r in rows if r["is_current"])
    assert current["strategy"] == "range" and current["time_over_slo_s"] > 0
    rec = choose(rows)
    assert rec.change, rec.reason
    assert rec.best["time_over_slo_s"] < current["time_over_slo_s"]
    patch = patch_document(rec)
    weights = {
        w["selector"]["matchLabels"][POD_NAME_LABEL]: w["weight"]
        for w in patch["spec"]["members"]["weights"]
    }
    assert set(weights) == set(truth.members)
    others = [w for m, w in weights.items() if m != truth.slow_member]
    assert weights[truth.slow_member] < 0.5 * min(others)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_uniform_group_keeps_its_current_strategy(strategy: str) -> None:
    spec = FleetSpec(**{**UNIFORM.__dict__, "current_strategy": strategy})
    history, _ = group_history(spec, index=1)
    rows = backtest_group(history)
    rec = choose(rows)
    assert not rec.change, rec.reason
    assert rec.chosen["strategy"] == strategy
    assert patch_document(rec)["spec"]["strategy"] == strategy


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    for part in path.split("."):
        schema = schema["items"] if part == "[]" else schema["properties"][part]
    return schema


def test_the_patch_uses_only_fields_the_crd_defines() -> None:
    history, _ = group_history(SLOW)
    rec = choose(backtest_group(history))
    patch = patch_document(rec)
    crd = yaml.safe_load(CRD.read_text())
    assert patch["apiVersion"] == f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"
    assert patch["kind"] == crd["spec"]["names"]["kind"]
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert patch["spec"]["strategy"] in _schema_at(spec_schema, "strategy")["enum"]
    assert set(patch["spec"]["rebalance"]) <= set(
        _schema_at(spec_schema, "rebalance")["properties"]
    )
    weight_item = _schema_at(spec_schema, "members.weights.[]")
    for entry in patch["spec"]["members"]["weights"]:
        assert set(entry) <= set(weight_item["properties"])
        assert 0 < entry["weight"] <= weight_item["properties"]["weight"]["maximum"]
    pattern = _schema_at(spec_schema, "rebalance.cooldown")["pattern"]
    assert re.fullmatch(pattern, patch["spec"]["rebalance"]["cooldown"])
    text = patch_yaml(rec)
    assert yaml.safe_load(text) == patch  # the evidence is in comments only
    assert "time over SLO" in text


def test_duration_text_uses_the_crd_duration_syntax() -> None:
    assert [duration_text(s) for s in (0, 45, 300, 7200, 90)] == ["0s", "45s", "5m", "2h", "90s"]


@pytest.mark.parametrize("fleet", ["mostly-idle", "slow-member"])
def test_sparse_rows_replay_the_history_of_their_dense_telemetry(fleet: str) -> None:
    """The backtest's input: a group's history from the operator's sparse rows is the one from
    its dense rows (gaps carry the last row forward), so every candidate replays the same."""
    if fleet == "mostly-idle":
        dense = mostly_idle_rows()
    else:
        dense = [r for r in generate_group(SLOW, 0, []) if r.get("kind") != "plan"]
    sparse = sparse_like_the_operator(dense)
    if fleet == "mostly-idle":
        assert len(sparse) < len(dense) // 2
    key = {"cluster": "local", "namespace": "n", "policy": "p", "group": "g"}
    capacity = {"g-0": 10.0, "g-1": 10.0, "g-2": 10.0}
    want = history_from_rows(key, pd.DataFrame(dense), capacity, "range")
    got = history_from_rows(key, pd.DataFrame(sparse), capacity, "range")
    assert got == want
    assert want.polls == len({r["ts_ms"] for r in dense})
