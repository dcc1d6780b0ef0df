"""A second client engine for assign mode: librdkafka, through confluent-kafka.

Why: kafka-python decodes every fetched record in Python, which is most of a Python consumer's
cost; librdkafka decodes in C. Measured on one broker (benchmarks.datapath, 100-byte records, 6
partitions), a bare confluent-kafka consumer reads about seven times as many records per second
as a bare kafka-python one at a fifth of its CPU per record.

Why only assign mode: in group mode the sidecar hosts the plan-following client-side assignor,
which lives inside kafka-python's group protocol. Assign mode needs no assignor: it assigns
partitions by hand and commits with metadata, which librdkafka does as well.

`LibrdkafkaConsumer` offers exactly the part of kafka-python's `KafkaConsumer` the assign runner
and the consume loop use, with kafka-python's types at the boundary (`TopicPartition`,
`OffsetAndMetadata`, poll results keyed by partition whose records have ConsumerRecord's field
order), so the runner, the batch building and the commits are one code path for both engines.
The semantics that matter are kept:

- `assign()` changes the assignment incrementally, so a kept partition keeps its position and a
  granted one starts from its committed offset (else `auto_offset_reset`), as kafka-python does;
- `commit()` is synchronous and raises if any partition's commit failed, so an acknowledgement is
  never counted that the broker did not store;
- CRC checks are on (librdkafka's default is off; kafka-python checks).
"""

from __future__ import annotations

import logging
from collections import namedtuple
from collections.abc import Iterable, Mapping
from typing import Any

from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

log = logging.getLogger("kafka_rebalance_sidecar.librdkafka")

# kafka-python consumer option -> librdkafka property (values converted by `librdkafka_config`).
_PROPERTIES = {
    "bootstrap_servers": "bootstrap.servers",
    "group_id": "group.id",
    "client_id": "client.id",
    "enable_auto_commit": "enable.auto.commit",
    "auto_offset_reset": "auto.offset.reset",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "fetch_max_bytes": "fetch.max.bytes",
    "max_partition_fetch_bytes": "max.partition.fetch.bytes",
}
# librdkafka refuses a `fetch.max.bytes` below its `message.max.bytes` (default 1,000,000); a
# smaller bound of the HTTP body still holds, as the delivery cuts batches into pieces.
_MIN_FETCH_MAX_BYTES = 1_000_000
FETCH_QUEUE_BACKOFF_MS = 20
# Options the poll loop applies itself rather than the client.
_LOOP_OPTIONS = frozenset({"max_poll_records"})

# A fetched record in kafka-python's ConsumerRecord field order (the batch builder takes fields
# by position); the fields librdkafka does not report are None.
Fetched = namedtuple(
    "Fetched",
    "topic partition leader_epoch offset timestamp timestamp_type key value headers "
    "checksum serialized_key_size serialized_value_size serialized_header_size",
)


class EngineError(ValueError):
    """The engine cannot be used with these settings; the message names the setting."""


