"""The "nothing lost" proof: a handler that writes down every record it processes, and the
reconciliation of what was produced against what was processed.

`record` is an in-process sidecar handler (`--handler kafka_rebalance_dev.demo.ledger:record`).
Each member appends one JSON line per record to `$KAFKA_REBALANCE_LEDGER_DIR/<member>.jsonl`:
`{"t": topic, "p": partition, "o": offset, "m": member, "e": epoch, "ts": wall ms}`. The batch
is written and flushed before the handler returns, and the sidecar commits only after that, so a
SIGKILL can lose at most a batch that was never acknowledged (and is therefore consumed again):
the ledger can show duplicates, never a gap that Kafka's committed offsets skipped.

`reconcile` reads every ledger file and compares it with the produced records.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafka_rebalance_sidecar.records import Batch

LEDGER_DIR_ENV = "KAFKA_REBALANCE_LEDGER_DIR"
SLOW_MS_ENV = "KAFKA_REBALANCE_SLOW_MS"
EXAMPLES = 10  # how many lost records a report lists

Coordinate = tuple[str, int, int]  # (topic, partition, offset)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def ledger_path(directory: Path, member: str) -> Path:
    """The member's ledger file (characters a file name cannot safely hold become `_`)."""
    return directory / f"{_UNSAFE.sub('_', member) or '_'}.jsonl"


def record(batch: Batch) -> None:
    """Sidecar handler: process a batch slowly if asked (`$KAFKA_REBALANCE_SLOW_MS` per record,
    a stand-in for real work), then append it to the member's ledger and flush."""
    directory = os.environ.get(LEDGER_DIR_ENV)
    if not directory:
        # Raising means "not delivered": better stuck and loud than a run with no proof.
        raise RuntimeError(f"{LEDGER_DIR_ENV} is not set: nowhere to write the ledger")
    slow_ms = float(os.environ.get(SLOW_MS_ENV) or 0)
    if slow_ms > 0 and batch.records:
        time.sleep(slow_ms * len(batch.records) / 1000)
    now = int(time.time() * 1000)
    lines = "".join(
        json.dumps(
            {
                "t": r.topic,
                "p": r.partition,
                "o": r.offset,
                "m": batch.member,
                "e": batch.epoch,
                "ts": now,
            },
            separators=(",", ":"),
        )
        + "\n"
        for r in batch.records
    )
    path = ledger_path(Path(directory), batch.member)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One write of whole lines in append mode: concurrent writers and a kill mid-write can at
    # worst leave a truncated last line, which `reconcile` counts as malformed and skips.
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(lines)
        handle.flush()


@dataclass(frozen=True)
class Entry:
    """One processed record as the ledger has it."""

    topic: str
    partition: int
    offset: int
    member: str
    epoch: int
    ts: int


