"""The operator's key for one partition: (topic, partition number), as kafka-python's
TopicPartition orders them. Defined once here; every module that keys by partition imports it."""

from __future__ import annotations

PartitionKey = tuple[str, int]
