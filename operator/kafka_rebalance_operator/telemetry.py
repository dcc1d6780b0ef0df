"""Telemetry rows (docs/architecture.md, "Telemetry") and where they go: JSON-lines files and/or a
Kafka topic, same schema either way, so the pipeline reads both alike.

Building rows is pure; the sinks are the only I/O. A sink that fails drops its rows with a
warning: telemetry must never stop the operator from keeping the group balanced.

Partition rows are written for the partitions whose row changed since its last one (any field
but `ts_ms`: offsets, lag, state, time lag, owner, epoch), and for every partition at least
every `REFRESH_S` seconds (`Columns`, `Emitted`). A partition without a row at a poll had the
row it last had (its time lag included, so a consumer stuck behind shows a row every poll).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

import numpy as np

from kafka_rebalance_operator.lag import STATES, Layout

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


def share_rows(
    *,
    ts_ms: int,
    cluster: str,
    namespace: str,
    policy: str,
    group: str,
    partitions: Mapping[str, int],
    log_ends: Mapping[tuple[str, int], int],
    backlog: Mapping[tuple[str, int], int],
    rates: Mapping[tuple[str, int], float],
    holders: Mapping[tuple[str, int], Sequence[str]],
    epoch: int,
) -> list[dict[str, Any]]:
    """One `kind: "share"` row per share-partition of a share group's poll (topic -> partition
    count in `partitions`): its log end, backlog (`lag`; null when unknown, never 0), production
    rate (records/s; null until measured) and the member ids on it, sorted. Every partition
    every poll, in (topic, partition) order."""
    rows = []
    for topic, count in sorted(partitions.items()):
        for p in range(count):
            key = (topic, p)
            rate = rates.get(key)
            rows.append(
                {
                    "ts_ms": ts_ms,
                    "kind": "share",
                    "cluster": cluster,
                    "namespace": namespace,
                    "policy": policy,
                    "group": group,
                    "topic": topic,
                    "partition": p,
                    "log_end": log_ends.get(key),
                    "lag": backlog.get(key),
                    "rate": None if rate is None else round(rate, 3),
                    "members": sorted(holders.get(key, ())),
                    "epoch": epoch,
                }
            )
    return rows


def _owners(tasks: Mapping[str, Mapping[str, Sequence[int]]]) -> dict[tuple[str, int], list[str]]:
    """(subtopology, partition) -> the members holding it, sorted."""
    held: dict[tuple[str, int], list[str]] = {}
    for member in sorted(tasks):
        for subtopology, parts in tasks[member].items():
            for p in parts:
                held.setdefault((subtopology, int(p)), []).append(member)
    return held


def streams_rows(
    *,
    ts_ms: int,
    cluster: str,
    namespace: str,
    policy: str,
    group: str,
    counts: Mapping[str, int],
    lag: Mapping[tuple[str, int], float | None],
    rate: Mapping[tuple[str, int], float | None],
    log_end: Mapping[tuple[str, int], float | None],
    active: Mapping[str, Mapping[str, Sequence[int]]],
    standby: Mapping[str, Mapping[str, Sequence[int]]],
    processes: Mapping[str, str],
    changelog: Mapping[tuple[str, int], int],
    epoch: int,
) -> list[dict[str, Any]]:
    """One `kind: "streams"` row per task of a streams group's poll (subtopology -> task count
    in `counts`): the task's input backlog (`lag`, summed over its source partitions; null when
    one is unknown, never 0), production `rate` (records/s; null until measured) and input
    `log_end` (summed likewise), the member running it (`owner`, null when none) and that
    member's `process`, whether it is `stateful` and its `changelog` size (records; null for a
    stateless task), and the members holding its `standbys`, sorted. Every task every poll,
    in (subtopology, partition) order."""
    owners, standbys = _owners(active), _owners(standby)
    rows = []
    for subtopology, count in sorted(counts.items()):
        for p in range(count):
            key = (subtopology, p)
            owner = next(iter(owners.get(key, ())), None)
            task_lag, task_rate, end = lag.get(key), rate.get(key), log_end.get(key)
            rows.append(
                {
                    "ts_ms": ts_ms,
                    "kind": "streams",
                    "cluster": cluster,
                    "namespace": namespace,
                    "policy": policy,
                    "group": group,
                    "subtopology": subtopology,
                    "partition": p,
                    "lag": None if task_lag is None else int(task_lag),
                    "rate": None if task_rate is None else round(task_rate, 3),
                    "log_end": None if end is None else int(end),
                    "owner": owner,
                    "process": None if owner is None else processes.get(owner),
                    "stateful": key in changelog,
                    "changelog": changelog.get(key),
                    "standbys": standbys.get(key, []),
                    "epoch": epoch,
                }
            )
    return rows


class Sink(Protocol):
    def write(self, rows: Iterable[Mapping[str, Any]]) -> None: ...
    def close(self) -> None: ...


class JsonLinesSink:
    """Appends one JSON object per line; a poll's rows are written under a lock, so the lines
    of two polls are never interleaved."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        if isinstance(rows, EncodedRows):
            lines: Iterable[str] = rows.lines  # written as they are, never joined into a copy
        else:
            lines = [json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in rows]
        if not lines:
            return
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.writelines(lines)

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
        if isinstance(rows, EncodedRows):
            key = rows.group.encode()
            for line in rows.lines:
                self.producer.send(self.topic, key=key, value=line[:-1].encode())
            return
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

    def emit(self, rows: Sequence[dict[str, Any]]) -> None:
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


