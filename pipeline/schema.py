"""The telemetry row schema (ARCHITECTURE.md "Telemetry") and its validation rules.

Partition rows and plan rows share one stream (a Kafka topic or JSON-lines files); plan rows
carry `kind: "plan"`, partition rows no kind (or `"partition"`). The rules are SQL expressions so
Spark checks millions of rows without a Python round trip; `row_errors` evaluates the same rules
on one Python dict (for writers, and for tests that need no Spark).
"""

from __future__ import annotations

import math
from typing import Any

LAG_STATES = ("ok", "uninitialized", "out-of-range", "ahead", "unknown")

# name -> Spark SQL type; the union of partition-row and plan-row fields.
FIELDS: dict[str, str] = {
    "ts_ms": "bigint",
    "kind": "string",
    "cluster": "string",
    "namespace": "string",
    "policy": "string",
    "group": "string",
    "topic": "string",
    "partition": "int",
    "log_start": "bigint",
    "log_end": "bigint",
    "committed": "bigint",
    "lag": "bigint",
    "lag_state": "string",
    "time_lag_s": "double",
    "owner": "string",
    "epoch": "bigint",
    "strategy": "string",
    "moves": "bigint",
    "max_load_ratio_before": "double",
    "max_load_ratio_after": "double",
}
PARTITION_FIELDS = [
    "ts_ms",
    "cluster",
    "namespace",
    "policy",
    "group",
    "topic",
    "partition",
    "log_start",
    "log_end",
    "committed",
    "lag",
    "lag_state",
    "time_lag_s",
    "owner",
    "epoch",
]
PLAN_FIELDS = [
    "ts_ms",
    "kind",
    "group",
    "epoch",
    "strategy",
    "moves",
    "max_load_ratio_before",
    "max_load_ratio_after",
]
CORRUPT = "_corrupt_record"

# (reason, SQL condition that is TRUE when the partition row is bad). First match wins.
PARTITION_RULES: tuple[tuple[str, str], ...] = (
    ("malformed-json", f"`{CORRUPT}` IS NOT NULL"),
    ("missing-ts_ms", "ts_ms IS NULL"),
    ("missing-group", "`group` IS NULL OR `group` = ''"),
    ("missing-topic", "topic IS NULL OR topic = ''"),
    ("bad-partition", "`partition` IS NULL OR `partition` < 0"),
    (
        "bad-lag_state",
        "lag_state IS NULL OR lag_state NOT IN ({})".format(
            ", ".join(f"'{s}'" for s in LAG_STATES)
        ),
    ),
    ("missing-offsets", "lag_state = 'ok' AND (log_end IS NULL OR committed IS NULL)"),
    ("negative-offset", "log_start < 0 OR log_end < 0 OR committed < 0 OR lag < 0"),
    ("missing-owner", "lag_state = 'ok' AND (owner IS NULL OR owner = '')"),
)
PLAN_RULES: tuple[tuple[str, str], ...] = (
    ("malformed-json", f"`{CORRUPT}` IS NOT NULL"),
    ("missing-ts_ms", "ts_ms IS NULL"),
    ("missing-group", "`group` IS NULL OR `group` = ''"),
    ("missing-strategy", "strategy IS NULL OR strategy = ''"),
)


def ddl(include_corrupt: bool = True) -> str:
    """The schema as a DDL string for `spark.read.schema(...)` / `from_json`."""
    columns = [f"`{name}` {kind}" for name, kind in FIELDS.items()]
    if include_corrupt:
        columns.append(f"`{CORRUPT}` string")
    return ", ".join(columns)


def reason_expression(rules: tuple[tuple[str, str], ...]) -> str:
    """A SQL CASE that names the first broken rule, NULL for a good row."""
    whens = " ".join(f"WHEN coalesce({cond}, false) THEN '{reason}'" for reason, cond in rules)
    return f"CASE {whens} ELSE NULL END"


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def row_errors(row: Any) -> str | None:
    """The first broken rule of one decoded row (None: valid) - the Python twin of the SQL rules,
    used where no Spark runs (the telemetry writer refuses what the pipeline would drop)."""
    if not isinstance(row, dict):
        return "malformed-json"
    if not _int(row.get("ts_ms")):
        return "missing-ts_ms"
    if not isinstance(row.get("group"), str) or not row["group"]:
        return "missing-group"
    if row.get("kind") == "plan":
        return (
            None
            if isinstance(row.get("strategy"), str) and row["strategy"]
            else ("missing-strategy")
        )
    if not isinstance(row.get("topic"), str) or not row["topic"]:
        return "missing-topic"
    if not _int(row.get("partition")) or row["partition"] < 0:
        return "bad-partition"
    state = row.get("lag_state")
    if state not in LAG_STATES:
        return "bad-lag_state"
    if state == "ok" and not (_int(row.get("log_end")) and _int(row.get("committed"))):
        return "missing-offsets"
    for name in ("log_start", "log_end", "committed", "lag"):
        value = row.get(name)
        if value is not None and not _int(value):
            return "malformed-json"
        if value is not None and value < 0:
            return "negative-offset"
    if state == "ok" and (not isinstance(row.get("owner"), str) or not row["owner"]):
        return "missing-owner"
    time_lag = row.get("time_lag_s")
    if time_lag is not None and not (isinstance(time_lag, int | float) and math.isfinite(time_lag)):
        return "malformed-json"
    return None
