"""The reference for `pipeline rates`: a bare Spark read of the same telemetry.

"Bare read" here means: the same files, read by the same Spark session settings through the
pipeline's own reader (`spark_io.read_raw`: the explicit telemetry schema, PERMISSIVE mode with
the corrupt-record column, recursive file lookup), every column of every row materialised and
written to Spark's `noop` sink, which discards it. Nothing is cached, validated, shuffled or
aggregated. A `count()` would not do: with no column needed, Spark's JSON reader skips parsing
the fields, so it would time line splitting, not the read the job has to do. Rows are counted
with an `Observation` on the same pass, not a second one.

The clock is the one `run_rates` reports (`seconds` in its summary): from a started session to
the last row written; JVM and Python start are outside both. Print one JSON line:

    python -m benchmarks.pipeline_bare_read -i /tmp/t10m/part-00000.jsonl --driver-memory 4g

Alternate it with the rates job in one shell session (`benchmarks/pipeline_run.sh`
records the load next to each), and take the ratio of neighbouring runs.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def bare_read(spark: Any, sources: list[str]) -> dict[str, Any]:
    """Read `sources` with the telemetry schema into the noop sink; rows and seconds."""
    from kafka_rebalance_pipeline.spark_io import read_raw
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    started = time.perf_counter()
    observed = Observation("bare_read")
    frame = read_raw(spark, sources).observe(observed, F.count(F.lit(1)).alias("rows"))
    frame.write.format("noop").mode("overwrite").save()
    rows = int(observed.get["rows"])
    elapsed = time.perf_counter() - started
    return {
        "sources": sources,
        "rows_total": rows,
        "seconds": round(elapsed, 3),
        "rows_per_second": round(rows / elapsed, 1) if elapsed > 0 else None,
        "mode": "bare-read (schema, PERMISSIVE, noop sink)",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", "-i", action="append", required=True)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--shuffle-partitions", type=int, default=None)
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    from kafka_rebalance_pipeline.spark_io import build_session

    spark = build_session(
        master=args.master,
        app_name="kafka-rebalance-bare-read",
        shuffle_partitions=args.shuffle_partitions,
        driver_memory=args.driver_memory,
        conf=args.conf,
    )
    try:
        print(json.dumps(bare_read(spark, args.input), indent=2, sort_keys=True))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
