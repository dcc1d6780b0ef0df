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
from kafka_rebalance_common.kafka_retry import ensure_topic
from kafka_rebalance_pipeline.backtest_job import run_backtest
from kafka_rebalance_pipeline.generate import (
    FleetSpec,
    GroupTruth,
    ShareFleetSpec,
    StreamsFleetSpec,
    generate_group,
    generate_share_group,
    generate_streams_group,
)
from kafka_rebalance_pipeline.polls import REFRESH_MS, at_every_poll
from kafka_rebalance_pipeline.rates_job import (
    KEY,
    group_lag,
    member_capacity,
    misses_polls,
    partition_rates,
    run_rates,
    with_intervals,
    with_partition_hash,
)
from kafka_rebalance_pipeline.recommend import POD_NAME_LABEL
from kafka_rebalance_pipeline.recommend_job import run_recommend
from kafka_rebalance_pipeline.replay import default_grid, strategies_grid
from kafka_rebalance_pipeline.schema import FIELDS, row_errors
from kafka_rebalance_pipeline.share_replay import share_grid
from kafka_rebalance_pipeline.sinks import encode, write_files, write_kafka
from kafka_rebalance_pipeline.spark_io import read_telemetry
from kafka_rebalance_pipeline.streams_replay import streams_grid

from tests.pipeline_fleets import (
    mostly_idle_rows,
    rates_regression_rows,
    slow_member_fleet,
    sparse_like_the_operator,
    uniform_fleet,
)

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
    from kafka_rebalance_dev.devenv.toolchain import toolchain

    tools = toolchain()
    if f"spark-kafka {tools.spark_version}" not in tools.missing():
        yield request.getfixturevalue("spark")
        return
    from kafka_rebalance_pipeline.spark_io import build_session

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


