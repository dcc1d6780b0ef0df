"""`pipeline rates`: per-partition rates, per-member measured capacity, per-group lag stats.

Measured capacity is what a member consumed per second in intervals where it was backlogged at
both ends (then it was saturated throughout, so its consumption is its capacity). A member never
seen backlogged gets its peak observed rate as a lower bound, flagged `peak-lower-bound`.
All Spark SQL (no Python per row): this is the part that must scale with rows.

The telemetry is sparse (a partition has a row only when it changed, and every 300 s); every
aggregate here is over one row per partition per poll, so the rows are carried forward to
every poll of their group (`polls.at_every_poll`) when some partition misses a poll
(`misses_polls`); dense telemetry, which misses none, is windowed as it is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_rebalance_common.wire.telemetry import PREVIOUS

from kafka_rebalance_pipeline.carried import (
    CHAIN,
    KEY,
    PREV_TS,
    carried_intervals,
    chain_columns,
    chained_groups,
    interval_columns,
)
from kafka_rebalance_pipeline.polls import at_every_poll
from kafka_rebalance_pipeline.progress import QUIET, Progress
from kafka_rebalance_pipeline.schema import REPLAYED_KINDS
from kafka_rebalance_pipeline.spark_io import Telemetry, read_raw, with_errors, write_json

PARTITION_HASH = "_pk"
# NULL on a valid partition row; "plan" on a valid plan row; "share" on a valid share row (of
# either share kind: counted valid, read by the backtest only); else why the row is dropped.
SIDE = "_side"
PLAN = "plan"
SHARE_SIDE = "share"
# The plan rows' own values (group_plans), NULL on every other row.
PLAN_VALUES = ["strategy", "epoch", "moves"]
# The values of a partition row that the intervals use (the others are validated, not needed).
INTERVAL_VALUES = ["log_end", "committed", "lag", "time_lag_s", "owner"]
ROW_COLUMNS = [*KEY, "topic", "partition", "ts_ms", *INTERVAL_VALUES]
# Spark settings for the job's own queries, restored after it. The windowed rows are cached
# clustered by the group key and sorted by partition and time; keeping that layout on the cached
# plan lets every aggregation below run without another shuffle (all group by the group key and
# more), and the per-partition ones stream over the sorted rows instead of filling a hash map
# that falls back to sorting past 128 keys. The cache is uncompressed: it is read a few times
# and dropped, and picking each column's encoding cost more CPU than building it otherwise.
PLANNING = {
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "false",
    "spark.sql.execution.replaceHashWithSortAgg": "true",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # partition_rates over the carried rows (not sorted) hashes its keys: `percentile_approx`
    # needs the object hash map, kept up to this many keys a task before it falls back to sorting.
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "8192",
}


def with_intervals(partitions: Any, carry: Sequence[str] = ()) -> Any:
    """Each partition row with the interval that ends at it: dt, produced, consumed, prev lag.
    Consumption counts only when the owner did not change across the interval. Expects one row
    per partition per poll (`polls.at_every_poll`): the interval is from the partition's
    previous row. A leading `_pk` column (`with_partition_hash`), when the rows have one, leads
    the window's key and is kept: the sort's prefix then tells partitions apart. So is a
    `_side` column (`run_rates`: plan and bad rows ride along), which ends the window's key, so
    such rows are never windowed with partition rows. `_first` marks a partition's first row
    (for `misses_polls`); `carry` names more columns kept as they are."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    prefix = [c for c in (PARTITION_HASH,) if c in partitions.columns]
    apart = [c for c in (SIDE,) if c in partitions.columns]
    window = Window.partitionBy(*prefix, *KEY, "topic", "partition", *apart).orderBy("ts_ms")
    lagged = ("ts_ms", "log_end", "committed", "lag", "owner")
    # Each previous value once (one window pass with five offsets), then the intervals from them.
    prev = {c: F.col(f"_prev_{c}") for c in lagged}
    with_prev = partitions.select(
        *partitions.columns, *[F.lag(c).over(window).alias(f"_prev_{c}") for c in lagged]
    )
    return with_prev.select(*prefix, *interval_columns(prev, carry), *apart)


