"""Telemetry writers for synthetic fleets: JSON-lines files and the telemetry Kafka topic.

The wire format is the one the operator emits (docs/architecture.md, "Telemetry"): one JSON
object per line or per Kafka record (keys sorted, no spaces), keyed by group so one group's rows
stay ordered in one partition. The operator has its own writer
(`kafka_rebalance_operator.telemetry`): the pipeline may not import the operator, and the
operator's image does not ship `pipeline/`, so the few lines of format are written twice and
`tests/unit/pipeline/test_pipeline_schema.py` holds the two to the same bytes; the Spark
integration test reads
what the operator's writer wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kafka_rebalance_common.wire.telemetry import TELEMETRY_TOPIC

TELEMETRY_PARTITIONS = 3  # when the pipeline has to create the topic itself


def encode(row: dict[str, Any]) -> bytes:
    return json.dumps(row, sort_keys=True, separators=(",", ":")).encode()


def write_files(
    rows: Iterable[dict[str, Any]], directory: Path, rows_per_file: int = 250_000
) -> int:
    """Rows into directory/part-NNNNN.jsonl (several files, so Spark reads them in parallel)."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("part-*.jsonl"):
        old.unlink()
    written = 0
    handle = None
    try:
        for row in rows:
            if written % rows_per_file == 0:
                if handle:
                    handle.close()
                handle = (directory / f"part-{written // rows_per_file:05d}.jsonl").open("wb")
            assert handle is not None  # opened at the first row (written == 0)
            handle.write(encode(row) + b"\n")
            written += 1
    finally:
        if handle:
            handle.close()
    return written


def write_kafka(
    rows: Iterable[dict[str, Any]], bootstrap: str, topic: str = TELEMETRY_TOPIC
) -> int:
    """Produce rows to the telemetry topic (created if missing); returns the count written."""
    from kafka import KafkaProducer
    from kafka_rebalance_common.kafka_retry import ensure_topic

    ensure_topic(bootstrap, topic, TELEMETRY_PARTITIONS, client_id="kafka-rebalance-pipeline")
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="kafka-rebalance-pipeline",
        acks="all",
        linger_ms=20,
        batch_size=256 * 1024,
        compression_type=None,
    )
    written = 0
    try:
        for row in rows:
            producer.send(topic, key=str(row.get("group", "")).encode(), value=encode(row))
            written += 1
        producer.flush()
    finally:
        producer.close()
    return written