def librdkafka_config(options: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python consumer options as librdkafka properties; a setting with no translation
    is refused by name rather than silently dropped (a dropped TLS setting would connect in
    the clear or not at all)."""
    unknown = sorted(set(options) - set(_PROPERTIES) - _LOOP_OPTIONS)
    if unknown:
        raise EngineError(
            f"--engine librdkafka: no translation for the client setting(s) {', '.join(unknown)}"
        )
    config: dict[str, Any] = {
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "check.crcs": True,
        # librdkafka stops fetching a partition whose local queue is full and waits this long
        # before it looks again (default 1 s): a consumer that drains the queue within that
        # second then sits idle, which at 100-byte records cost it most of its rate.
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
    }
    for name, value in options.items():
        if name in _LOOP_OPTIONS:
            continue
        if name == "bootstrap_servers" and not isinstance(value, str):
            value = ",".join(value)
        if name == "fetch_max_bytes":
            value = max(int(value), _MIN_FETCH_MAX_BYTES)
        config[_PROPERTIES[name]] = value
    return config


class LibrdkafkaConsumer:
    """The subset of kafka-python's KafkaConsumer that assign mode uses, on librdkafka."""

    def __init__(self, options: Mapping[str, Any], metadata_timeout_s: float = 10.0) -> None:
        from confluent_kafka import Consumer

        self._timeout_s = metadata_timeout_s
        self._reset_latest = options.get("auto_offset_reset") == "latest"
        self._consumer = Consumer(librdkafka_config(options), logger=log)
        self._assigned: set[TopicPartition] = set()

    # -- assignment ---------------------------------------------------------------------------

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch exactly `partitions`: kept ones keep their position, new ones start from their
        committed offset (else auto_offset_reset). Raises, changing nothing, when the committed
        offsets cannot be read (the group coordinator not ready yet): the caller retries."""
        target = set(partitions)
        gone = self._assigned - target
        new = sorted(target - self._assigned)
        starts = self._start_offsets(new) if new else []
        if gone:
            self._consumer.incremental_unassign([self._native(tp) for tp in sorted(gone)])
        if starts:
            self._consumer.incremental_assign(starts)
        self._assigned = target

    def _start_offsets(self, partitions: list[TopicPartition]) -> list[Any]:
        """Where each partition starts, resolved here rather than by librdkafka (which, asked
        to start from the stored offset, gives up on a partition when the offset fetch fails,
        for example while a new group's coordinator is still loading)."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

        committed = self._consumer.committed(
            [self._native(tp) for tp in partitions], timeout=self._timeout_s
        )
        starts = []
        for tp, got in zip(partitions, committed, strict=True):
            if got.error is not None:
                raise RuntimeError(f"committed offset of {tp.topic}-{tp.partition}: {got.error}")
            reset = OFFSET_END if self._reset_latest else OFFSET_BEGINNING
            starts.append(self._native(tp, int(got.offset) if got.offset >= 0 else reset))
        return starts

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record the application will see from `tp`."""
        (got,) = self._consumer.position([self._native(tp)])
        if got.offset >= 0:
            return int(got.offset)
        committed = self.committed(tp)  # nothing consumed yet: it starts where it stands
        if committed is not None:
            return committed
        low, high = self._watermarks(tp)
        return high if self._reset_latest else low

    def committed(self, tp: TopicPartition) -> int | None:
        (got,) = self._consumer.committed([self._native(tp)], timeout=self._timeout_s)
        if got.error is not None:
            raise RuntimeError(f"committed offset of {tp.topic}-{tp.partition}: {got.error}")
        return int(got.offset) if got.offset >= 0 else None

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._watermarks(tp)[0] for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._watermarks(tp)[1] for tp in partitions}

    def partitions_for_topic(self, topic: str) -> set[int]:
        """The topic's partitions from fresh metadata (empty if the topic does not exist)."""
        metadata = self._consumer.list_topics(topic, timeout=self._timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return set()
        return set(metadata.partitions)

    # -- records and commits ------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Fetched]]:
        """Up to `max_records` records, grouped by partition in offset order."""
        count = max_records or 500
        # consume(n, timeout) waits until n records are there or the timeout passes; a poll
        # returns as soon as there is something: wait for one, then take what is already here.
        messages = self._consumer.consume(num_messages=1, timeout=timeout_ms / 1000)
        if messages and count > 1:
            messages += self._consumer.consume(num_messages=count - 1, timeout=0)
        polled: dict[TopicPartition, list[Fetched]] = {}
        for m in messages:
            error = m.error()
            if error is not None:
                if error.fatal():
                    raise RuntimeError(f"librdkafka: {error}")
                log.warning("fetch error on %s-%s: %s", m.topic(), m.partition(), error)
                continue
            tp = TopicPartition(m.topic(), m.partition())
            records = polled.get(tp)
            if records is None:
                records = polled[tp] = []
            records.append(
                Fetched(m.topic(), m.partition(), None, m.offset(), m.timestamp()[1], None,
                        m.key(), m.value(), m.headers() or (), None, None, None, None)
            )  # fmt: skip
        return polled

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: int) -> None:
        """Synchronous; raises if the commit or any partition's commit failed. (librdkafka
        bounds a commit by its own request timeouts, not by `timeout_ms`.)"""
        from confluent_kafka import TopicPartition as Native

        native = [
            Native(tp.topic, tp.partition, o.offset, metadata=o.metadata or None)
            for tp, o in offsets.items()
        ]
        result = self._consumer.commit(offsets=native, asynchronous=False)
        failed = [tp for tp in result or () if tp.error is not None]
        if failed:
            raise RuntimeError(
                "commit failed for "
                + ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
            )

    def close(self, autocommit: bool = False) -> None:
        self._consumer.close()  # auto commit is off: closing commits nothing

    # -- helpers ------------------------------------------------------------------------------

    def _native(self, tp: TopicPartition, offset: int | None = None) -> Any:
        from confluent_kafka import TopicPartition as Native

        if offset is None:
            return Native(tp.topic, tp.partition)
        return Native(tp.topic, tp.partition, offset)

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        low, high = self._consumer.get_watermark_offsets(self._native(tp), timeout=self._timeout_s)
        return int(low), int(high)
