"""The pipeline on real Spark: files and the Kafka topic in, Parquet, patches and a report out.

Small fleets (a few thousand rows) on a local Spark, sized for a busy two-core machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
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
from pipeline.replay import default_grid, strategies_grid
from pipeline.schema import row_errors
from pipeline.sinks import encode, write_files, write_kafka
from pipeline.spark_io import read_telemetry
from tests.pipeline_fleets import slow_member_fleet, uniform_fleet

pytestmark = pytest.mark.integration

# Python workers must run this interpreter (the one with pyarrow, pandas and this project), even
# when the session comes from the harness's `spark` fixture. Set at collection, before any
# SparkContext exists, because the context reads it once when it starts.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

UNIFORM = uniform_fleet(polls=48)
SLOW = slow_member_fleet(polls=48)

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
    assert backtest["candidates_replayed"] == 2 * len(default_grid("range"))

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


def test_the_telemetry_writer_produces_valid_rows_keyed_by_group(kafka: str) -> None:
    """The writer half of the Kafka path, read back with kafka-python (no Spark)."""
    from kafka import KafkaConsumer

    rows = [*generate_group(UNIFORM, 6), *generate_group(UNIFORM, 7)]
    topic = f"kafka-rebalance.telemetry-{uuid.uuid4().hex[:8]}"
    assert write_kafka(rows, kafka, topic) == len(rows)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    got: dict[str, list[dict[str, Any]]] = {}
    partition_of: dict[str, set[int]] = {}
    for record in consumer:
        row = json.loads(record.value)
        assert row_errors(row) is None
        assert record.key.decode() == row["group"]
        got.setdefault(row["group"], []).append(row)
        partition_of.setdefault(row["group"], set()).add(record.partition)
    consumer.close()
    want: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        want.setdefault(row["group"], []).append(row)
    assert got == want  # every row, in order within a group
    assert all(len(p) == 1 for p in partition_of.values())


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


# ---- a Spark standalone cluster (master + two workers) from the scripts in the pyspark package --


def _spark_class(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    import pyspark

    home = Path(pyspark.__file__).parent
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(home / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**env, "SPARK_HOME": str(home)},
            start_new_session=True,  # its own process group, stopped by its id below
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:PORT with two one-core workers; stopped by process group at the end."""
    from kafka_rebalance.devenv.ports import free_ports, is_listening

    directory = tmp_path_factory.mktemp("standalone")
    port, ui = free_ports(2)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(directory),
        "SPARK_DAEMON_MEMORY": "256m",
    }
    master_args = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    master_args += ["--port", str(port), "--webui-port", str(ui)]
    processes = [_spark_class(master_args, directory / "master.log", env)]
    try:
        deadline = time.monotonic() + 120
        while not is_listening(port):
            assert processes[0].poll() is None, (directory / "master.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "master did not listen"
            time.sleep(0.5)
        for index in range(2):
            work = directory / f"worker-{index}"
            work.mkdir()
            worker_args = ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}"]
            worker_args += ["--host", "127.0.0.1", "--cores", "1", "--memory", "768m"]
            worker_args += ["--work-dir", str(work), "--webui-port", "0"]
            processes.append(_spark_class(worker_args, directory / f"worker-{index}.log", env))
        while True:
            status = f"http://127.0.0.1:{ui}/json/"
            with contextlib.suppress(OSError), urllib.request.urlopen(status, timeout=2) as reply:
                if json.load(reply).get("aliveworkers", 0) >= 2:
                    break
            assert time.monotonic() < deadline, "workers did not register"
            time.sleep(1)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in reversed(processes):
            _stop(process)


def test_backtest_on_a_standalone_cluster_matches_local(
    pipeline_spark: Any, standalone_cluster: str, tmp_path: Path
) -> None:
    truth: list[GroupTruth] = []
    small = FleetSpec(**{**SLOW.__dict__, "polls": 24, "partitions": (8, 8)})
    rows = [*generate_group(small, 0, truth), *generate_group(small, 5, truth)]
    write_files(rows, tmp_path / "telemetry", rows_per_file=200)
    run_rates(pipeline_spark, [str(tmp_path / "telemetry")], tmp_path / "rates")
    local = run_backtest(
        pipeline_spark, [str(tmp_path / "telemetry")], tmp_path / "rates", tmp_path / "local",
        grid="strategies",
    )  # fmt: skip
    command = [
        sys.executable, "-m", "kafka_rebalance.cli", "pipeline", "backtest",
        "--master", standalone_cluster, "--grid", "strategies", "--shuffle-partitions", "2",
        "--driver-memory", "512m", "--conf", "spark.executor.memory=512m",
        "-i", str(tmp_path / "telemetry"), "--rates", str(tmp_path / "rates"),
        "-o", str(tmp_path / "cluster"),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    cluster = json.loads(done.stdout)
    assert cluster["groups"] == local["groups"] == 2
    assert (
        cluster["candidates_replayed"]
        == local["candidates_replayed"]
        == 2 * len(strategies_grid("range"))
    )

    def rows_of(path: Path) -> list[tuple[Any, ...]]:
        frame = pipeline_spark.read.parquet(str(path / "backtest"))
        return sorted(tuple(r) for r in frame.select(*sorted(frame.columns)).collect())

    assert rows_of(tmp_path / "cluster") == rows_of(tmp_path / "local")