def with_partition_hash(rows: Any) -> Any:
    """The rows with `_pk`, a 64-bit hash of the partition's key, first. Spark sorts by a
    prefix of the first sort column and compares whole rows only when prefixes tie; the key's
    first column (`cluster`) is the same on most rows, so without `_pk` nearly every comparison
    falls through to the strings. `_pk` only orders: the window and the aggregations still key
    on the columns themselves, so a hash collision cannot merge two partitions."""
    from pyspark.sql import functions as F

    return rows.select(F.xxhash64(*KEY, "topic", "partition").alias(PARTITION_HASH), *rows.columns)


def misses_polls(intervals: Any) -> bool:
    """Whether some partition lacks a row at a poll of its group from its first row on (then
    `polls.at_every_poll` has rows to add; when none does, its output is its input)."""
    return polls_missed(poll_totals(owner_polls(intervals)))


def polls_missed(per_poll: Any) -> bool:
    """`misses_polls` from `poll_totals`. Exact: at each poll, the partitions with a row there
    (`_present`, each counted once) are some of those whose first row is at or before it (the
    running sum of `_starts`); all of them exactly when the two are equal."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    so_far = Window.partitionBy(*KEY).orderBy("ts_ms").rowsBetween(Window.unboundedPreceding, 0)
    started = F.sum("_starts").over(so_far)
    missed = per_poll.select(started.alias("_started"), "_present").where(
        F.col("_started") != F.col("_present")
    )
    return bool(missed.limit(1).count())


def partition_rates(intervals: Any) -> Any:
    from pyspark.sql import functions as F

    rate = F.col("produced") / F.col("dt")
    # With `_pk` first the aggregation streams over the window's sort order (no sort of its own).
    prefix = [c for c in (PARTITION_HASH,) if c in intervals.columns]
    rates = intervals.groupBy(*prefix, *KEY, "topic", "partition").agg(
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
    return rates.drop(*prefix)


def owner_polls(intervals: Any, extra: Sequence[Any] = ()) -> Any:
    """Per group, poll and owner (NULL included): the sums `poll_totals` and `member_capacity`
    both start from, in one aggregation of the rows instead of two. Plain sums, counts and
    maxima only (no `collect_set`, whose object hash map falls back to sorting), so they add up
    again exactly per poll; the `_`-prefixed ones are over the rows with an interval (`dt`).
    `extra`: more aggregates in the same pass (`carried.chain_columns`)."""
    from pyspark.sql import functions as F

    new_time = F.col("_first") | F.col("dt").isNotNull()  # sorted by time: dt > 0 or first
    with_dt = F.col("dt").isNotNull()
    return intervals.groupBy(*KEY, "ts_ms", "owner").agg(
        F.sum("lag").alias("total_lag"),
        F.max("time_lag_s").alias("worst_time_lag_s"),
        F.max("dt").alias("dt"),
        F.count("*").alias("partitions"),
        F.count(F.when(new_time, 1)).alias("_present"),
        F.count(F.when(F.col("_first"), 1)).alias("_starts"),
        F.sum(F.when(with_dt, F.col("consumed"))).alias("_consumed"),
        F.sum(F.when(with_dt, F.col("prev_lag"))).alias("_lag_start"),
        F.sum(F.when(with_dt, F.col("lag"))).alias("_lag_end"),
        F.count(F.when(with_dt, 1)).alias("_intervals"),
        *extra,
    )


def member_capacity(intervals: Any, backlog_seconds: float = 5.0, min_saturated: int = 3) -> Any:
    """Per member: measured capacity (median rate while saturated) or the peak lower bound."""
    return capacity_of(owner_polls(intervals), backlog_seconds, min_saturated)


def capacity_of(by_owner: Any, backlog_seconds: float = 5.0, min_saturated: int = 3) -> Any:
    """`member_capacity` from `owner_polls`: a member's interval at a poll sums its partitions
    that have one (`dt` is the same maximum: rows without a `dt` add none)."""
    from pyspark.sql import functions as F

    per_interval = by_owner.where(F.col("owner").isNotNull() & (F.col("_intervals") > 0)).select(
        *KEY,
        "owner",
        "ts_ms",
        F.col("_consumed").alias("consumed"),
        "dt",
        F.col("_lag_start").alias("lag_start"),
        F.col("_lag_end").alias("lag_end"),
        F.col("_intervals").alias("partitions"),
        (F.col("_consumed") / F.col("dt")).alias("rate"),
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


def poll_totals(by_owner: Any) -> Any:
    """Per group and poll, from `owner_polls`: the totals `group_lag` summarises, and for
    `polls_missed` the partitions with a row at the poll (`_present`) and those whose first row
    it is (`_starts`). `members` counts the non-NULL owners."""
    from pyspark.sql import functions as F

    return by_owner.groupBy(*KEY, "ts_ms").agg(
        F.sum("total_lag").alias("total_lag"),
        F.max("worst_time_lag_s").alias("worst_time_lag_s"),
        F.max("dt").alias("dt"),
        F.sum("partitions").alias("partitions"),
        F.count("owner").alias("members"),
        F.sum("_present").alias("_present"),
        F.sum("_starts").alias("_starts"),
    )


def group_lag(intervals: Any, slo_s: float = 60.0) -> Any:
    return lag_summary(poll_totals(owner_polls(intervals)), slo_s)


def lag_summary(per_poll: Any, slo_s: float = 60.0) -> Any:
    """`group_lag` from `poll_totals`."""
    from pyspark.sql import functions as F

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


def one_pass_rows(telemetry: Any) -> Any:
    """Every input row (`spark_io.with_errors`), cut to the columns the job reads: the partition
    rows' `ROW_COLUMNS` and the previous row they carry (`wire.telemetry.PREVIOUS`), the plan
    rows' `PLAN_VALUES`, and `SIDE`, which tells them and the bad rows apart. The job caches
    this once, so the input is parsed once and never cached whole: the plans, the error counts
    and the partition rows all come from it."""
    from pyspark.sql import functions as F

    is_plan = F.col("kind") == PLAN
    side = (
        F.when(F.col("_error").isNotNull(), F.col("_error"))
        .when(is_plan, F.lit(PLAN))
        .when(F.col("kind").isin(*REPLAYED_KINDS), F.lit(SHARE_SIDE))
    )
    return telemetry.select(
        *ROW_COLUMNS,
        *PREVIOUS,
        *[F.when(is_plan, F.col(c)).alias(c) for c in PLAN_VALUES],
        side.alias(SIDE),
    )


def _on_groups(rows: Any, groups: Any, how: str) -> Any:
    """`rows` joined (`left_semi` or `left_anti`) to the small table `groups` by the group key,
    NULL-safe (cluster, namespace and policy may be NULL in a valid row)."""
    from pyspark.sql import functions as F

    on = [rows[c].eqNullSafe(F.col(f"_g.{c}")) for c in KEY]
    return rows.join(F.broadcast(groups.alias("_g")), on, how)


def windowed_intervals(rows: Any, progress: Progress) -> tuple[Any, Any]:
    """The intervals of partition rows (`ROW_COLUMNS`) by the window (`with_intervals`), the
    rows first carried to every poll of their group when some partition misses one
    (`polls.at_every_poll`); and their `owner_polls`. Both cached."""
    from pyspark import StorageLevel

    intervals = with_intervals(with_partition_hash(rows).repartition(*KEY)).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    by_owner = owner_polls(intervals).persist(StorageLevel.MEMORY_AND_DISK)
    if polls_missed(poll_totals(by_owner)):
        progress.stage("rebuilding the rows at every poll (sparse telemetry)")
        by_owner.unpersist()
        intervals.unpersist()
        intervals = with_intervals(at_every_poll(rows)).persist(StorageLevel.MEMORY_AND_DISK)
        by_owner = owner_polls(intervals).persist(StorageLevel.MEMORY_AND_DISK)
    return intervals, by_owner


def _carried_or_windowed(
    partition_rows: Any, cached: list[Any], progress: Progress
) -> tuple[Any, Any, dict[bool, int]]:
    """`partition_rates` and `owner_polls` of the cached partition rows (`carried_intervals`):
    two hash aggregations as if every group's rows were chained, kept for the groups that are
    (`carried.chained_groups`); the other groups' rows windowed from the cache. Also the
    partition rows per path (True: carried). Appends what it caches to `cached`."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    by_owner = owner_polls(partition_rows, extra=chain_columns())
    by_owner = by_owner.persist(StorageLevel.MEMORY_AND_DISK)
    rates = partition_rates(partition_rows).persist(StorageLevel.MEMORY_AND_DISK)
    cached += [by_owner, rates]
    per_group = rates.groupBy(*KEY).agg(F.count("*").alias("_partitions"))
    groups = chained_groups(by_owner, per_group).persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(groups)
    paths = {
        bool(r["_chained"]): int(r["rows"] or 0)
        for r in groups.groupBy("_chained").agg(F.sum("_rows").alias("rows")).collect()
    }
    by_owner = by_owner.drop(*CHAIN)
    if paths.get(False):
        progress.stage("windowing the groups whose rows carry no chained intervals")
        slow = groups.where(~F.col("_chained")).select(*KEY)
        fast = groups.where(F.col("_chained")).select(*KEY)
        intervals, slow_by_owner = windowed_intervals(
            _on_groups(partition_rows, slow, "left_semi").select(*ROW_COLUMNS), progress
        )
        cached += [intervals, slow_by_owner]
        rates = _on_groups(rates, fast, "left_semi").unionByName(partition_rates(intervals))
        by_owner = _on_groups(by_owner, fast, "left_semi").unionByName(slow_by_owner)
    return rates, by_owner, paths


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
    from pyspark.sql import functions as F

    started = time.perf_counter()
    progress.stage("reading and validating telemetry")
    every = with_errors(read_raw(spark, sources))
    saved = {key: spark.conf.get(key, None) for key in PLANNING}
    for key, value in PLANNING.items():
        spark.conf.set(key, value)
    cached: list[Any] = []
    try:
        # One scan, no shuffle: every row cut to the columns the job reads, with the interval
        # its carried previous row tells (`carried.carried_intervals`), cached. Plan and bad
        # rows ride along, apart (`SIDE`), for group_plans and the error counts. When no row
        # carries its previous one, every group is windowed from the cache at once.
        rows = carried_intervals(one_pass_rows(every), carry=["committed", *PLAN_VALUES, SIDE])
        rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(rows)
        partition_rows = rows.where(F.col(SIDE).isNull())
        if rows.where(F.col(PREV_TS).isNotNull()).limit(1).count():
            rates, by_owner, paths = _carried_or_windowed(partition_rows, cached, progress)
        else:  # no row carries its previous one (an operator before those fields): the window
            intervals, by_owner = windowed_intervals(partition_rows.select(*ROW_COLUMNS), progress)
            cached += [intervals, by_owner]
            rates = partition_rates(intervals)
            paths = {False: partition_rows.count()}  # as read (a rebuild adds rows)
        plans = rows.where(F.col(SIDE) == PLAN).select("group", "ts_ms", *PLAN_VALUES)
        outputs = {
            "partition_rates": rates,
            "member_capacity": capacity_of(by_owner, backlog_seconds, min_saturated),
            "group_lag": lag_summary(poll_totals(by_owner), slo_s),
            "group_plans": group_plans(plans),
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
    error = F.when(~F.col(SIDE).isin(PLAN, SHARE_SIDE), F.col(SIDE)).alias("_error")
    report = Telemetry(None, None, rows.select(error), samples_from=every)
    errors = report.error_report()
    write_json(out / "schema_errors.json", errors)
    for frame in reversed(cached):
        frame.unpersist()
    elapsed = time.perf_counter() - started
    summary = {
        "sources": list(sources),
        "rows_total": errors["rows_total"],
        "rows_valid": errors["rows_valid"],
        "rows_dropped": errors["rows_dropped"],
        # Partition rows by path: their group's intervals carried on the rows, or windowed.
        "rows_carried": paths.get(True, 0),
        "rows_windowed": paths.get(False, 0),
        "seconds": round(elapsed, 3),
        "rows_per_second": round(errors["rows_total"] / elapsed, 1) if elapsed > 0 else None,
        "outputs": sorted(outputs),
        "slo_s": slo_s,
    }
    write_json(out / "summary.json", summary)
    return summary
