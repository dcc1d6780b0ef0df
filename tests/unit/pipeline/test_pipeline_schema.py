"""Telemetry rows: what the pipeline accepts and why it drops the rest (Python rules, no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_pipeline.generate import FleetSpec, generate_fleet
from kafka_rebalance_pipeline.schema import FIELDS, PARTITION_FIELDS, PLAN_FIELDS, ddl, row_errors
from kafka_rebalance_pipeline.sinks import encode, write_files

GOOD: dict[str, Any] = {
    "ts_ms": 1_767_225_600_000,
    "cluster": "local",
    "namespace": "team-0",
    "policy": "orders",
    "group": "orders",
    "topic": "orders",
    "partition": 3,
    "log_start": 0,
    "log_end": 1000,
    "committed": 900,
    "lag": 100,
    "lag_state": "ok",
    "time_lag_s": 2.5,
    "owner": "orders-0",
    "epoch": 4,
}


def test_every_generated_row_is_valid_and_uses_only_schema_fields() -> None:
    spec = FleetSpec(groups=3, polls=5, partitions=(2, 4))
    rows = list(generate_fleet(spec))
    assert rows
    assert all(row_errors(r) is None for r in rows)
    for row in rows:
        expected = PLAN_FIELDS if row.get("kind") == "plan" else PARTITION_FIELDS
        assert set(expected) <= set(row) <= set(FIELDS)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"ts_ms": None}, "missing-ts_ms"),
        ({"ts_ms": "yesterday"}, "malformed-json"),
        ({"group": ""}, "missing-group"),
        ({"topic": None}, "missing-topic"),
        ({"partition": -1}, "bad-partition"),
        ({"partition": 1.5}, "malformed-json"),
        ({"partition": 2**31}, "malformed-json"),
        ({"kind": "gauge"}, "unknown-kind"),
        ({"lag_state": "fine"}, "bad-lag_state"),
        ({"committed": None}, "missing-offsets"),
        ({"log_end": -5}, "negative-offset"),
        ({"lag": "many"}, "malformed-json"),
        ({"owner": None}, "missing-owner"),
    ],
)
def test_a_broken_partition_row_names_its_first_broken_rule(
    change: dict[str, Any], reason: str
) -> None:
    assert row_errors({**GOOD, **change}) == reason


def test_states_other_than_ok_may_lack_offsets_and_owner() -> None:
    row = {**GOOD, "lag_state": "uninitialized", "committed": None, "owner": None, "lag": None}
    assert row_errors(row) is None


def test_plan_rows_need_a_strategy() -> None:
    plan = {"ts_ms": 1, "kind": "plan", "group": "g", "epoch": 2, "strategy": "lag-aware"}
    assert row_errors(plan) is None
    assert row_errors({**plan, "strategy": None}) == "missing-strategy"
    assert row_errors(["not", "an", "object"]) == "malformed-json"


def test_the_spark_schema_names_every_field_once() -> None:
    names = [part.split("`")[1] for part in ddl().split(", ")]
    assert names == [*FIELDS, "_corrupt_record"]


def test_the_pipeline_writes_the_same_bytes_as_the_operator(tmp_path: Path) -> None:
    """Two writers of one wire format (the pipeline may not import the operator): same topic,
    same line per row, so a fleet generated here reads like one the operator recorded."""
    from kafka_rebalance_operator.telemetry import JsonLinesSink

    rows = list(generate_fleet(FleetSpec(groups=2, polls=3, partitions=(2, 3))))
    assert any(r.get("kind") == "plan" for r in rows)
    path = tmp_path / "operator.jsonl"
    sink = JsonLinesSink(str(path))
    sink.write(rows)
    sink.close()
    assert path.read_bytes() == b"".join(encode(r) + b"\n" for r in rows)
    write_files(rows, tmp_path / "pipeline")
    assert (tmp_path / "pipeline" / "part-00000.jsonl").read_bytes() == path.read_bytes()
