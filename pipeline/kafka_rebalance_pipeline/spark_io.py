"""Spark session and telemetry input: files (JSON lines, Parquet) or the telemetry Kafka topic.

Both sources go through the same schema and the same validation, so a row the pipeline drops is
dropped the same way wherever it came from; dropped rows are counted by reason, never fatal.
"""

from __future__ import annotations

import functools
import json
import operator
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_rebalance_pipeline.schema import (
    CORRUPT,
    FIELDS,
    PARTITION_RULES,
    PLAN_COLUMNS,
    PLAN_ONLY_FIELDS,
    PLAN_RULES,
    SHARE,
    SHARE_COLUMNS,
    SHARE_KINDS,
    SHARE_MEMBER,
    SHARE_MEMBER_RULES,
    SHARE_ONLY_FIELDS,
    SHARE_RULES,
    STREAMS,
    STREAMS_FIELDS,
    STREAMS_ONLY_FIELDS,
    STREAMS_RULES,
    ddl,
    reason_expression,
)

KAFKA_PREFIX = "kafka://"


def build_session(
    master: str = "local[*]",
    app_name: str = "kafka-rebalance-pipeline",
    shuffle_partitions: int | None = None,
    driver_memory: str = "1g",
    conf: Sequence[str] = (),
    jars: Sequence[Path] = (),
) -> Any:
    """A SparkSession with the Kafka connector `jars` the caller found (`spark.jars`, never Ivy
    at run time; the command line finds them, the pipeline never looks for tools itself). Python
    workers run this interpreter, so a standalone cluster's executors import the same
    `kafka_rebalance_assignors` and `kafka_rebalance_pipeline` as the driver."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    if local or master.startswith("spark://127.0.0.1"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    if shuffle_partitions is None:
        shuffle_partitions = max(2, 2 * (os.cpu_count() or 1))
    builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    for item in conf:
        key, _, value = item.partition("=")
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _file_frame(spark: Any, paths: Sequence[str]) -> Any:
    json_paths: list[str] = []
    parquet_paths: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            if any(path.rglob("*.parquet")):
                parquet_paths.append(str(path))
            else:
                json_paths.append(str(path))
        elif path.suffix == ".parquet":
            parquet_paths.append(str(path))
        elif path.exists():
            json_paths.append(str(path))
        else:
            raise FileNotFoundError(f"telemetry input {raw} does not exist")
    frames = []
    if json_paths:
        frames.append(
            spark.read.schema(ddl())
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .option("recursiveFileLookup", "true")
            .json(json_paths)
        )
    if parquet_paths:
        from pyspark.sql import functions as F

        frame = spark.read.option("recursiveFileLookup", "true").parquet(*parquet_paths)
        columns = []
        for name, kind in FIELDS.items():
            value = F.col(f"`{name}`") if name in frame.columns else F.lit(None)
            columns.append(value.cast(kind).alias(name))
        columns.append(F.lit(None).cast("string").alias(CORRUPT))
        frames.append(frame.select(*columns))
    result = frames[0]
    for other in frames[1:]:
        result = result.unionByName(other)
    return result


def parse_kafka_uri(uri: str) -> tuple[str, str]:
    """kafka://host:port[,host:port]/topic -> (bootstrap servers, topic)."""
    rest = uri[len(KAFKA_PREFIX) :]
    bootstrap, _, topic = rest.partition("/")
    if not bootstrap or not topic:
        raise ValueError(f"expected kafka://BOOTSTRAP/TOPIC, got {uri!r}")
    return bootstrap, topic


def _kafka_frame(spark: Any, uri: str) -> Any:
    """Batch read of the whole topic (earliest to latest) with Spark's Kafka source."""
    from pyspark.sql import functions as F

    bootstrap, topic = parse_kafka_uri(uri)
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    parsed = raw.select(
        F.from_json(
            F.col("value").cast("string"),
            ddl(),
            {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT},
        ).alias("row"),
        F.col("value").cast("string").alias("_value"),
    )
    # from_json leaves the corrupt column empty for some failures (a non-object value, an
    # all-null struct): a row with no field at all is malformed too. (Each field is tested on
    # its own: a coalesce of them needs one common type, which an array field does not have.)
    present = [F.col(f"row.`{name}`").isNotNull() for name in FIELDS]
    corrupt = F.when(
        F.col(f"row.`{CORRUPT}`").isNotNull() | ~functools.reduce(operator.or_, present),
        F.col("_value"),
    )
    return parsed.select(*[F.col(f"row.`{n}`").alias(n) for n in FIELDS], corrupt.alias(CORRUPT))


