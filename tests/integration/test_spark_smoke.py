"""PySpark reads a Kafka topic through the provisioned connector jars (no Ivy at run time)."""

from __future__ import annotations

import json
import uuid

import pytest
from kafka import KafkaProducer
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin

pytestmark = pytest.mark.integration


def test_spark_batch_read_returns_the_produced_rows(kafka: str, spark) -> None:
    topic = f"spark-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    rows = [{"partition_hint": i % 2, "lag": i * 10} for i in range(25)]
    producer = KafkaProducer(bootstrap_servers=kafka)
    for i, row in enumerate(rows):
        producer.send(topic, key=str(i).encode(), value=json.dumps(row).encode())
    producer.flush()
    producer.close()

    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    assert {"key", "value", "topic", "partition", "offset"} <= set(frame.columns)
    collected = frame.selectExpr("CAST(value AS STRING) AS v", "partition").collect()
    assert sorted(json.loads(r.v)["lag"] for r in collected) == sorted(r["lag"] for r in rows)
    assert {r.partition for r in collected} <= {0, 1}
    total = frame.groupBy().sum("offset").collect()  # a real aggregation runs on the executor
    assert total[0][0] is not None
