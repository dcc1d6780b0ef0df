"""The pipeline on real Spark: files and the Kafka topic in, Parquet, patches and a report out.

Small fleets (a few thousand rows) on a local Spark, sized for a busy two-core machine.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.backtest_job import run_backtest
from pipeline.generate import FleetSpec, GroupTruth, generate_group
from pipeline.rates_job import run_rates
from pipeline.recommend import POD_NAME_LABEL
from pipeline.recommend_job import run_recommend
from pipeline.schema import row_errors
from pipeline.sinks import encode, write_files, write_kafka
from pipeline.spark_io import read_telemetry

pytestmark = pytest.mark.integration

UNIFORM = FleetSpec(
    groups=1,
    polls=48,
    partitions=(12, 12),
    members=(4, 4),
    topics=1,
    pareto_shape=1000.0,
    diurnal_amplitude=0.0,
    bursts_per_group=0,
    slow_fraction=0.0,
    capacity_jitter=0.0,
    initial_backlog_s=90.0,
)
SLOW = FleetSpec(**{**UNIFORM.__dict__, "slow_fraction": 1.0, "slow_factor": 0.25})

GOOD_ROW: dict[str, Any] = {
    "ts_ms": 1_767_225_600_000, "cluster": "local", "namespace": "team-9", "policy": "bad",
    "group": "bad", "topic": "t", "partition": 0, "log_start": 0, "log_end": 10,
    "committed": 5, "lag": 5, "lag_state": "ok", "time_lag_s": 1.0, "owner": "bad-0", "epoch": 1,
}  # fmt: skip
BAD_CHANGES: list[dict[str, Any]] = [
    {"ts_ms": None},
    {"group": ""},
    {"topic": None},
    {"partition": -2},
    {"partition": 1.5},
    {"lag_state": "fine"},
    {"committed": None},
    {"log_end": -5},
    {"owner": None},
    {"kind": "gauge"},
    {"kind": "plan", "strategy": None},
]
MALFORMED_LINES = [b"{not json", b"[1, 2, 3]", b'{"ts_ms": "yesterday", "group": "g"}']


@pytest.fixture(scope="module")
def pipeline_spark(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The harness's `spark` session when the Kafka connector is provisioned (so the Kafka test
    shares it); otherwise a plain local one, enough for the file-based tests."""
    from kafka_rebalance.devenv.toolchain import toolchain

    tools = toolchain()
    if f"spark-kafka {tools.spark_version}" not in tools.missing():
        yield request.getfixturevalue("spark")
        return
    from pipeline.spark_io import build_session

    directory = tmp_path_factory.mktemp("spark")
    session = build_session(
        master="local[1]",
        app_name="kafka-rebalance-pipeline-tests",
        shuffle_partitions=1,
        driver_memory="512m",
        conf=[f"spark.local.dir={directory}"],
        jars=[],
    )
    try:
        yield session
    finally:
        session.stop()


def fleet_rows(truth: list[GroupTruth]) -> list[dict[str, Any]]:
    return [*generate_group(SLOW, 0, truth), *generate_group(UNIFORM, 1, truth)]


def write_bad_rows(directory: Path) -> Counter[str]:
    """Broken rows in their own file; returns the expected count per reason."""
    rows = [{**GOOD_ROW, **change} for change in BAD_CHANGES]
    with (directory / "part-bad.jsonl").open("wb") as handle:
        for row in rows:
            handle.write(encode(row) + b"\n")
        for line in MALFORMED_LINES:
            handle.write(line + b"\n")
    expected = Counter(row_errors(r) for r in rows)
    expected["malformed-json"] += len(MALFORMED_LINES)
    assert None not in expected
    return expected