class Recorder:
    """A telemetry sink that keeps what the operator emitted: the expected side."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def write(self, rows: Any) -> None:
        self.rows.extend(dict(r) for r in rows)

    def close(self) -> None:
        pass


UNREAD_POLL, FAILED_COMMIT_POLL = 17, 31  # polls where the operator's reads partly fail


def operator_emits(spec: FleetSpec, index: int, truth: list[GroupTruth], sinks: list[Any]) -> None:
    """Drive the operator's telemetry writer as `reconcile.poll` does, one poll at a time.

    The group's offsets come from the fluid fleet model (so the truth about capacities is
    known), shaped as `KafkaObserver.observe` returns them (`PartitionOffsets`); lag states come
    from `lag.classify`, time lags from `history.PartitionMemory` (as `reconcile._lags`), and the
    rows from `telemetry.partition_row` / `plan_row` through `Telemetry.emit`. Two polls carry
    the failures a real cluster produces: one partition's offsets unread, and a failed
    committed-offset read for the whole group (lag carried, state `unknown`).
    """
    from kafka_rebalance_operator import telemetry as operator_telemetry
    from kafka_rebalance_operator.history import PartitionMemory
    from kafka_rebalance_operator.lag import LagState, PartitionLag, PartitionOffsets, classify

    writer = operator_telemetry.Telemetry(sinks)
    generated = list(generate_group(spec, index, truth))
    plan = next(r for r in generated if r.get("kind") == "plan")
    writer.emit(
        [
            operator_telemetry.plan_row(
                ts_ms=plan["ts_ms"], group=plan["group"], epoch=plan["epoch"],
                strategy=plan["strategy"], moves=plan["moves"],
                before=plan["max_load_ratio_before"], after=plan["max_load_ratio_after"],
                namespace=plan["namespace"], policy=plan["policy"],
            )
        ]
    )  # fmt: skip
    polls: dict[int, list[dict[str, Any]]] = {}
    for row in generated:
        if row.get("kind") != "plan":
            polls.setdefault(row["ts_ms"], []).append(row)
    memory: dict[tuple[str, int], PartitionMemory] = {}
    previous: dict[tuple[str, int], PartitionLag] = {}
    for number, (ts_ms, rows) in enumerate(sorted(polls.items())):
        now = ts_ms / 1000.0
        emitted = []
        for row in sorted(rows, key=lambda r: (r["topic"], r["partition"])):
            key = (row["topic"], row["partition"])
            unread = number == UNREAD_POLL and row["partition"] == 0
            known = number != FAILED_COMMIT_POLL
            offsets = PartitionOffsets(
                log_start=None if unread else row["log_start"],
                log_end=None if unread else row["log_end"],
                committed=row["committed"] if known else None,
                committed_known=known,
                error="offsets unread" if unread else None,
            )
            partition = memory.setdefault(key, PartitionMemory())
            age = now - partition.last_lag_t if partition.last_lag_t is not None else 0.0
            state = classify(offsets, "earliest", previous.get(key), age)
            ok = state.state is not LagState.UNKNOWN
            partition.observe(
                now,
                offsets.log_end,
                offsets.committed if ok else None,
                state.lag if ok else None,
            )
            previous[key] = state
            emitted.append(
                operator_telemetry.partition_row(
                    ts_ms=int(now * 1000), cluster=row["cluster"], namespace=row["namespace"],
                    policy=row["policy"], group=row["group"], topic=key[0], partition=key[1],
                    log_start=offsets.log_start, log_end=offsets.log_end,
                    committed=offsets.committed, lag=state.lag, lag_state=state.state.value,
                    time_lag_s=(
                        partition.ends.time_lag(offsets.committed, now)
                        if state.state is LagState.OK and offsets.committed is not None
                        else None
                    ),
                    owner=row["owner"], epoch=row["epoch"],
                )
            )  # fmt: skip
        writer.emit(emitted)
    writer.close()


def test_the_kafka_source_reads_what_the_operator_telemetry_writer_writes(
    kafka: str, spark: Any, tmp_path: Path
) -> None:
    from kafka import KafkaProducer
    from kafka_rebalance_operator.telemetry import (
        JsonLinesSink,
        KafkaSink,
        share_rows,
        streams_rows,
    )

    topic = f"kafka-rebalance.telemetry-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka, topic, 3)
    recorder = Recorder()
    truth: list[GroupTruth] = []
    lines = tmp_path / "operator" / "telemetry.jsonl"
    sinks = [KafkaSink(kafka, topic), JsonLinesSink(str(lines)), recorder]
    operator_emits(SLOW, 3, truth, sinks)
    emitted = recorder.rows
    (record,) = truth
    states = Counter(r.get("lag_state") for r in emitted)
    # the failed committed read (every partition) and the unread partition; one plan row
    assert states["unknown"] == record.partitions + 1
    assert states["ok"] == len(emitted) - 1 - states["unknown"]
    # a share group's poll, as groups/share.py writes it: members as a JSON array, nulls kept
    share = share_rows(
        ts_ms=1_767_225_600_000, cluster="local", namespace="queues", policy="jobs",
        group="jobs", partitions={"jobs": 2}, log_ends={("jobs", 0): 10, ("jobs", 1): 5},
        backlog={("jobs", 0): 4}, rates={("jobs", 0): 1.5},
        holders={("jobs", 0): ["b", "a"], ("jobs", 1): ["b"]}, epoch=3,
    )  # fmt: skip
    # a streams group's poll, as groups/streams.py writes it: a boolean, an array, nulls kept
    streams = streams_rows(
        ts_ms=1_767_225_600_000, cluster="local", namespace="apps", policy="app", group="app",
        counts={"0": 1, "1": 1}, lag={("0", 0): 7, ("1", 0): None}, rate={("0", 0): 2.5},
        log_end={("0", 0): 70}, active={"a": {"0": [0], "1": [0]}}, standby={"b": {"1": [0]}},
        processes={"a": "pa"}, changelog={("1", 0): 900}, epoch=2,
    )  # fmt: skip
    for sink in (KafkaSink(kafka, topic), JsonLinesSink(str(lines)), recorder):  # those closed
        sink.write(share)
        sink.write(streams)
        sink.close()
    producer = KafkaProducer(bootstrap_servers=kafka)
    for line in MALFORMED_LINES:
        producer.send(topic, value=line)
    producer.flush()
    producer.close()

    telemetry = read_telemetry(spark, [f"kafka://{kafka}/{topic}"])
    try:

        def canonical(rows: Any) -> list[str]:
            return sorted(json.dumps({f: r.get(f) for f in FIELDS}, sort_keys=True) for r in rows)

        read = [r.asDict() for r in telemetry.checked.collect()]
        # Every field of the schema, row for row, as the operator wrote it.
        assert canonical(r for r in read if r["_error"] is None) == canonical(emitted)
        assert telemetry.partitions.count() == len(emitted) - 1 - len(share) - len(streams)
        tasks = sorted(telemetry.streams.collect(), key=lambda r: r["subtopology"])
        assert [
            (r["lag"], r["rate"], r["stateful"], r["changelog"], r["standbys"], r["process"])
            for r in tasks
        ] == [(7, 2.5, False, None, [], "pa"), (None, None, True, 900, ["b"], "pa")]
        shares = sorted(telemetry.shares.collect(), key=lambda r: r["partition"])
        assert [(r["members"], r["lag"], r["rate"]) for r in shares] == [
            (["a", "b"], 4, 1.5), (["b"], None, None),
        ]  # fmt: skip
        assert [r["strategy"] for r in telemetry.plans.collect()] == ["range"]
        report = telemetry.error_report()
        assert report["errors"] == {"malformed-json": len(MALFORMED_LINES)}
    finally:
        telemetry.checked.unpersist()

    # The operator's two sinks feed the pipeline's two sources: the same rates either way, and
    # the capacities the fleet model really had.
    from_kafka = run_rates(spark, [f"kafka://{kafka}/{topic}"], tmp_path / "rk")
    from_files = run_rates(spark, [str(lines)], tmp_path / "rf")
    assert from_kafka["rows_valid"] == from_files["rows_valid"] == len(emitted)
    assert from_files["rows_dropped"] == 0

    def capacities(path: Path) -> dict[str, tuple[str, float]]:
        frame = spark.read.parquet(str(path / "member_capacity"))
        return {
            r["member"]: (r["capacity_source"], round(r["capacity"], 6)) for r in frame.collect()
        }

    measured = capacities(tmp_path / "rk")
    assert measured == capacities(tmp_path / "rf")
    assert set(measured) == set(record.capacity)
    for member, true_capacity in record.capacity.items():
        assert measured[member][0] == "measured", member
        assert measured[member][1] == pytest.approx(true_capacity, rel=0.03), member


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
    from kafka_rebalance_dev.devenv.ports import free_ports, is_listening

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


def rates_outputs(spark: Any, rows: list[dict[str, Any]], directory: Path, carry: bool) -> Any:
    """partition_rates, member_capacity and group_lag of `rows`, per cluster, each as sorted
    tuples without the cluster; `carry=False` is the rates job as it was before sparse rows
    (no `at_every_poll`)."""
    write_files(rows, directory, rows_per_file=100_000)
    partitions = read_telemetry(spark, [str(directory)], cache=False).partitions
    intervals = with_intervals(at_every_poll(partitions) if carry else partitions)
    frames = {
        "partition_rates": partition_rates(intervals),
        "member_capacity": member_capacity(intervals),
        "group_lag": group_lag(intervals),
    }
    out: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
    for name, frame in frames.items():
        assert frame.columns[0] == "cluster"
        for row in frame.collect():
            out.setdefault(row[0], {}).setdefault(name, []).append(tuple(row)[1:])
    for outputs in out.values():
        for values in outputs.values():
            values.sort(key=lambda r: tuple(str(v) for v in r))
    return out


def assert_same_outputs(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        assert len(got[name]) == len(want[name]), name
        for a, b in zip(got[name], want[name], strict=True):
            # Sums of doubles may add up in another order: equal to the last few bits.
            assert [pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for v in a] == list(
                b
            ), name


def test_sparse_rows_give_the_rates_of_their_dense_telemetry(
    pipeline_spark: Any, tmp_path: Path
) -> None:
    dense = [*mostly_idle_rows(), *generate_group(SLOW, 0, [])]
    sparse = sparse_like_the_operator(dense)
    assert len(sparse) < 0.8 * len(dense)  # the idle group's rows mostly left out
    # One input, the sparse copy under another cluster name: two Spark runs, not four.
    rows = [*dense, *({**r, "cluster": "sparse"} for r in sparse)]
    before = rates_outputs(pipeline_spark, rows, tmp_path / "before", carry=False)
    after = rates_outputs(pipeline_spark, rows, tmp_path / "after", carry=True)
    assert_same_outputs(after["local"], before["local"])  # dense: what the job gave before
    assert_same_outputs(after["sparse"], before["local"])
    idle = [r for r in before["local"]["group_lag"] if r[2] == "idle"]
    assert len(idle) == 1 and idle[0][3] == 60 and idle[0][6] == 6  # polls, partitions
    # Without the carry, a sparse poll's total lag sums only the partitions that changed.
    assert before["sparse"]["group_lag"] != before["local"]["group_lag"]


def test_a_row_is_carried_at_most_the_refresh_interval(pipeline_spark: Any, tmp_path: Path) -> None:
    base = {**GOOD_ROW, "group": "g", "policy": "g", "namespace": None}  # a key may be null
    start = GOOD_ROW["ts_ms"]
    polls = [start + k * 100_000 for k in range(7)]  # 0 to 600 s
    rows = [{**base, "ts_ms": polls[0], "partition": 0}]  # then silent: gone, or rows lost
    rows += [{**base, "ts_ms": ts, "partition": 1, "log_end": 10 + k} for k, ts in enumerate(polls)]
    rows.append({**base, "ts_ms": polls[2] + 50_000, "partition": 2})  # first seen mid-way
    write_files(rows, tmp_path / "t", rows_per_file=100)
    partitions = read_telemetry(pipeline_spark, [str(tmp_path / "t")], cache=False).partitions
    carried = at_every_poll(partitions)
    assert carried.columns == partitions.columns
    seen = sorted(
        (r["partition"], (r["ts_ms"] - start) // 1000, r["log_end"]) for r in carried.collect()
    )
    assert REFRESH_MS == 300_000
    assert seen == sorted(
        [
            *[(0, s, 10) for s in (0, 100, 200, 250, 300)],  # to 300 s inclusive, then unknown
            *[(1, k * 100, 10 + k) for k in range(7)],
            (1, 250, 12),  # the 250 s poll (partition 2's first row) carries the 200 s row
            *[(2, s, 10) for s in (250, 300, 400, 500)],  # never before its first row
        ]
    )


GOLDEN = Path(__file__).resolve().parent.parent / "data" / "pipeline_rates_golden.json"


def test_the_rates_job_gives_its_golden_outputs(pipeline_spark: Any, tmp_path: Path) -> None:
    """Every output of `rates` on a fixed mixed fleet (dense, sparse, null keys, plan rows, bad
    rows) as the job gave them before it was made faster (tests/data, written by that job):
    same columns and types, same rows; doubles equal to the last bits (sums may add up in
    another order), everything else exactly."""
    import pyarrow.parquet as pq

    write_files(rates_regression_rows(), tmp_path / "t", rows_per_file=3000)
    write_bad_rows(tmp_path / "t")
    run_rates(pipeline_spark, [str(tmp_path / "t")], tmp_path / "rates")
    golden = json.loads(GOLDEN.read_text())
    got_errors = json.loads((tmp_path / "rates" / "schema_errors.json").read_text())
    assert got_errors == golden.pop("schema_errors")
    for name, want in golden.items():
        table = pq.read_table(tmp_path / "rates" / name)
        assert [[f.name, str(f.type)] for f in table.schema] == want["columns"], name
        rows = [list(r.values()) for r in table.to_pylist()]
        rows.sort(key=lambda r: [(v is None, str(v)) for v in r])
        assert len(rows) == len(want["rows"]), name
        for got, expected in zip(rows, want["rows"], strict=True):
            assert got == [
                pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for v in expected
            ], name


def assert_golden_rows(path: Path, columns: list[Any], want: list[list[Any]], name: str) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert [[f.name, str(f.type)] for f in table.schema] == columns, name
    rows = [list(r.values()) for r in table.to_pylist()]
    rows.sort(key=lambda r: [(v is None, str(v)) for v in r])
    assert len(rows) == len(want), name
    for got, expected in zip(rows, want, strict=True):
        assert got == [
            pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for v in expected
        ], name


def test_dense_telemetry_skips_the_rebuild_and_gives_the_golden_outputs(
    pipeline_spark: Any, tmp_path: Path
) -> None:
    """The golden fleet without its sparse cluster: every partition has a row at every poll,
    so the job windows the rows as they are (no poll cells) and must give the golden rows of
    those groups; the sparse cluster alone misses polls."""
    rows = rates_regression_rows()
    write_files([r for r in rows if r.get("cluster") != "sparse"], tmp_path / "dense")
    write_files([r for r in rows if r.get("cluster") == "sparse"], tmp_path / "sparse")

    def misses(directory: Path) -> bool:
        partitions = read_telemetry(pipeline_spark, [str(directory)], cache=False).partitions
        return misses_polls(with_intervals(with_partition_hash(partitions).repartition(*KEY)))

    assert not misses(tmp_path / "dense")
    assert misses(tmp_path / "sparse")
    run_rates(pipeline_spark, [str(tmp_path / "dense")], tmp_path / "rates")
    golden = json.loads(GOLDEN.read_text())
    for name in ("partition_rates", "member_capacity", "group_lag"):
        want = [r for r in golden[name]["rows"] if r[0] != "sparse"]
        assert_golden_rows(tmp_path / "rates" / name, golden[name]["columns"], want, name)


def test_the_backtest_replays_share_plans_against_simple(
    pipeline_spark: Any, tmp_path: Path
) -> None:
    """Share telemetry (one hot partition, `simple`'s shape) beside a consumer group's, through
    rates, backtest and recommend: the planned candidate's simulated backlog is at most half of
    `simple`'s, and the recommendation is a share policy's patch."""
    truth: list[GroupTruth] = []
    share = list(generate_share_group(ShareFleetSpec(polls=40), 0, truth))
    consumer = list(generate_group(uniform_fleet(polls=12), 1, truth))
    telemetry = tmp_path / "telemetry"
    write_files([*share, *consumer], telemetry, rows_per_file=200)

    rates = run_rates(pipeline_spark, [str(telemetry)], tmp_path / "rates")
    assert rates["rows_valid"] == len(share) + len(consumer) and rates["rows_dropped"] == 0
    members = {
        r["member"]
        for r in pipeline_spark.read.parquet(str(tmp_path / "rates" / "member_capacity")).collect()
    }
    assert members == set(truth[1].members)  # share rows are counted valid, never measured here

    backtest = run_backtest(
        pipeline_spark, [str(telemetry)], tmp_path / "rates", tmp_path / "bt", grid="strategies"
    )
    assert backtest["groups"] == 2 and backtest["replay_errors"] == 0
    assert backtest["candidates_replayed"] == len(share_grid()) + len(strategies_grid("range"))
    out = pipeline_spark.read.parquet(str(tmp_path / "bt" / "backtest"))
    rows = {r["candidate"]: r.asDict() for r in out.where(out.group_type == "share").collect()}
    assert set(rows) == {c.id for c in share_grid()}
    simple = rows["simple"]
    assert simple["is_current"] and json.loads(simple["members_per_partition_json"]) == [1, 1, 1, 1]

    summary = run_recommend(tmp_path / "bt", tmp_path / "rec")
    assert summary["groups"] == 2
    recs = {
        r["group"]: r for r in json.loads((tmp_path / "rec" / "recommendations.json").read_text())
    }
    chosen = recs[truth[0].group]
    assert chosen["change"] is True and chosen["strategy"] == "share"
    planned = rows[chosen["recommended"]]
    assert json.loads(planned["members_per_partition_json"])[0] >= 2
    assert planned["mean_lag"] <= 0.5 * simple["mean_lag"]
    assert planned["max_lag"] <= 0.5 * simple["max_lag"]
    patch = yaml.safe_load(
        (tmp_path / "rec" / "patches" / truth[0].namespace / f"{truth[0].policy}.yaml").read_text()
    )
    assert patch["spec"]["load"]["targetDrainSeconds"] == planned["drain_s"]
    print(
        f"\nshare backtest: simple mean/max backlog "
        f"{simple['mean_lag']:.0f}/{simple['max_lag']:.0f}, {chosen['recommended']}: "
        f"{planned['mean_lag']:.0f}/{planned['max_lag']:.0f}, "
        f"moves {planned['moves']}, backtest {backtest['seconds']}s"
    )


def test_the_backtest_replays_streams_task_plans_against_sticky(
    pipeline_spark: Any, tmp_path: Path
) -> None:
    """Streams telemetry (one hot task on a slow instance, Kafka's `sticky` shape), with broken
    streams rows, beside a consumer group's, through rates, backtest and recommend: the bad rows
    are counted by reason, the operator's task planner's simulated backlog is at most half of
    `sticky`'s, and the recommendation is a streams policy's patch."""
    truth: list[GroupTruth] = []
    streams = list(generate_streams_group(StreamsFleetSpec(polls=40), 0, truth))
    consumer = list(generate_group(uniform_fleet(polls=12), 1, truth))
    bad = [{**streams[0], "subtopology": ""}, {**streams[1], "rate": -1.0}]
    telemetry = tmp_path / "telemetry"
    write_files([*streams, *consumer, *bad], telemetry, rows_per_file=200)

    rates = run_rates(pipeline_spark, [str(telemetry)], tmp_path / "rates")
    assert rates["rows_valid"] == len(streams) + len(consumer) and rates["rows_dropped"] == 2
    errors = json.loads((tmp_path / "rates" / "schema_errors.json").read_text())["errors"]
    assert errors == {"missing-subtopology": 1, "negative-rate": 1}
    members = {
        r["member"]
        for r in pipeline_spark.read.parquet(str(tmp_path / "rates" / "member_capacity")).collect()
    }
    assert members == set(truth[1].members)  # streams rows are counted valid, never measured here

    backtest = run_backtest(
        pipeline_spark, [str(telemetry)], tmp_path / "rates", tmp_path / "bt", grid="strategies"
    )
    assert backtest["groups"] == 2 and backtest["replay_errors"] == 0
    assert backtest["candidates_replayed"] == len(streams_grid()) + len(strategies_grid("range"))
    out = pipeline_spark.read.parquet(str(tmp_path / "bt" / "backtest"))
    rows = {r["candidate"]: r.asDict() for r in out.where(out.group_type == "streams").collect()}
    assert set(rows) == {c.id for c in streams_grid()}
    sticky = rows["sticky"]
    assert sticky["is_current"] and sticky["moves"] == 0 and sticky["partitions"] == 8
    capacity = json.loads(sticky["capacity_json"])  # measured from the rows' busy intervals
    slow = capacity.pop(truth[0].slow_member)
    assert slow < 0.5 * min(capacity.values())

    summary = run_recommend(tmp_path / "bt", tmp_path / "rec")
    assert summary["groups"] == 2
    recs = {
        r["group"]: r for r in json.loads((tmp_path / "rec" / "recommendations.json").read_text())
    }
    chosen = recs[truth[0].group]
    assert chosen["change"] is True and chosen["strategy"] == "streams"
    planned = rows[chosen["recommended"]]
    assert planned["weights"] == "adaptive" and planned["moves"] >= 1
    assert planned["mean_lag"] <= 0.5 * sticky["mean_lag"]
    assert planned["max_lag"] < sticky["max_lag"]
    patch = yaml.safe_load(
        (tmp_path / "rec" / "patches" / truth[0].namespace / f"{truth[0].policy}.yaml").read_text()
    )
    assert patch["spec"]["strategy"] == "lag-aware"
    assert patch["spec"]["members"] == {"weightFrom": "adaptive"}
    assert patch["spec"]["load"]["targetDrainSeconds"] == planned["drain_s"]
    report = (tmp_path / "rec" / "report.html").read_text()
    assert f"<td>{truth[0].group}</td><td>streams</td>" in report
    print(
        f"\nstreams backtest: sticky mean/max backlog "
        f"{sticky['mean_lag']:.0f}/{sticky['max_lag']:.0f}, {chosen['recommended']}: "
        f"{planned['mean_lag']:.0f}/{planned['max_lag']:.0f}, moves {planned['moves']}, "
        f"time over SLO {sticky['time_over_slo_s']:.0f}s -> {planned['time_over_slo_s']:.0f}s, "
        f"backtest {backtest['seconds']}s"
    )