def read_ledger(processed_dir: Path) -> tuple[list[Entry], int]:
    """Every entry of every `*.jsonl` file in the directory, and the count of malformed lines."""
    entries: list[Entry] = []
    malformed = 0
    for path in sorted(Path(processed_dir).glob("*.jsonl")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                entry = _parse_line(line)
                if entry is None:
                    if line.strip():
                        malformed += 1
                else:
                    entries.append(entry)
    return entries, malformed


def _parse_line(line: str) -> Entry | None:
    try:
        raw = json.loads(line)
        entry = Entry(
            topic=raw["t"],
            partition=raw["p"],
            offset=raw["o"],
            member=raw["m"],
            epoch=raw["e"],
            ts=raw.get("ts", 0),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    ok = (
        isinstance(entry.topic, str)
        and isinstance(entry.member, str)
        and all(isinstance(v, int) for v in (entry.partition, entry.offset, entry.epoch))
    )
    return entry if ok else None


@dataclass(frozen=True)
class Conflict:
    """Two or more members processed records of one partition under the same epoch: the plan
    gave that partition to one member per epoch, so this is a double assignment to look at."""

    topic: str
    partition: int
    epoch: int
    members: tuple[str, ...]


@dataclass(frozen=True)
class Overlap:
    """Two members processed records of one partition during overlapping spans of wall time
    (each span: first to last record one member processed of it under one epoch). A hand-over
    that revokes before it grants never does this, whatever the epochs."""

    topic: str
    partition: int
    first: tuple[str, int, int, int]  # (member, epoch, from ms, to ms)
    second: tuple[str, int, int, int]


@dataclass(frozen=True)
class LedgerReport:
    produced: int  # records produced (distinct coordinates)
    processed: int  # ledger lines read (every delivery, duplicates included)
    unique: int  # distinct coordinates processed
    lost: int  # produced, never processed
    duplicates: int  # distinct coordinates processed more than once
    unexpected: int  # distinct coordinates processed that were not in `produced`
    malformed_lines: int  # unreadable ledger lines (a write cut short by a kill)
    per_member: dict[str, int] = field(default_factory=dict)  # ledger lines per member
    lost_examples: tuple[Coordinate, ...] = ()  # the first lost records, sorted
    conflicts: tuple[Conflict, ...] = ()  # see `same_epoch_conflicts`
    overlaps: tuple[Overlap, ...] = ()  # see `concurrent_owners`

    @property
    def nothing_lost(self) -> bool:
        return self.lost == 0

    def summary(self) -> str:
        """One line for logs and the demo's output."""
        return (
            f"produced {self.produced}, processed {self.processed} ({self.unique} unique), "
            f"lost {self.lost}, duplicates {self.duplicates}, unexpected {self.unexpected}, "
            f"same-epoch conflicts {len(self.conflicts)}, concurrent owners "
            f"{len(self.overlaps)}, malformed lines {self.malformed_lines}"
        )


def _produced_set(
    produced: Mapping[tuple[str, int], int] | Iterable[Coordinate],
) -> set[Coordinate]:
    """A mapping means (topic, partition) -> end offset: offsets 0 .. end-1 were produced (a
    plain producer into a new topic). An iterable lists the produced coordinates exactly."""
    if isinstance(produced, Mapping):
        return {(t, p, o) for (t, p), end in produced.items() for o in range(end)}
    return {(t, p, o) for t, p, o in produced}


def same_epoch_conflicts(entries: Iterable[Entry]) -> tuple[Conflict, ...]:
    """(topic, partition, epoch) processed by more than one member, sorted."""
    members: dict[tuple[str, int, int], set[str]] = {}
    for entry in entries:
        members.setdefault((entry.topic, entry.partition, entry.epoch), set()).add(entry.member)
    return tuple(
        Conflict(topic, partition, epoch, tuple(sorted(names)))
        for (topic, partition, epoch), names in sorted(members.items())
        if len(names) > 1
    )


def concurrent_owners(entries: Iterable[Entry]) -> tuple[Overlap, ...]:
    """Pairs of members whose spans on one partition overlap in time, sorted."""
    spans: dict[tuple[str, int], dict[tuple[str, int], list[int]]] = {}
    for entry in entries:
        span = spans.setdefault((entry.topic, entry.partition), {}).setdefault(
            (entry.member, entry.epoch), [entry.ts, entry.ts]
        )
        span[0], span[1] = min(span[0], entry.ts), max(span[1], entry.ts)
    found: list[Overlap] = []
    for (topic, partition), by_owner in sorted(spans.items()):
        owned = sorted(
            (start, end, member, epoch) for (member, epoch), (start, end) in by_owner.items()
        )
        for i, (start, end, member, epoch) in enumerate(owned):
            for later_start, later_end, other, other_epoch in owned[i + 1 :]:
                if later_start > end:
                    break
                if other != member:
                    found.append(
                        Overlap(
                            topic,
                            partition,
                            (member, epoch, start, end),
                            (other, other_epoch, later_start, later_end),
                        )
                    )
    return tuple(found)


def reconcile(
    produced: Mapping[tuple[str, int], int] | Iterable[Coordinate],
    processed_dir: Path,
) -> LedgerReport:
    """Compare the produced records with every ledger file in `processed_dir`."""
    expected = _produced_set(produced)
    entries, malformed = read_ledger(processed_dir)
    seen = Counter((e.topic, e.partition, e.offset) for e in entries)
    lost = sorted(expected.difference(seen))
    return LedgerReport(
        produced=len(expected),
        processed=len(entries),
        unique=len(seen),
        lost=len(lost),
        duplicates=sum(1 for count in seen.values() if count > 1),
        unexpected=sum(1 for coordinate in seen if coordinate not in expected),
        malformed_lines=malformed,
        per_member=dict(sorted(Counter(e.member for e in entries).items())),
        lost_examples=tuple(lost[:EXAMPLES]),
        conflicts=same_epoch_conflicts(entries),
        overlaps=concurrent_owners(entries),
    )
