"""Telemetry rows (docs/architecture.md, "Telemetry") and where they go: JSON-lines files and/or a
Kafka topic, same schema either way, so the pipeline reads both alike.

Building rows is pure; the sinks are the only I/O. A sink that fails drops its rows with a
warning: telemetry must never stop the operator from keeping the group balanced.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)


def partition_row(
    *,
    ts_ms: int,
    cluster: str,
    namespace: str,
    policy: str,
    group: str,
    topic: str,
    partition: int,
    log_start: int | None,
    log_end: int | None,
    committed: int | None,
    lag: int | None,
    lag_state: str,
    time_lag_s: float | None,
    owner: str | None,
    epoch: int,
) -> dict[str, Any]:
    return {
        "ts_ms": ts_ms,
        "cluster": cluster,
        "namespace": namespace,
        "policy": policy,
        "group": group,
        "topic": topic,
        "partition": partition,
        "log_start": log_start,
        "log_end": log_end,
        "committed": committed,
        "lag": lag,
        "lag_state": lag_state,
        "time_lag_s": None if time_lag_s is None else round(time_lag_s, 3),
        "owner": owner,
        "epoch": epoch,
    }


def plan_row(
    *,
    ts_ms: int,
    group: str,
    epoch: int,
    strategy: str,
    moves: int,
    before: float | None,
    after: float | None,
    namespace: str,
    policy: str,
) -> dict[str, Any]:
    return {
        "ts_ms": ts_ms,
        "kind": "plan",
        "group": group,
        "epoch": epoch,
        "strategy": strategy,
        "moves": moves,
        "max_load_ratio_before": before,
        "max_load_ratio_after": after,
        "namespace": namespace,
        "policy": policy,
    }


class Sink(Protocol):
    def write(self, rows: Iterable[Mapping[str, Any]]) -> None: ...
    def close(self) -> None: ...


class JsonLinesSink:
    """Appends one JSON object per line; one write per poll, so lines are never interleaved."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        text = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in rows)
        if not text:
            return
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(text)

    def close(self) -> None:
        pass


class KafkaSink:
    """Produces rows to a topic, keyed by group so one group's rows stay ordered."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap_servers.split(","),
            client_id="kafka-rebalance-operator-telemetry",
            linger_ms=200,
            acks=1,
        )

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            key = str(row.get("group", "")).encode()
            value = json.dumps(row, sort_keys=True, separators=(",", ":")).encode()
            self.producer.send(self.topic, key=key, value=value)

    def close(self) -> None:
        self.producer.flush(5)
        self.producer.close(5)


class Telemetry:
    """Fan-out to the configured sinks; failures are logged and swallowed."""

    def __init__(self, sinks: Iterable[Sink] = ()) -> None:
        self.sinks = list(sinks)

    @property
    def enabled(self) -> bool:
        """False with no sinks: callers skip building rows nobody reads."""
        return bool(self.sinks)

    def emit(self, rows: list[dict[str, Any]]) -> None:
        for sink in self.sinks:
            try:
                sink.write(rows)
            except Exception as error:
                log.warning(
                    "telemetry sink %s dropped %d rows: %s", type(sink).__name__, len(rows), error
                )

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:
                log.debug("closing telemetry sink failed", exc_info=True)