# ------------------------------------------------------------------------ partition rows, columnar

REFRESH_S = 300.0  # every partition gets a row at least this often, changed or not
ENCODE_CHUNK = 8192  # rows encoded at a time (`Columns.encoded`): bounds a poll's transient strings


@dataclass
class Emitted:
    """What the last row of each partition said (columnar, in `layout` order), so the next
    poll writes rows only for partitions whose row changed. A row is kept as one 64-bit digest
    of its fields but `ts_ms` (`Columns.digests`): two rows with the same fields have the same
    digest, so a partition whose row is unchanged is never written before `REFRESH_S`. Each
    field is folded in by a bijection of the 64-bit state, so rows that differ in one field
    never share a digest; rows that differ in several do with a chance of about 2**-64, the only
    case where a changed row would wait for its refresh."""

    layout: Layout
    digest: np.ndarray  # uint64, one per partition
    at: np.ndarray  # when each partition's last row was written
    names: dict[str, int] = field(default_factory=dict)  # owner name -> stable code


_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio, odd
_SEED = np.uint64(0x243F6A8885A308D3)


def _mix(digest: np.ndarray, column: np.ndarray) -> np.ndarray:
    """`digest` (uint64, updated in place) folded with `column`'s 64 bits, row by row."""
    digest ^= column.astype(np.int64, copy=False).view(np.uint64)
    digest *= _MULTIPLIER
    digest ^= digest >> np.uint64(29)
    return digest