def read_raw(spark: Any, sources: Sequence[str]) -> Any:
    """All sources unioned, with the telemetry schema plus the corrupt-record column."""
    files = [s for s in sources if not s.startswith(KAFKA_PREFIX)]
    frames = [_kafka_frame(spark, s) for s in sources if s.startswith(KAFKA_PREFIX)]
    if files:
        frames.insert(0, _file_frame(spark, files))
    if not frames:
        raise ValueError("no telemetry input given")
    result = frames[0]
    for other in frames[1:]:
        result = result.unionByName(other)
    return result


def with_errors(frame: Any) -> Any:
    """Adds `_error`: NULL for a good row, else the reason it is dropped."""
    from pyspark.sql import functions as F

    is_plan = F.col("kind") == "plan"
    is_partition = F.col("kind").isNull() | (F.col("kind") == "partition")
    malformed = F.col(CORRUPT).isNotNull()
    return frame.withColumn(
        "_error",
        F.when(malformed, F.lit("malformed-json"))
        .when(is_plan, F.expr(reason_expression(PLAN_RULES)))
        .when(F.col("kind") == SHARE, F.expr(reason_expression(SHARE_RULES)))
        .when(F.col("kind") == SHARE_MEMBER, F.expr(reason_expression(SHARE_MEMBER_RULES)))
        .when(F.col("kind") == STREAMS, F.expr(reason_expression(STREAMS_RULES)))
        .when(is_partition, F.expr(reason_expression(PARTITION_RULES)))
        .otherwise(F.lit("unknown-kind")),
    )


@dataclass
class Telemetry:
    """Validated telemetry: partition rows, plan rows, share rows (both share kinds, with
    `kind`), streams rows, and the error report.

    `checked` has every row's `_error` (NULL: valid) and is what the counts come from; the
    samples come from `samples_from` when given (every column of every row, read again, for a
    `checked` that kept only `_error`), else from `checked`. Samples are read only when there
    is an error to show."""

    partitions: Any
    plans: Any
    checked: Any  # every row with `_error` (cached), for the report
    samples_from: Any = None
    shares: Any = None
    streams: Any = None

    def error_report(self, samples: int = 5) -> dict[str, Any]:
        from pyspark.sql import functions as F

        counts = {
            (r["_error"] or "valid"): int(r["count"])
            for r in self.checked.groupBy("_error").count().collect()
        }
        valid = counts.pop("valid", 0)
        examples = []
        if counts:
            source = self.checked if self.samples_from is None else self.samples_from
            bad = source.where(F.col("_error").isNotNull())
            for row in bad.limit(samples).collect():
                data = row.asDict()
                examples.append(
                    {
                        "reason": data.pop("_error"),
                        "row": data.pop(CORRUPT)
                        or {k: v for k, v in data.items() if v is not None},
                    }
                )
        return {
            "rows_total": valid + sum(counts.values()),
            "rows_valid": valid,
            "rows_dropped": sum(counts.values()),
            "errors": dict(sorted(counts.items())),
            "samples": examples,
        }


def read_telemetry(spark: Any, sources: Sequence[str], cache: bool = True) -> Telemetry:
    """`cache`: keep the parsed rows for a second pass (the error report after the jobs)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    checked = with_errors(read_raw(spark, sources))
    if cache:
        checked = checked.persist(StorageLevel.MEMORY_AND_DISK)
    good = checked.where(F.col("_error").isNull())
    partitions = good.where(F.col("kind").isNull() | (F.col("kind") == "partition")).drop(
        "_error", CORRUPT, "kind", *PLAN_ONLY_FIELDS, *SHARE_ONLY_FIELDS, *STREAMS_ONLY_FIELDS
    )
    plans = good.where(F.col("kind") == "plan").select(*PLAN_COLUMNS)
    shares = good.where(F.col("kind").isin(*SHARE_KINDS)).select(*SHARE_COLUMNS)
    streams = good.where(F.col("kind") == STREAMS).select(*STREAMS_FIELDS)
    return Telemetry(partitions, plans, checked, shares=shares, streams=streams)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
