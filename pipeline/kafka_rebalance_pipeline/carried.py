"""Intervals carried on the rows (docs/pipeline.md, "Carried intervals"): no sort, no window.

A partition row that carries its previous row (`wire.telemetry.PREVIOUS`: the fields of the row
the same writer last wrote for the partition) tells the interval that ends at it by itself;
`rates_job.with_intervals` derives the same interval with a window over the partition's rows in
time order. `carried_intervals` computes it row by row, in the columns `with_intervals` gives.

The two agree on a group exactly when its rows are dense and chained (`chained_groups`): at the
group's first poll no row carries a previous row, and at each later poll every row carries one
written at the group's poll before, the previous rows of the poll are those of the poll before
(the same partitions with the same values: compared by an XOR of a 64-bit hash per row), and each
partition has one row a poll. Then every partition starts at the group's first poll and has a row
at every poll, which is what the window sees too. Any other group (rows from an operator before
these fields, sparse rows, a restart, a lost or duplicated row) takes the windowed path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka_rebalance_common.wire.telemetry import PREVIOUS

KEY = ["cluster", "namespace", "policy", "group"]
# What the chain check compares: a row's own fields (`_h_row`) against the fields its next row
# carries as its previous row (`_h_prev`), both hashed with the partition's key, in one order.
ROW_HASH = "_h_row"
PREV_HASH = "_h_prev"
PREV_TS = "prev_ts_ms"
# The chain check's aggregates per group, poll and owner (`chain_columns`), added up per poll.
CHAIN = ["_carried", "_prev_min", "_prev_max", ROW_HASH, PREV_HASH]


def _hash(topic: Any, partition: Any, fields: dict[str, Any]) -> Any:
    """xxhash64 of the partition and its `fields` (ts_ms, log_end, committed, lag, owner), a
    NULL one as a value no valid row has (offsets are never negative), so NULLs keep their
    place (xxhash64 skips NULL arguments)."""
    from pyspark.sql import functions as F

    values = [
        F.coalesce(fields[c], F.lit(-1)) for c in ("ts_ms", "log_end", "committed", "lag")
    ] + [F.coalesce(fields["owner"], F.lit("\u0000"))]
    return F.xxhash64(topic, partition, *values)


def interval_columns(prev: dict[str, Any], carry: Sequence[str]) -> list[Any]:
    """A partition row's columns with the interval that ends at it (`dt`, `produced`,
    `consumed`, `prev_lag`, `_first`), from its previous row's `ts_ms`, `log_end`, `committed`,
    `lag` and `owner` in `prev`: one set of formulas whether those come from a window
    (`rates_job.with_intervals`) or ride on the row (`carried_intervals`). Consumption counts
    only when the owner did not change across the interval; `carry` names columns kept."""
    from pyspark.sql import functions as F

    dt = (F.col("ts_ms") - prev["ts_ms"]) / 1000.0
    produced = F.col("log_end") - prev["log_end"]
    consumed = F.col("committed") - prev["committed"]
    same_owner = prev["owner"] == F.col("owner")
    return [
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
        prev["ts_ms"].isNull().alias("_first"),
        *carry,
    ]


def carried_intervals(rows: Any, carry: list[str]) -> Any:
    """Each row with the interval that ends at it, from the previous row it carries: the
    columns of `rates_job.with_intervals` (`dt`, `produced`, `consumed`, `prev_lag`, `_first`),
    by its formulas, plus `prev_ts_ms` and the chain hashes. `carry` names columns kept as they
    are. A row without `prev_ts_ms` is a first row here; `chained_groups` says where that holds."""
    from pyspark.sql import functions as F

    prev = {field: F.col(name) for name, field in PREVIOUS.items()}
    own = {c: F.col(c) for c in ("ts_ms", "log_end", "committed", "lag", "owner")}
    return rows.select(
        *interval_columns(prev, carry),
        prev["ts_ms"].alias(PREV_TS),
        _hash(F.col("topic"), F.col("partition"), own).alias(ROW_HASH),
        F.when(prev["ts_ms"].isNotNull(), _hash(F.col("topic"), F.col("partition"), prev)).alias(
            PREV_HASH
        ),
    )


def chain_columns() -> list[Any]:
    """The chain check's aggregates of rows (`carried_intervals`), for `owner_polls(extra=)`."""
    from pyspark.sql import functions as F

    return [
        F.count(PREV_TS).alias("_carried"),
        F.min(PREV_TS).alias("_prev_min"),
        F.max(PREV_TS).alias("_prev_max"),
        F.bit_xor(ROW_HASH).alias(ROW_HASH),
        F.bit_xor(PREV_HASH).alias(PREV_HASH),
    ]


def chained_groups(by_owner: Any, partitions_per_group: Any) -> Any:
    """Every group (`KEY`) with `_chained`, whether its carried intervals are the windowed
    ones, and `_rows`, its partition rows. From the rows' aggregates per group, poll and owner
    (`owner_polls` with `chain_columns`) and each group's number of distinct partitions
    (`partitions_per_group`: `KEY`, `_partitions`). Exact but for a 64-bit hash collision (the
    module's docstring). Small tables only."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_poll = by_owner.groupBy(*KEY, "ts_ms").agg(
        F.sum("partitions").alias("rows"),
        F.sum("_carried").alias("_carried"),
        F.min("_prev_min").alias("_prev_min"),
        F.max("_prev_max").alias("_prev_max"),
        F.bit_xor(ROW_HASH).alias(ROW_HASH),
        F.bit_xor(PREV_HASH).alias(PREV_HASH),
    )
    order = Window.partitionBy(*KEY).orderBy("ts_ms")
    before = {c: F.lag(c).over(order) for c in ("ts_ms", "rows", ROW_HASH)}
    first = before["ts_ms"].isNull()
    chained = F.when(first, F.col("_carried") == 0).otherwise(
        (F.col("_carried") == F.col("rows"))
        & (F.col("_prev_min") == before["ts_ms"])
        & (F.col("_prev_max") == before["ts_ms"])
        & (F.col("rows") == before["rows"])
        & (F.col(PREV_HASH) == before[ROW_HASH])
    )
    polls = per_poll.select(
        *KEY, "rows", chained.alias("_chained"), F.when(first, F.col("rows")).alias("_first_rows")
    )
    per_group = polls.groupBy(*KEY).agg(
        F.bool_and(F.coalesce(F.col("_chained"), F.lit(False))).alias("_chained"),
        F.max("_first_rows").alias("_first_rows"),
        F.sum("rows").alias("_rows"),
    )
    # Null-safe: cluster, namespace and policy may be NULL in a valid row.
    joined = per_group.alias("g").join(
        partitions_per_group.alias("p"), [F.col(f"g.{c}").eqNullSafe(F.col(f"p.{c}")) for c in KEY]
    )
    # Each partition once at the first poll: then, chained, once at every poll.
    once = F.col("g._first_rows") == F.col("p._partitions")
    return joined.select(
        *[F.col(f"g.{c}") for c in KEY], (F.col("g._chained") & once).alias("_chained"), "_rows"
    )