@dataclass
class Columns:
    """One poll's partition rows as columns in `layout` order. Offsets and lags: -1 for None;
    time lags: NaN for None, rounded as written; owner: index into `owners` (-1: none)."""

    layout: Layout
    log_start: np.ndarray
    log_end: np.ndarray
    committed: np.ndarray
    lag: np.ndarray
    state: np.ndarray
    time_lag: np.ndarray
    owner: np.ndarray
    owners: tuple[str, ...]
    epoch: int

    def digests(self, names: dict[str, int]) -> np.ndarray:
        """One uint64 per partition of its row's fields but `ts_ms` (the owner by its stable
        code in `names`, which gains the owners it lacks): equal rows, equal digests. A column
        at a time, so the transient is a few arrays of one value per partition."""
        codes = np.array([names.setdefault(m, len(names)) for m in self.owners] + [-1], np.int64)
        digest = np.full(self.layout.size, _SEED, np.uint64)
        for column in (self.log_start, self.log_end, self.committed, self.lag, self.state):
            _mix(digest, column)
        _mix(digest, codes[self.owner])  # owner -1 picks the trailing -1
        _mix(digest, np.full(1, self.epoch, np.int64))
        # the time lag by its bits, with every NaN one NaN and -0.0 as 0.0 (they compare equal)
        time_lag = np.where(np.isnan(self.time_lag), np.nan, self.time_lag).astype(np.float64) + 0.0
        digest ^= time_lag.view(np.uint64)
        digest *= _MULTIPLIER
        digest ^= digest >> np.uint64(32)
        return digest

    def changed_since(self, previous: Emitted | None, now: float) -> np.ndarray:
        """The partitions that need a row: changed, new, or not written for `REFRESH_S`."""
        n = self.layout.size
        if previous is None:
            return np.ones(n, bool)
        digest = self.digests(previous.names)
        changed = np.ones(n, bool)
        into, out = self.layout.carry(previous.layout)
        if len(into):
            same = digest[into] == previous.digest[out]
            changed[into] = ~same | (now - previous.at[out] >= REFRESH_S)
        return changed

    def emitted(self, previous: Emitted | None, changed: np.ndarray, now: float) -> Emitted:
        """The record after this poll's rows (`changed`) are written: this poll's digests (a
        partition without a row had the same one), and when each partition's row was written."""
        names = dict(previous.names) if previous is not None else {}
        at = np.full(self.layout.size, now)
        if previous is not None:
            into, out = self.layout.carry(previous.layout)
            kept = ~changed[into]
            at[into[kept]] = previous.at[out[kept]]
        return Emitted(self.layout, self.digests(names), at, names)

    def encoded(
        self,
        changed: np.ndarray,
        *,
        ts_ms: int,
        cluster: str,
        namespace: str,
        policy: str,
        group: str,
    ) -> EncodedRows:
        """The rows of `rows`, already JSON (the sinks' own encoding: sorted keys, no spaces),
        made from the columns without a dict per row. The lines are made `ENCODE_CHUNK` rows at
        a time as a sink reads them, so a poll that writes every partition's row never holds
        them all (nor a string per field of each) at once."""
        picked = np.flatnonzero(changed)
        spans = sorted((base, topic) for topic, (base, _n) in self.layout.spans.items())
        bases = np.array([b for b, _t in spans], np.int64)
        topics = [json.dumps(t) for _b, t in spans]
        owners = [json.dumps(m) for m in self.owners]
        states = [json.dumps(s.value) for s in STATES]
        head = '{"cluster":' + json.dumps(cluster) + ',"committed":'
        mid = f',"epoch":{self.epoch},"group":{json.dumps(group)},"lag":'
        ns = ',"namespace":' + json.dumps(namespace) + ',"owner":'
        pol = ',"policy":' + json.dumps(policy) + ',"time_lag_s":'
        tail = f',"ts_ms":{ts_ms}}}\n'

        def chunk(rows: np.ndarray) -> list[str]:
            which = (np.searchsorted(bases, rows, side="right") - 1).tolist()
            partitions = (rows - bases[which]).tolist() if len(rows) else []

            def num(values: np.ndarray) -> list[str]:
                return ["null" if v < 0 else str(v) for v in values[rows].tolist()]

            committed, lag = num(self.committed), num(self.lag)
            log_end, log_start = num(self.log_end), num(self.log_start)
            time_lag = ["null" if v != v else repr(v) for v in self.time_lag[rows].tolist()]
            state = self.state[rows].tolist()
            owner = self.owner[rows].tolist()
            return [
                f'{head}{committed[k]}{mid}{lag[k]},"lag_state":{states[state[k]]},'
                f'"log_end":{log_end[k]},"log_start":{log_start[k]}{ns}'
                f'{owners[owner[k]] if owner[k] >= 0 else "null"},"partition":{partitions[k]}'
                f'{pol}{time_lag[k]},"topic":{topics[which[k]]}{tail}'
                for k in range(len(rows))
            ]

        def lines() -> Iterator[str]:
            for start in range(0, len(picked), ENCODE_CHUNK):
                yield from chunk(picked[start : start + ENCODE_CHUNK])

        return EncodedRows(lines, len(picked), group)

    def rows(
        self,
        changed: np.ndarray,
        *,
        ts_ms: int,
        cluster: str,
        namespace: str,
        policy: str,
        group: str,
    ) -> list[dict[str, Any]]:
        """The `partition_row`s of the `changed` partitions, in (topic, partition) order."""
        picked = np.flatnonzero(changed)
        if not len(picked):
            return []
        spans = sorted((base, topic) for topic, (base, _n) in self.layout.spans.items())
        bases = np.array([b for b, _t in spans], np.int64)
        which = np.searchsorted(bases, picked, side="right") - 1
        columns = [
            which.tolist(),
            (picked - bases[which]).tolist(),
            self.log_start[picked].tolist(),
            self.log_end[picked].tolist(),
            self.committed[picked].tolist(),
            self.lag[picked].tolist(),
            self.state[picked].tolist(),
            self.time_lag[picked].tolist(),
            self.owner[picked].tolist(),
        ]
        states = [s.value for s in STATES]
        topics = [t for _b, t in spans]
        owners = self.owners
        return [
            {
                "ts_ms": ts_ms,
                "cluster": cluster,
                "namespace": namespace,
                "policy": policy,
                "group": group,
                "topic": topics[t],
                "partition": p,
                "log_start": None if start < 0 else start,
                "log_end": None if end < 0 else end,
                "committed": None if committed < 0 else committed,
                "lag": None if lag < 0 else lag,
                "lag_state": states[state],
                "time_lag_s": None if time_lag != time_lag else time_lag,
                "owner": owners[owner] if owner >= 0 else None,
                "epoch": self.epoch,
            }
            for t, p, start, end, committed, lag, state, time_lag, owner in zip(
                *columns, strict=True
            )
        ]


class EncodedRows(Sequence[dict[str, Any]]):
    """Rows already encoded as JSON lines (`Columns.encoded`). Sinks that write JSON take the
    lines as they are; anything else reads them as dicts (decoded on access)."""

    def __init__(self, lines: Callable[[], Iterator[str]], count: int, group: str) -> None:
        self._lines, self._count, self.group = lines, count, group

    @property
    def lines(self) -> Iterator[str]:
        """The lines, in order, made afresh on each read (one sink after another)."""
        return self._lines()

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for line in self.lines:
            yield json.loads(line)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        lines = list(self.lines)  # random access (tests, sinks that want dicts): made whole
        if isinstance(index, slice):
            return [json.loads(line) for line in lines[index]]
        row: dict[str, Any] = json.loads(lines[index])
        return row
