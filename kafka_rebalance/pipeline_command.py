"""`kafka-rebalance pipeline ...`: the fleet data pipeline (generate, rates, backtest, recommend).

Spark runs `local[*]` unless `--master` names a cluster (spark://host:7077). Inputs are
JSON-lines or Parquet paths, or `kafka://BOOTSTRAP/TOPIC` for the telemetry topic.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kafka_rebalance_common.wire.telemetry import TELEMETRY_TOPIC


def _spark_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--shuffle-partitions", type=int, default=None, help="spark.sql.shuffle.partitions"
    )
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting"
    )


def _inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        required=True,
        help="telemetry: a JSON-lines/Parquet file or directory, or kafka://BOOTSTRAP/TOPIC "
        "(repeatable)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pipeline",
        help="fleet data pipeline on Spark: generate, rates, backtest, recommend",
        description="Batch jobs over operator telemetry (see docs/pipeline.md).",
    )
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")

    gen = steps.add_parser("generate", help="synthetic fleet telemetry (files or Kafka)")
    gen.add_argument("--groups", type=int, default=20)
    gen.add_argument("--polls", type=int, default=240)
    gen.add_argument("--interval", type=float, default=30.0, help="seconds between polls")
    gen.add_argument("--partitions", default="8-32", help="partitions per group, MIN-MAX")
    gen.add_argument("--members", default="2-6", help="members per group, MIN-MAX")
    gen.add_argument("--slow-fraction", type=float, default=0.5)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--strategy", default="range", help="the fleet's current strategy")
    gen.add_argument("--out", "-o", type=Path, help="directory for part-*.jsonl files")
    gen.add_argument("--kafka", metavar="BOOTSTRAP", help="produce to this Kafka cluster")
    gen.add_argument("--topic", default=TELEMETRY_TOPIC)
    gen.add_argument("--truth", type=Path, help="write the generator's ground truth (JSON)")
    gen.add_argument(
        "--share-groups",
        type=int,
        default=0,
        help="also this many share groups with one hot partition on `simple` (docs/pipeline.md)",
    )
    gen.add_argument(
        "--streams-groups",
        type=int,
        default=0,
        help="also this many streams groups with one hot task on a slow instance on `sticky`",
    )
    gen.set_defaults(handler=run_generate)

    rates = steps.add_parser("rates", help="rates, measured capacity, lag stats -> Parquet")
    _inputs(rates)
    rates.add_argument("--out", "-o", type=Path, required=True)
    rates.add_argument("--slo", type=float, default=60.0, help="time-lag SLO in seconds")
    rates.add_argument("--backlog-seconds", type=float, default=5.0)
    rates.add_argument("--min-saturated", type=int, default=3)
    _spark_options(rates)
    _progress_option(rates)
    rates.set_defaults(handler=run_rates)

    back = steps.add_parser("backtest", help="replay every group under every candidate")
    _inputs(back)
    back.add_argument("--rates", type=Path, required=True, help="output dir of `pipeline rates`")
    back.add_argument("--out", "-o", type=Path, required=True)
    back.add_argument(
        "--handoff", type=float, default=10.0, help="seconds a moved partition pauses"
    )
    back.add_argument("--slo", type=float, default=60.0)
    back.add_argument("--default-strategy", default="range")
    back.add_argument("--group", action="append", default=[], help="only these groups")
    back.add_argument(
        "--grid",
        choices=("full", "strategies"),
        default="full",
        help="full: every strategy and the option grid (32 candidates); strategies: one per "
        "strategy, with and without capacity weights (9)",
    )
    _spark_options(back)
    _progress_option(back)
    back.set_defaults(handler=run_backtest)

    rec = steps.add_parser("recommend", help="patches (YAML) and an HTML report")
    rec.add_argument("--backtest", type=Path, required=True, help="output dir of `backtest`")
    rec.add_argument("--out", "-o", type=Path, required=True)
    rec.add_argument(
        "--min-slo-gain-polls",
        type=float,
        default=3.0,
        help="change only for this many poll intervals less over the SLO (or the lag margins)",
    )
    rec.add_argument("--min-lag-gain", type=float, default=0.2)
    rec.add_argument("--min-lag-gain-records", type=float, default=100.0)
    rec.add_argument("--plots", type=int, default=20, help="groups with plots in the report")
    _progress_option(rec)
    rec.set_defaults(handler=run_recommend)


def _progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print only the JSON summary (no progress on stderr, as when it is not a terminal)",
    )


@contextlib.contextmanager
def _progress(args: argparse.Namespace) -> Iterator[Any]:
    """Stages and counts on stderr for a person at a terminal; QUIET otherwise."""
    from kafka_rebalance_pipeline.progress import QUIET

    from kafka_rebalance.progress_line import ProgressLine, wanted

    if not wanted(sys.stderr, args.json):
        yield QUIET
        return
    line = ProgressLine(sys.stderr)
    try:
        yield line
    finally:
        line.close()


def _range(text: str, name: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        pair = (int(low), int(high or low))
    except ValueError:
        raise SystemExit(f"--{name}: expected MIN-MAX, got {text!r}") from None
    if pair[0] < 1 or pair[1] < pair[0]:
        raise SystemExit(f"--{name}: expected 1 <= MIN <= MAX, got {text!r}")
    return pair


def _print(summary: Any) -> None:
    print(json.dumps(summary, indent=2, sort_keys=True, default=str))


def run_generate(args: argparse.Namespace) -> int:
    from kafka_rebalance_pipeline.generate import (
        FleetSpec,
        GroupTruth,
        ShareFleetSpec,
        StreamsFleetSpec,
        generate_fleet,
        generate_share_fleet,
        generate_streams_fleet,
    )
    from kafka_rebalance_pipeline.sinks import write_files, write_kafka

    if not args.out and not args.kafka:
        print("pipeline generate: give --out DIR and/or --kafka BOOTSTRAP", file=sys.stderr)
        return 2
    for flag, value in (
        ("--share-groups", args.share_groups),
        ("--streams-groups", args.streams_groups),
    ):
        if value < 0:
            print(f"pipeline generate: {flag} must be >= 0", file=sys.stderr)
            return 2
    shares = ShareFleetSpec(groups=args.share_groups, polls=args.polls, interval_s=args.interval)
    streams = StreamsFleetSpec(
        groups=args.streams_groups, polls=args.polls, interval_s=args.interval
    )

    def fleet(truth: list[GroupTruth]) -> Iterator[dict[str, Any]]:
        yield from generate_fleet(spec, truth)
        yield from generate_share_fleet(shares, truth)
        yield from generate_streams_fleet(streams, truth)

    spec = FleetSpec(
        groups=args.groups,
        polls=args.polls,
        interval_s=args.interval,
        partitions=_range(args.partitions, "partitions"),
        members=_range(args.members, "members"),
        slow_fraction=args.slow_fraction,
        seed=args.seed,
        current_strategy=args.strategy,
    )
    started = time.perf_counter()
    summary: dict[str, Any] = {}
    truth: list[GroupTruth] = []
    if args.out:
        summary["file_rows"] = write_files(fleet(truth), args.out)
        summary["out"] = str(args.out)
    if args.kafka:
        summary["kafka_rows"] = write_kafka(
            fleet([] if args.out else truth), args.kafka, args.topic
        )
        summary["topic"] = args.topic
    summary["seconds"] = round(time.perf_counter() - started, 3)
    summary["groups"] = len(truth)
    summary["share_groups"] = args.share_groups
    summary["streams_groups"] = args.streams_groups
    summary["slow_members"] = sum(t.slow_member is not None for t in truth)
    if args.truth:
        args.truth.parent.mkdir(parents=True, exist_ok=True)
        args.truth.write_text(json.dumps([vars(t) for t in truth], indent=2) + "\n")
    _print(summary)
    return 0


def _session(args: argparse.Namespace, app: str) -> Any:
    from kafka_rebalance_pipeline.spark_io import build_session

    return build_session(
        master=args.master,
        app_name=app,
        shuffle_partitions=args.shuffle_partitions,
        driver_memory=args.driver_memory,
        conf=args.conf,
        jars=_connector_jars(),
    )


def _connector_jars() -> list[Path]:
    """Spark's Kafka connector: `$KAFKA_REBALANCE_SPARK_JARS` (comma-separated paths) when set,
    else the jars `kafka-rebalance dev provision` put in the cache, else none (Spark's own
    `--conf spark.jars=...` still applies)."""
    listed = os.environ.get("KAFKA_REBALANCE_SPARK_JARS")
    if listed is not None:
        return [Path(p) for p in listed.split(",") if p]
    try:
        from kafka_rebalance_dev.devenv.toolchain import toolchain
    except ModuleNotFoundError as error:
        if error.name != "kafka_rebalance_dev":
            raise
        return []  # no dev harness (kafka-rebalance-dev), so nothing was provisioned
    try:
        return toolchain().spark_jars
    except OSError:  # an installed wheel has no versions.toml and no provisioned cache
        return []


def run_rates(args: argparse.Namespace) -> int:
    from kafka_rebalance_pipeline.rates_job import run_rates as job

    from kafka_rebalance.progress_line import SparkTasks

    with _progress(args) as progress:
        progress.stage("starting Spark")
        spark = _session(args, "kafka-rebalance-rates")
        try:
            with SparkTasks(spark, progress):
                summary = job(
                    spark,
                    args.input,
                    args.out,
                    args.slo,
                    args.backlog_seconds,
                    args.min_saturated,
                    progress=progress,
                )
        finally:
            spark.stop()
    _print(summary)
    return 0


def run_backtest(args: argparse.Namespace) -> int:
    from kafka_rebalance_pipeline.backtest_job import run_backtest as job

    from kafka_rebalance.progress_line import SparkTasks

    with _progress(args) as progress:
        progress.stage("starting Spark")
        spark = _session(args, "kafka-rebalance-backtest")
        try:
            replayed = spark.sparkContext.accumulator(0)
            with SparkTasks(spark, progress, replayed, "groups replayed"):
                summary = job(
                    spark,
                    args.input,
                    args.rates,
                    args.out,
                    handoff_s=args.handoff,
                    slo_s=args.slo,
                    default_strategy=args.default_strategy,
                    groups=args.group,
                    grid=args.grid,
                    progress=progress,
                    replayed=replayed,
                )
        finally:
            spark.stop()
    _print(summary)
    return 0


def run_recommend(args: argparse.Namespace) -> int:
    from kafka_rebalance_pipeline.recommend import Margins
    from kafka_rebalance_pipeline.recommend_job import run_recommend as job

    margins = Margins(
        min_slo_gain_polls=args.min_slo_gain_polls,
        min_lag_gain=args.min_lag_gain,
        min_lag_gain_records=args.min_lag_gain_records,
    )
    with _progress(args) as progress:
        summary = job(args.backtest, args.out, margins, args.plots, progress=progress)
    _print(summary)
    return 0
