"""`pipeline backtest`: every group's history replayed under every candidate, on Spark.

Spark groups the telemetry by consumer group and hands each group's rows to `replay` through
`applyInPandas`; capacities and current strategies (small tables from `pipeline rates`) travel
to the executors inside the function's closure. Share groups (rows of the share kinds) go the
same way to `share_replay`, and streams groups (`streams` rows) to `streams_replay`; neither
needs anything from `rates`; all write one output table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_rebalance_pipeline.progress import QUIET, Progress
from kafka_rebalance_pipeline.rates_job import KEY
from kafka_rebalance_pipeline.replay import backtest_group, history_from_rows
from kafka_rebalance_pipeline.share_replay import backtest_share_group, share_history_from_rows
from kafka_rebalance_pipeline.spark_io import read_telemetry, write_json
from kafka_rebalance_pipeline.streams_replay import (
    backtest_streams_group,
    streams_history_from_rows,
)

OUTPUT_SCHEMA = (
    "cluster string, namespace string, policy string, `group` string, candidate string, "
    "strategy string, weights string, min_improvement double, max_moves string, "
    "cooldown_s double, is_current boolean, current_strategy string, partitions int, polls int, "
    "error string, utilisation_json string, weights_json string, capacity_json string, "
    "lag_series_json string, max_lag double, p99_lag double, mean_lag double, "
    "time_over_slo_s double, duration_s double, moves int, epochs int, plans int, "
    "group_type string, drain_s double, members_per_partition_json string"
)
OUTPUT_COLUMNS = [c.split()[0].strip("`") for c in OUTPUT_SCHEMA.split(", ")]


def _capacities(spark: Any, rates_dir: Path) -> dict[tuple[str, ...], dict[str, float]]:
    rows = spark.read.parquet(str(rates_dir / "member_capacity")).collect()
    table: dict[tuple[str, ...], dict[str, float]] = {}
    for row in rows:
        key = tuple(row[k] or "" for k in KEY)
        if row["capacity"] is not None and row["capacity"] > 0:
            table.setdefault(key, {})[row["member"]] = float(row["capacity"])
    return table


def _current(spark: Any, rates_dir: Path) -> dict[str, str]:
    path = rates_dir / "group_plans"
    if not path.exists():
        return {}
    return {
        r["group"]: r["current_strategy"]
        for r in spark.read.parquet(str(path)).collect()
        if r["current_strategy"]
    }


def make_group_function(
    capacities: dict[tuple[str, ...], dict[str, float]],
    current: dict[str, str],
    default_strategy: str,
    handoff_s: float,
    slo_s: float,
    grid: str = "full",
    replayed: Any = None,
) -> Any:
    """The applyInPandas function: one group's rows in, one row per candidate out. `replayed`:
    a Spark accumulator counting the groups done (the driver sees it as tasks finish)."""

    def run(key: tuple[Any, ...], rows: Any) -> Any:
        import pandas as pd

        names = dict(zip(KEY, (k or "" for k in key), strict=True))
        capacity = capacities.get(tuple(names[k] for k in KEY), {})
        strategy = current.get(names["group"], default_strategy)
        history = history_from_rows(names, rows, capacity, strategy)
        out = backtest_group(history, grid, handoff_s=handoff_s, slo_s=slo_s)
        if replayed is not None:
            replayed.add(1)
        return pd.DataFrame(out, columns=OUTPUT_COLUMNS)

    return run


def make_share_function(slo_s: float, replayed: Any = None) -> Any:
    """The applyInPandas function for share groups: one group's share rows in, one row per
    share candidate out (`share_replay.share_grid`)."""

    def run(key: tuple[Any, ...], rows: Any) -> Any:
        import pandas as pd

        names = dict(zip(KEY, (k or "" for k in key), strict=True))
        history = share_history_from_rows(names, rows.to_dict("records"))
        out = backtest_share_group(history, slo_s=slo_s)
        if replayed is not None:
            replayed.add(1)
        return pd.DataFrame(out, columns=OUTPUT_COLUMNS)

    return run


def make_streams_function(handoff_s: float, slo_s: float, replayed: Any = None) -> Any:
    """The applyInPandas function for streams groups: one group's streams rows in, one row per
    streams candidate out (`streams_replay.streams_grid`)."""

    def run(key: tuple[Any, ...], rows: Any) -> Any:
        import pandas as pd

        names = dict(zip(KEY, (k or "" for k in key), strict=True))
        history = streams_history_from_rows(names, rows.to_dict("records"))
        out = backtest_streams_group(history, handoff_s=handoff_s, slo_s=slo_s)
        if replayed is not None:
            replayed.add(1)
        return pd.DataFrame(out, columns=OUTPUT_COLUMNS)

    return run


def run_backtest(
    spark: Any,
    sources: Sequence[str],
    rates_dir: Path,
    out: Path,
    *,
    handoff_s: float = 10.0,
    slo_s: float = 60.0,
    default_strategy: str = "range",
    groups: Sequence[str] = (),
    grid: str = "full",
    progress: Progress = QUIET,
    replayed: Any = None,
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    progress.stage("reading telemetry, capacities and current strategies")
    telemetry = read_telemetry(spark, sources, cache=False)
    frame = telemetry.partitions.select(
        *KEY, "ts_ms", "topic", "partition", "log_end", "lag", "owner"
    )
    if groups:
        frame = frame.where(F.col("group").isin(list(groups)))
    function = make_group_function(
        _capacities(spark, rates_dir),
        _current(spark, rates_dir),
        default_strategy,
        handoff_s,
        slo_s,
        grid,
        replayed,
    )
    results = frame.groupBy(*KEY).applyInPandas(function, schema=OUTPUT_SCHEMA)
    shares = telemetry.shares
    if groups:
        shares = shares.where(F.col("group").isin(list(groups)))
    streams = telemetry.streams
    if groups:
        streams = streams.where(F.col("group").isin(list(groups)))
    results = results.unionByName(
        shares.groupBy(*KEY).applyInPandas(
            make_share_function(slo_s, replayed), schema=OUTPUT_SCHEMA
        )
    ).unionByName(
        streams.groupBy(*KEY).applyInPandas(
            make_streams_function(handoff_s, slo_s, replayed), schema=OUTPUT_SCHEMA
        )
    )
    progress.stage("replaying groups")
    results.write.mode("overwrite").parquet(str(out / "backtest"))
    progress.stage("summarising")
    written = spark.read.parquet(str(out / "backtest"))
    counts = written.agg(
        F.countDistinct(*KEY).alias("groups"),
        F.count("*").alias("rows"),
        F.sum(F.col("error").isNotNull().cast("int")).alias("errors"),
    ).first()
    elapsed = time.perf_counter() - started
    summary = {
        "sources": list(sources),
        "groups": int(counts["groups"]),
        "candidates_replayed": int(counts["rows"]),
        "replay_errors": int(counts["errors"] or 0),
        "seconds": round(elapsed, 3),
        "groups_per_minute": round(counts["groups"] * 60.0 / elapsed, 2) if elapsed else None,
        "grid": grid,
        "handoff_s": handoff_s,
        "slo_s": slo_s,
    }
    write_json(out / "backtest_summary.json", summary)
    return summary