def test_files_to_rates_backtest_and_recommendations(pipeline_spark: Any, tmp_path: Path) -> None:
    truth: list[GroupTruth] = []
    rows = fleet_rows(truth)
    telemetry = tmp_path / "telemetry"
    write_files(rows, telemetry, rows_per_file=1000)
    expected_errors = write_bad_rows(telemetry)

    rates = run_rates(pipeline_spark, [str(telemetry)], tmp_path / "rates")
    assert rates["rows_valid"] == len(rows)
    assert rates["rows_dropped"] == sum(expected_errors.values())
    report = json.loads((tmp_path / "rates" / "schema_errors.json").read_text())
    assert report["errors"] == dict(expected_errors)  # Spark's SQL rules agree with the twin
    assert report["samples"]

    capacity = {
        r["member"]: r.asDict()
        for r in pipeline_spark.read.parquet(str(tmp_path / "rates" / "member_capacity")).collect()
    }
    slow_group, uniform_group = truth
    for record in truth:
        for member, true_capacity in record.capacity.items():
            measured = capacity[member]
            assert measured["capacity_source"] == "measured", member
            assert measured["capacity"] == pytest.approx(true_capacity, rel=0.03), member
    plans = pipeline_spark.read.parquet(str(tmp_path / "rates" / "group_plans")).collect()
    assert {r["group"]: r["current_strategy"] for r in plans} == {
        slow_group.group: "range",
        uniform_group.group: "range",
    }

    backtest = run_backtest(pipeline_spark, [str(telemetry)], tmp_path / "rates", tmp_path / "bt")
    assert backtest["groups"] == 2 and backtest["replay_errors"] == 0

    summary = run_recommend(tmp_path / "bt", tmp_path / "rec")
    assert summary["groups"] == 2
    recs = {
        r["group"]: r for r in json.loads((tmp_path / "rec" / "recommendations.json").read_text())
    }
    assert recs[uniform_group.group]["change"] is False
    assert recs[uniform_group.group]["strategy"] == "range"
    assert not (tmp_path / "rec" / "patches" / uniform_group.namespace).exists()

    assert recs[slow_group.group]["change"] is True
    patch_file = tmp_path / "rec" / "patches" / slow_group.namespace / f"{slow_group.policy}.yaml"
    patch = yaml.safe_load(patch_file.read_text())
    weights = {
        w["selector"]["matchLabels"][POD_NAME_LABEL]: w["weight"]
        for w in patch["spec"]["members"]["weights"]
    }
    slow = slow_group.slow_member
    assert slow is not None
    assert weights[slow] < 0.5 * min(w for m, w in weights.items() if m != slow)
    html = (tmp_path / "rec" / "report.html").read_text()
    assert slow_group.group in html and "data:image/png;base64," in html


def test_the_kafka_source_reads_what_the_telemetry_writer_writes(
    kafka: str, spark: Any, tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    truth: list[GroupTruth] = []
    rows = list(generate_group(UNIFORM, 3, truth))
    topic = f"kafka-rebalance.telemetry-{uuid.uuid4().hex[:8]}"
    assert write_kafka(rows, kafka, topic) == len(rows)
    producer = KafkaProducer(bootstrap_servers=kafka)
    for line in MALFORMED_LINES:
        producer.send(topic, value=line)
    producer.flush()
    producer.close()

    telemetry = read_telemetry(spark, [f"kafka://{kafka}/{topic}"])
    try:
        got = sorted(
            (r["ts_ms"], r["topic"], r["partition"], r["lag"], r["owner"], r["epoch"])
            for r in telemetry.partitions.collect()
        )
        want = sorted(
            (r["ts_ms"], r["topic"], r["partition"], r["lag"], r["owner"], r["epoch"])
            for r in rows
            if r.get("kind") != "plan"
        )
        assert got == want
        assert [r["strategy"] for r in telemetry.plans.collect()] == ["range"]
        report = telemetry.error_report()
        assert report["errors"] == {"malformed-json": len(MALFORMED_LINES)}
    finally:
        telemetry.checked.unpersist()

    # The same rows through files give the same rates as through Kafka.
    write_files(rows, tmp_path / "files")
    from_kafka = run_rates(spark, [f"kafka://{kafka}/{topic}"], tmp_path / "rk")
    from_files = run_rates(spark, [str(tmp_path / "files")], tmp_path / "rf")
    assert from_kafka["rows_valid"] == from_files["rows_valid"] == len(rows)

    def capacities(path: Path) -> dict[str, float]:
        frame = spark.read.parquet(str(path / "member_capacity"))
        return {r["member"]: round(r["capacity"], 6) for r in frame.collect()}

    assert capacities(tmp_path / "rk") == capacities(tmp_path / "rf")
