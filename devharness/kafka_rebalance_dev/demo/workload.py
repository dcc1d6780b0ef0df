"""The producer side of the demo: a steady, per-partition-rated stream into one topic.

Every record the broker acknowledges is remembered as (topic, partition, offset): that list is
the "produced" side of the ledger, so a record counts as produced only when Kafka said it has it
(a send that failed during a broker restart is not something a consumer could lose).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from kafka import KafkaProducer

TICK_S = 0.05


class Workload:
    """Produces `rates[p]` records per second to partition p on a background thread.

    Rates can change while running (`set_rates`); fractional records carry over between ticks,
    so low rates stay exact over time."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            client_id="demo-workload",
            linger_ms=10,
            acks="all",
            retries=10,
        )
        self._rates: dict[int, float] = {}
        self._lock = threading.Lock()
        self._acked: list[tuple[str, int, int]] = []
        self._failed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- control -----------------------------------------------------------------------------
    def set_rates(self, rates: Mapping[int, float]) -> None:
        with self._lock:
            self._rates = {int(p): float(r) for p, r in rates.items() if r > 0}

    def rates(self) -> dict[int, float]:
        with self._lock:
            return dict(self._rates)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="demo-workload", daemon=True)
            self._thread.start()

    def stop(self, flush_timeout: float = 60) -> None:
        """Stop producing and wait until every send is acknowledged or failed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self.producer.flush(flush_timeout)

    def close(self) -> None:
        self.stop()
        self.producer.close(5)

    # -- results -------------------------------------------------------------------------------
    def produced(self) -> list[tuple[str, int, int]]:
        """(topic, partition, offset) of every acknowledged record so far."""
        with self._lock:
            return list(self._acked)

    @property
    def failed_count(self) -> int:
        with self._lock:
            return self._failed

    # -- the loop --------------------------------------------------------------------------------
    def _on_ack(self, metadata: Any) -> None:
        with self._lock:
            self._acked.append((metadata.topic, metadata.partition, metadata.offset))

    def _on_error(self, _error: BaseException) -> None:
        with self._lock:
            self._failed += 1

    def _run(self) -> None:
        owed: dict[int, float] = {}
        last = time.monotonic()
        sequence = 0
        while not self._stop.wait(TICK_S):
            now = time.monotonic()
            elapsed, last = now - last, now
            for partition, rate in self.rates().items():
                owed[partition] = owed.get(partition, 0.0) + rate * elapsed
                due = int(owed[partition])
                owed[partition] -= due
                for _ in range(due):
                    sequence += 1
                    try:
                        future = self.producer.send(
                            self.topic, value=b"%d" % sequence, partition=partition
                        )
                    except Exception:
                        self._on_error(RuntimeError("send refused"))
                        continue
                    future.add_callback(self._on_ack)
                    future.add_errback(self._on_error)
