"""`pipeline rates`: per-partition rates, per-member measured capacity, per-group lag stats.

Measured capacity is what a member consumed per second in intervals where it was backlogged at
both ends (then it was saturated throughout, so its consumption is its capacity). A member never
seen backlogged gets its peak observed rate as a lower bound, flagged `peak-lower-bound`.
All Spark SQL (no Python per row): this is the part that must scale with rows.

The telemetry is sparse (a partition has a row only when it changed, and every 300 s); every
aggregate here is over one row per partition per poll, so the rows are first carried forward
to every poll of their group (`polls.at_every_poll`). Dense telemetry passes through unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_rebalance_pipeline.polls import at_every_poll
from kafka_rebalance_pipeline.progress import QUIET, Progress
from kafka_rebalance_pipeline.spark_io import read_telemetry, write_json

KEY = ["cluster", "namespace", "policy", "group"]
# The values of a partition row that the intervals use (the others are validated, not needed).
INTERVAL_VALUES = ["log_end", "committed", "lag", "time_lag_s", "owner"]
# Spark settings for the job's own queries, restored after it. The windowed rows are cached
# clustered by the group key and sorted by partition and time (`polls.at_every_poll`); keeping
# that layout on the cached plan lets every aggregation below run without another shuffle (all
# group by the group key and more), and the per-partition ones stream over the sorted rows
# instead of filling a hash map that falls back to sorting past 128 keys.
PLANNING = {
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "false",
    "spark.sql.execution.replaceHashWithSortAgg": "true",
}


def with_intervals(partitions: Any) -> Any:
    """Each partition row with the interval that ends at it: dt, produced, consumed, prev lag.
    Consumption counts only when the owner did not change across the interval. Expects one row
    per partition per poll (`polls.at_every_poll`): the interval is from the partition's
    previous row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(*KEY, "topic", "partition").orderBy("ts_ms")
    prev = {c: F.lag(c).over(window) for c in ("ts_ms", "log_end", "committed", "lag", "owner")}
    dt = (F.col("ts_ms") - prev["ts_ms"]) / 1000.0
    produced = F.col("log_end") - prev["log_end"]
    consumed = F.col("committed") - prev["committed"]
    same_owner = prev["owner"] == F.col("owner")
    return partitions.select(
        *KEY,
        "topic",
        "partition",
        "ts_ms",
        "lag",
        "time_lag_s",
        "owner",
        "log_end",
        F.when(dt > 0, dt).alias("dt"),
        F.when(produced >= 0, produced).alias("produced"),
        F.when((consumed >= 0) & same_owner, consumed).alias("consumed"),
        prev["lag"].alias("prev_lag"),
    )


def partition_rates(intervals: Any) -> Any:
    from pyspark.sql import functions as F

    rate = F.col("produced") / F.col("dt")
    return intervals.groupBy(*KEY, "topic", "partition").agg(
        F.count("*").alias("polls"),
        F.min("ts_ms").alias("first_ts_ms"),
        F.max("ts_ms").alias("last_ts_ms"),
        (F.sum("produced") / F.sum(F.when(F.col("produced").isNotNull(), F.col("dt")))).alias(
            "production_rate"
        ),
        F.percentile_approx(rate, 0.95).alias("production_rate_p95"),
        F.max(rate).alias("production_rate_max"),
        (F.sum("consumed") / F.sum(F.when(F.col("consumed").isNotNull(), F.col("dt")))).alias(
            "consumption_rate"
        ),
        F.max("lag").alias("max_lag"),
        F.max_by("lag", "ts_ms").alias("last_lag"),
        F.max_by("owner", "ts_ms").alias("last_owner"),
    )


def member_capacity(intervals: Any, backlog_seconds: float = 5.0, min_saturated: int = 3) -> Any:
    """Per member: measured capacity (median rate while saturated) or the peak lower bound."""
    from pyspark.sql import functions as F

    per_interval = (
        intervals.where(F.col("owner").isNotNull() & F.col("dt").isNotNull())
        .groupBy(*KEY, "owner", "ts_ms")
        .agg(
            F.sum("consumed").alias("consumed"),
            F.max("dt").alias("dt"),
            F.sum("prev_lag").alias("lag_start"),
            F.sum("lag").alias("lag_end"),
            F.count("*").alias("partitions"),
        )
        .withColumn("rate", F.col("consumed") / F.col("dt"))
    )
    threshold = F.greatest(F.lit(1.0), F.col("rate") * backlog_seconds)
    saturated = (F.col("lag_start") >= threshold) & (F.col("lag_end") >= threshold)
    flagged = per_interval.withColumn("saturated", saturated)
    return (
        flagged.groupBy(*KEY, F.col("owner").alias("member"))
        .agg(
            F.count("*").alias("intervals"),
            F.sum(F.col("saturated").cast("int")).alias("saturated_intervals"),
            F.percentile_approx(F.when(F.col("saturated"), F.col("rate")), 0.5).alias(
                "measured_capacity"
            ),
            F.max("rate").alias("peak_rate"),
            F.avg("rate").alias("mean_rate"),
            F.max("partitions").alias("max_partitions"),
        )
        .withColumn(
            "capacity",
            F.when(
                F.col("saturated_intervals") >= min_saturated, F.col("measured_capacity")
            ).otherwise(F.col("peak_rate")),
        )
        .withColumn(
            "capacity_source",
            F.when(F.col("saturated_intervals") >= min_saturated, F.lit("measured")).otherwise(
                F.lit("peak-lower-bound")
            ),
        )
    )


