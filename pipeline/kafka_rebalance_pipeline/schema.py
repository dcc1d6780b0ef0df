"""The telemetry row schema (docs/architecture.md, "Telemetry") and its validation rules.

Partition rows and plan rows share one stream (a Kafka topic or JSON-lines files); plan rows
carry `kind: "plan"`, partition rows no kind (or `"partition"`). Share groups add two kinds
(docs/pipeline.md, "Share telemetry"): `"share"`, one row per poll and share-partition (its
backlog in `lag`, its production `rate`, the `members` on it), and `"share-member"`, one row per
poll and member with its measured `throughput` where one is known. Streams groups add
`"streams"` (docs/pipeline.md, "Streams telemetry"): one row per poll and task, the task named by
`subtopology` and `partition`, its input backlog `lag`, `rate` and `log_end`, its `owner` and
that member's `process`, `stateful`, its `changelog` size and its `standbys`. The share and
streams fields are optional, so every row valid before them is valid as it was. The rules are
SQL expressions so Spark checks millions of rows without a Python round trip; `row_errors`
evaluates the same rules on one Python dict (for writers, and for tests that need no Spark).
"""

from __future__ import annotations

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
    "rate": "double",
    "members": "array<string>",
    "throughput": "double",
    "subtopology": "string",
    "process": "string",
    "stateful": "boolean",
    "changelog": "bigint",
    "standbys": "array<string>",
}
SHARE = "share"
SHARE_MEMBER = "share-member"
SHARE_KINDS = (SHARE, SHARE_MEMBER)
STREAMS = "streams"
# Kinds the backtest replays on their own and the rates job counts valid but leaves out.
REPLAYED_KINDS = (*SHARE_KINDS, STREAMS)
# The fields only share rows carry.
SHARE_ONLY_FIELDS = ["rate", "members", "throughput"]
# The fields only streams rows carry (`rate` is a share field already).
STREAMS_ONLY_FIELDS = ["subtopology", "process", "stateful", "changelog", "standbys"]
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
# The plan statistics: the fields only plan rows carry.
PLAN_ONLY_FIELDS = [f for f in PLAN_FIELDS if f != "kind" and f not in PARTITION_FIELDS]
SHARE_FIELDS = [
    "ts_ms",
    "kind",
    "cluster",
    "namespace",
    "policy",
    "group",
    "topic",
    "partition",
    "log_end",
    "lag",
    "rate",
    "members",
    "epoch",
]
SHARE_MEMBER_FIELDS = [
    "ts_ms",
    "kind",
    "cluster",
    "namespace",
    "policy",
    "group",
    "owner",
    "throughput",
]
# The columns of the validated streams table (spark_io.read_telemetry): a streams row's fields.
STREAMS_FIELDS = [
    "ts_ms",
    "cluster",
    "namespace",
    "policy",
    "group",
    "subtopology",
    "partition",
    "lag",
    "rate",
    "log_end",
    "owner",
    "process",
    "stateful",
    "changelog",
    "standbys",
    "epoch",
]
# The columns of the validated plan table (spark_io.read_telemetry), in FIELDS order: a plan row's
# fields but its kind, and where it came from (optional on a plan row, as on partition rows).
PLAN_COLUMNS = [
    f
    for f in FIELDS
    if f != "kind" and (f in PLAN_FIELDS or f in ("cluster", "namespace", "policy"))
]
# The columns of the validated share table (spark_io.read_telemetry): both share kinds' fields.
SHARE_COLUMNS = [
    "kind",
    *dict.fromkeys(f for f in [*SHARE_FIELDS, *SHARE_MEMBER_FIELDS] if f != "kind"),
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
SHARE_RULES: tuple[tuple[str, str], ...] = (
    ("malformed-json", f"`{CORRUPT}` IS NOT NULL"),
    ("missing-ts_ms", "ts_ms IS NULL"),
    ("missing-group", "`group` IS NULL OR `group` = ''"),
    ("missing-topic", "topic IS NULL OR topic = ''"),
    ("bad-partition", "`partition` IS NULL OR `partition` < 0"),
    ("negative-offset", "log_end < 0 OR lag < 0"),
    ("negative-rate", "rate < 0"),
)
SHARE_MEMBER_RULES: tuple[tuple[str, str], ...] = (
    ("malformed-json", f"`{CORRUPT}` IS NOT NULL"),
    ("missing-ts_ms", "ts_ms IS NULL"),
    ("missing-group", "`group` IS NULL OR `group` = ''"),
    ("missing-owner", "owner IS NULL OR owner = ''"),
    ("negative-rate", "throughput < 0"),
)
STREAMS_RULES: tuple[tuple[str, str], ...] = (
    ("malformed-json", f"`{CORRUPT}` IS NOT NULL"),
    ("missing-ts_ms", "ts_ms IS NULL"),
    ("missing-group", "`group` IS NULL OR `group` = ''"),
    ("missing-subtopology", "subtopology IS NULL OR subtopology = ''"),
    ("bad-partition", "`partition` IS NULL OR `partition` < 0"),
    ("negative-offset", "log_end < 0 OR lag < 0 OR changelog < 0"),
    ("negative-rate", "rate < 0"),
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


def _type_ok(value: Any, kind: str) -> bool:
    """As Spark's JSON reader sees it: integers for int/bigint, any number for double, and any
    scalar for string (Spark keeps a number's text)."""
    if value is None:
        return True
    if kind == "int":
        return _int(value) and -(2**31) <= value < 2**31
    if kind == "bigint":
        return _int(value) and -(2**63) <= value < 2**63
    if kind == "double":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array<string>":
        return isinstance(value, list) and all(not isinstance(v, dict | list) for v in value)
    return not isinstance(value, dict | list)


def row_errors(row: Any) -> str | None:
    """The first broken rule of one decoded row (None: valid): the Python twin of the SQL rules,
    for writers and tests that run without Spark. A value of the wrong type makes Spark drop the
    whole record into the corrupt column, so here it is `malformed-json` too."""
    if not isinstance(row, dict):
        return "malformed-json"
    if any(not _type_ok(row.get(name), kind) for name, kind in FIELDS.items()):
        return "malformed-json"
    kind = row.get("kind")
    if kind not in (None, "partition", "plan", *REPLAYED_KINDS):
        return "unknown-kind"
    if row.get("ts_ms") is None:
        return "missing-ts_ms"
    if not row.get("group"):
        return "missing-group"
    if kind == "plan":
        return None if row.get("strategy") else "missing-strategy"
    if kind == SHARE_MEMBER:
        if not row.get("owner"):
            return "missing-owner"
        return "negative-rate" if (row.get("throughput") or 0) < 0 else None
    if kind == STREAMS:
        return _streams_error(row)
    if not row.get("topic"):
        return "missing-topic"
    if row.get("partition") is None or row["partition"] < 0:
        return "bad-partition"
    if kind == SHARE:
        if any((row.get(n) or 0) < 0 for n in ("log_end", "lag")):
            return "negative-offset"
        return "negative-rate" if (row.get("rate") or 0) < 0 else None
    state = row.get("lag_state")
    if state not in LAG_STATES:
        return "bad-lag_state"
    if state == "ok" and (row.get("log_end") is None or row.get("committed") is None):
        return "missing-offsets"
    if any((row.get(n) or 0) < 0 for n in ("log_start", "log_end", "committed", "lag")):
        return "negative-offset"
    if state == "ok" and not row.get("owner"):
        return "missing-owner"
    return None


def _streams_error(row: dict[str, Any]) -> str | None:
    """`row_errors` for a streams row (`STREAMS_RULES`, after the common ones)."""
    if not row.get("subtopology"):
        return "missing-subtopology"
    if row.get("partition") is None or row["partition"] < 0:
        return "bad-partition"
    if any((row.get(n) or 0) < 0 for n in ("log_end", "lag", "changelog")):
        return "negative-offset"
    return "negative-rate" if (row.get("rate") or 0) < 0 else None
