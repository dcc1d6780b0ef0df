"""Sparse telemetry to one row per partition per poll (docs/pipeline.md, "Sparse rows").

The operator writes a partition's row only when it differs from the partition's last row in
anything but `ts_ms`, and at least every `REFRESH_MS` (operator `telemetry.REFRESH_S`). So at a
poll of its group where a partition has no row, it had its last row, provided that row is at
most `REFRESH_MS` old: a rowless poll is always less than `REFRESH_S` after the row (the
operator writes one at the first poll at or past it), and `ts_ms` is the poll's time truncated
to the millisecond, so the gap in `ts_ms` is at most `REFRESH_MS`. Older than that, the
partition is unknown at the poll (it left the group's topics, or rows were lost) and gets no
row, as it had none in dense telemetry.

Invariants: a partition's own rows are kept as they are (dense input comes out unchanged,
duplicates included); a carried row is the partition's latest row at or before the poll, with
`ts_ms` set to the poll's; nothing is carried to a poll before the partition's first row. A
group's polls are the distinct `ts_ms` of its rows: a poll where no partition of the group
changed left no row at all and stays invisible (its lags were those of the poll before).
All Spark SQL (each partition joined against its group's poll times, unioned with the rows, one
window), no Python per row.
"""

from __future__ import annotations

from typing import Any

KEY = ["cluster", "namespace", "policy", "group"]
PARTITION = [*KEY, "topic", "partition"]
REFRESH_MS = 300_000  # the operator's telemetry.REFRESH_S, in ms (docs/architecture.md)

_ROW = "_row"
_ROW_TS = "_row_ts_ms"
_GRID = "_poll_cell"


def at_every_poll(partitions: Any, refresh_ms: int = REFRESH_MS) -> Any:
    """Partition rows (the telemetry schema) with each partition's last row carried forward to
    every poll of its group within `refresh_ms` of that row; columns and their order unchanged.
    The result is hash-partitioned by the group key (`KEY`) and sorted by partition and time
    within each Spark partition, which the rates job's window and aggregations reuse."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    values = [c for c in partitions.columns if c not in PARTITION and c != "ts_ms"]
    polls = partitions.select(*KEY, "ts_ms").distinct().alias("p")
    first = partitions.groupBy(*PARTITION).agg(F.min("ts_ms").alias("_first_ts_ms")).alias("f")
    # Null-safe keys: cluster, namespace and policy may be null in a valid row.
    grid = first.join(
        polls,
        [F.col(f"f.{c}").eqNullSafe(F.col(f"p.{c}")) for c in KEY]
        + [F.col("p.ts_ms") >= F.col("f._first_ts_ms")],
    ).select(*[F.col(f"f.{c}") for c in PARTITION], F.col("p.ts_ms"))
    rows = partitions.select(
        *PARTITION,
        "ts_ms",
        F.struct(F.col("ts_ms").alias(_ROW_TS), *values).alias(_ROW),
        F.lit(0).alias(_GRID),
    )
    cells = grid.select(
        *PARTITION, "ts_ms", F.lit(None).cast(rows.schema[_ROW].dataType).alias(_ROW), F.lit(1)
    )
    # A partition's rows, then its poll cells, in time; at one ts_ms the rows come first, so a
    # cell right after a row of its own ts_ms is a poll the partition has a row at: dropped.
    order = Window.partitionBy(*PARTITION).orderBy("ts_ms", _GRID)
    window = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # Clustered by the group key (a subset of the window's partition key, so the window needs
    # no other shuffle): every per-group aggregation downstream then needs none either.
    carried = (
        rows.unionByName(cells.toDF(*rows.columns))
        .repartition(*KEY)
        .withColumn("_previous_ts_ms", F.lag("ts_ms").over(order))
        .withColumn(_ROW, F.last(_ROW, ignorenulls=True).over(window))
        .where(
            (F.col(_GRID) == 0)
            | F.col("_previous_ts_ms").isNull()
            | (F.col("_previous_ts_ms") != F.col("ts_ms"))
        )
    )
    known = carried.where(F.col("ts_ms") - F.col(f"{_ROW}.{_ROW_TS}") <= refresh_ms)
    return known.select(
        *[
            F.col(c) if c in PARTITION or c == "ts_ms" else F.col(f"{_ROW}.{c}").alias(c)
            for c in partitions.columns
        ]
    )
