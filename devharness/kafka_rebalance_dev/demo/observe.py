"""What the live table and the summary are computed from, sampled about once a second.

Lag is read the way the operator reads it (kafka-python admin: committed offsets with
`list_group_offsets`, log ends with `list_partition_offsets`), but independently of it, so the
demo's figures do not merely repeat the operator's status. The actual assignment comes from
`describe_groups` (static members report their pod name as group_instance_id); records
processed per member come from tailing the ledger files the sidecars append to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka import TopicPartition
from kafka.admin import OffsetSpec
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_operator.kafka.verify import actual_assignment

LIVE_RETRY_BUDGET_S = 1.0  # a sample after the first: retry this long, then show the last one


@dataclass(frozen=True)
class Sample:
    """One observation of the group. `lag` counts an uncommitted partition from its log start
    (the sidecars reset to earliest), so a partition nobody consumes shows its whole backlog."""

    t: float  # seconds since the sampler started
    ends: dict[int, int]
    committed: dict[int, int]
    lag: dict[int, int]
    owners: dict[int, str]
    group_state: str
    processed: dict[str, int] = field(default_factory=dict)  # member -> records so far

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())

    @property
    def produced(self) -> int:
        return sum(self.ends.values())

    @property
    def processed_total(self) -> int:
        return sum(self.processed.values())


class LedgerTail:
    """Counts ledger lines per member incrementally (reads only what was appended)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._offsets: dict[Path, int] = {}
        self.counts: dict[str, int] = {}

    def update(self) -> dict[str, int]:
        if self.directory.is_dir():
            for path in sorted(self.directory.glob("*.jsonl")):
                start = self._offsets.get(path, 0)
                with open(path, "rb") as handle:
                    handle.seek(start)
                    chunk = handle.read()
                complete = chunk.rfind(b"\n") + 1  # a line being written counts when finished
                if complete:
                    self._offsets[path] = start + complete
                    member = path.stem
                    self.counts[member] = self.counts.get(member, 0) + chunk.count(
                        b"\n", 0, complete
                    )
        return dict(self.counts)


class Sampler:
    """Reads the group's lag and assignment from Kafka and its progress from the ledger."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, partitions: int, ledger_dir: Path
    ) -> None:
        self.group, self.topic, self.partitions = group, topic, partitions
        self.admin = RetryingAdmin(
            bootstrap_servers=bootstrap, client_id="demo-sampler", request_timeout_ms=5000
        )
        self.ledger = LedgerTail(ledger_dir)
        self.started = time.monotonic()
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._starts: dict[int, int] | None = None
        self._last: Sample | None = None

    def close(self) -> None:
        self.admin.close()

    def _offsets(self, admin: RetryingAdmin, spec: int) -> dict[int, int]:
        result = admin.list_partition_offsets({tp: spec for tp in self._tps})
        return {tp.partition: int(value.offset) for tp, value in result.items()}

    def sample(self) -> Sample:
        """One observation. The first one rides out a fresh broker's retriable errors for the
        admin client's whole budget; later ones retry briefly and, on a failed read (a broker
        restart), return the previous one re-timed, so the live view never stalls."""
        t = time.monotonic() - self.started
        processed = self.ledger.update()
        admin = self.admin if self._last is None else self.admin.within(LIVE_RETRY_BUDGET_S)
        try:
            if self._starts is None:
                self._starts = self._offsets(admin, OffsetSpec.EARLIEST)
            ends = self._offsets(admin, OffsetSpec.LATEST)
            offsets = admin.list_group_offsets({self.group: None}).get(self.group) or {}
            committed = {
                tp.partition: int(v.offset)
                for tp, v in offsets.items()
                if tp.topic == self.topic and v.offset is not None and v.offset >= 0
            }
            described = admin.describe_groups([self.group]).get(self.group) or {}
        except Exception:
            if self._last is None:
                raise
            last = self._last
            return Sample(
                t, last.ends, last.committed, last.lag, last.owners, "unreadable", processed
            )
        lag = {p: max(0, end - committed.get(p, self._starts.get(p, 0))) for p, end in ends.items()}
        owners: dict[int, str] = {}
        for member, topics in actual_assignment(described).items():
            for partition in topics.get(self.topic, []):
                owners[partition] = member
        sample = Sample(
            t, ends, committed, lag, owners, str(described.get("group_state") or "?"), processed
        )
        self._last = sample
        return sample