def group_lag(intervals: Any, slo_s: float = 60.0) -> Any:
    from pyspark.sql import functions as F

    per_poll = intervals.groupBy(*KEY, "ts_ms").agg(
        F.sum("lag").alias("total_lag"),
        F.max("time_lag_s").alias("worst_time_lag_s"),
        F.max("dt").alias("dt"),
        F.count("*").alias("partitions"),
        # countDistinct would plan an Expand and one more aggregation and shuffle; the size of
        # the set of non-null owners is the same number.
        F.size(F.collect_set("owner")).cast("bigint").alias("members"),
    )
    return per_poll.groupBy(*KEY).agg(
        F.count("*").alias("polls"),
        F.min("ts_ms").alias("first_ts_ms"),
        F.max("ts_ms").alias("last_ts_ms"),
        F.max("partitions").alias("partitions"),
        F.max("members").alias("members"),
        F.max("total_lag").alias("max_lag"),
        F.percentile_approx("total_lag", 0.99).alias("p99_lag"),
        F.avg("total_lag").alias("mean_lag"),
        F.coalesce(F.sum(F.when(F.col("worst_time_lag_s") > slo_s, F.col("dt"))), F.lit(0.0)).alias(
            "time_over_slo_s"
        ),
    )


def group_plans(plans: Any) -> Any:
    """The current strategy of each group: the strategy of its latest plan row."""
    from pyspark.sql import functions as F

    return plans.groupBy("group").agg(
        F.max_by("strategy", "ts_ms").alias("current_strategy"),
        F.max("epoch").alias("last_epoch"),
        F.count("*").alias("plans"),
        F.coalesce(F.sum("moves"), F.lit(0)).alias("moves"),
    )


def run_rates(
    spark: Any,
    sources: Sequence[str],
    out: Path,
    slo_s: float = 60.0,
    backlog_seconds: float = 5.0,
    min_saturated: int = 3,
    progress: Progress = QUIET,
) -> dict[str, Any]:
    """Read, validate, aggregate, write Parquet; returns the summary (also in summary.json)."""
    from pyspark import StorageLevel

    started = time.perf_counter()
    progress.stage("reading and validating telemetry")
    telemetry = read_telemetry(spark, sources)
    saved = {key: spark.conf.get(key, None) for key in PLANNING}
    for key, value in PLANNING.items():
        spark.conf.set(key, value)
    try:
        # Three aggregations read the same windowed rows: compute the window once, over the rows
        # carried forward to every poll (sparse telemetry), and only the columns they use.
        rows = telemetry.partitions.select(*KEY, "topic", "partition", "ts_ms", *INTERVAL_VALUES)
        intervals = with_intervals(at_every_poll(rows)).persist(StorageLevel.MEMORY_AND_DISK)
        outputs = {
            "partition_rates": partition_rates(intervals),
            "member_capacity": member_capacity(intervals, backlog_seconds, min_saturated),
            "group_lag": group_lag(intervals, slo_s),
            "group_plans": group_plans(telemetry.plans),
        }
        for name, frame in outputs.items():
            progress.stage(f"computing and writing {name}")
            frame.write.mode("overwrite").parquet(str(out / name))
    finally:
        for key, previous in saved.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)
    progress.stage("schema error report")
    errors = telemetry.error_report()
    write_json(out / "schema_errors.json", errors)
    intervals.unpersist()
    telemetry.checked.unpersist()
    elapsed = time.perf_counter() - started
    summary = {
        "sources": list(sources),
        "rows_total": errors["rows_total"],
        "rows_valid": errors["rows_valid"],
        "rows_dropped": errors["rows_dropped"],
        "seconds": round(elapsed, 3),
        "rows_per_second": round(errors["rows_total"] / elapsed, 1) if elapsed > 0 else None,
        "outputs": sorted(outputs),
        "slo_s": slo_s,
    }
    write_json(out / "summary.json", summary)
    return summary
