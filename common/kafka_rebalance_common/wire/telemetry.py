"""Where the telemetry rows travel: the operator produces them to this Kafka topic by default
(`kafka-rebalance operator --telemetry-topic`) and the pipeline reads and generates it
(docs/naming.md). Defined once, here, because the operator and the pipeline may not import each
other."""

from __future__ import annotations

TELEMETRY_TOPIC = "kafka-rebalance.telemetry"

# Optional fields of a partition row: the partition's previous row, carried on it (docs/pipeline.md,
# "Carried intervals"). Each holds the named field of the row the same writer last wrote for
# the partition; all are absent on a partition's first row, and on rows from writers that predate
# them. With them a row tells its own interval, so the pipeline needs no window to find it.
PREVIOUS: dict[str, str] = {
    "prev_ts_ms": "ts_ms",
    "prev_log_end": "log_end",
    "prev_committed": "committed",
    "prev_lag": "lag",
    "prev_owner": "owner",
}


def previous_of(row: dict[str, object]) -> dict[str, object]:
    """The `PREVIOUS` fields the next row of the same partition carries, from this row."""
    return {name: row.get(field) for name, field in PREVIOUS.items()}
