"""Where the telemetry rows travel: the operator produces them to this Kafka topic by default
(`kafka-rebalance operator --telemetry-topic`) and the pipeline reads and generates it
(docs/naming.md). Defined once, here, because the operator and the pipeline may not import each
other."""

from __future__ import annotations

TELEMETRY_TOPIC = "kafka-rebalance.telemetry"
