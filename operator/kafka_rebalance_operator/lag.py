"""Lag states of one partition at one poll: explicit, never a silent zero.

ok             committed within [log start, log end]: lag = end - committed
uninitialized  the group never committed: lag as the consumers' auto.offset.reset would see it
               (earliest: the whole retained log, end - start; latest: 0)
out-of-range   committed below log start (retention deleted data the group had not read): the
               consumer will reset, so lag is counted as the reset would leave it
ahead          committed past log end (topic recreated, truncation): lag 0, flagged
unknown        the read failed this poll: the last known lag is carried with its age
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

import numpy as np


class LagState(StrEnum):
    OK = "ok"
    UNINITIALIZED = "uninitialized"
    OUT_OF_RANGE = "out-of-range"
    AHEAD = "ahead"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """What one poll read for one partition; None where the read failed (or, for committed,
    where the group has no commit)."""

    log_start: int | None
    log_end: int | None
    committed: int | None
    metadata: str | None = None
    committed_known: bool = True  # False: the committed-offset read itself failed
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionLag:
    state: LagState
    lag: int | None  # None only for unknown with no earlier value
    age_s: float = 0.0  # for unknown: how old the carried value is


def classify(
    offsets: PartitionOffsets,
    offset_reset: str = "earliest",
    previous: PartitionLag | None = None,
    previous_age_s: float = 0.0,
) -> PartitionLag:
    """The lag state of a partition; `previous` (with its age) is carried when unknown."""
    start, end = offsets.log_start, offsets.log_end
    if offsets.error or start is None or end is None or not offsets.committed_known:
        carried = previous.lag if previous is not None else None
        return PartitionLag(LagState.UNKNOWN, carried, previous_age_s if carried is not None else 0)
    committed = offsets.committed
    reset_lag = max(0, end - start) if offset_reset == "earliest" else 0
    if committed is None or committed < 0:
        return PartitionLag(LagState.UNINITIALIZED, reset_lag)
    if committed < start:
        return PartitionLag(LagState.OUT_OF_RANGE, reset_lag)
    if committed > end:
        return PartitionLag(LagState.AHEAD, 0)
    return PartitionLag(LagState.OK, end - committed)


# ------------------------------------------------------------------------- one policy, columnar

# The state codes of the columnar arrays, in this order (index = code).
STATES: tuple[LagState, ...] = (
    LagState.OK,
    LagState.UNINITIALIZED,
    LagState.OUT_OF_RANGE,
    LagState.AHEAD,
    LagState.UNKNOWN,
)
OK, UNINITIALIZED, OUT_OF_RANGE, AHEAD, UNKNOWN = range(5)
NONE = -1  # an offset or lag array's "not known"


@dataclass(frozen=True)
class Layout:
    """Where each partition of a policy sits in its arrays: topics in name order, each topic's
    partitions in number order, one after the other (flat index = base[topic] + partition)."""

    topics: tuple[str, ...]
    counts: tuple[int, ...]

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> Layout:
        names = tuple(sorted(counts))
        return cls(names, tuple(int(counts[t]) for t in names))

    @property
    def size(self) -> int:
        return sum(self.counts)

    @cached_property
    def spans(self) -> dict[str, tuple[int, int]]:
        """topic -> (first flat index, partition count)."""
        out, at = {}, 0
        for topic, count in zip(self.topics, self.counts, strict=True):
            out[topic] = (at, count)
            at += count
        return out

    @property
    def bases(self) -> dict[str, int]:
        return {topic: base for topic, (base, _count) in self.spans.items()}

    def index(self, key: tuple[str, int]) -> int | None:
        topic, partition = key
        span = self.spans.get(topic)
        if span is None or not 0 <= partition < span[1]:
            return None
        return span[0] + partition

    def carry(self, old: Layout) -> tuple[np.ndarray, np.ndarray]:
        """(rows here, rows in `old`) of the partitions both layouts have, to carry arrays
        from `old` to this layout."""
        into, out = [], []
        for topic, (base, count) in self.spans.items():
            span = old.spans.get(topic)
            if span is not None:
                keep = min(count, span[1])
                into.append(np.arange(base, base + keep))
                out.append(np.arange(span[0], span[0] + keep))
        if not into:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(into), np.concatenate(out)

    def keys(self) -> Iterator[tuple[str, int]]:
        for topic, count in zip(self.topics, self.counts, strict=True):
            for p in range(count):
                yield (topic, p)

    def per_topic(self, values: np.ndarray) -> TopicValues:
        """`values` (in this layout's order, NaN: unknown) as a list per topic (None: unknown)."""
        lists: dict[str, list[float | None]] = {}
        for topic, (base, count) in self.spans.items():
            lists[topic] = [None if v != v else v for v in values[base : base + count].tolist()]
        return TopicValues(lists)


class TopicValues(Mapping[tuple[str, int], float | None]):
    """One value per partition (None: unknown), kept as a list per topic: what the planner's
    request is built from, read by (topic, partition) like a dict, without a key tuple and a
    dict entry per partition."""

    __slots__ = ("lists",)

    def __init__(self, lists: dict[str, list[float | None]]) -> None:
        self.lists = lists

    def get(self, key: tuple[str, int], default: float | None = None) -> float | None:  # type: ignore[override]
        values = self.lists.get(key[0])
        if values is None or not 0 <= key[1] < len(values):
            return default
        return values[key[1]]

    def __getitem__(self, key: tuple[str, int]) -> float | None:
        values = self.lists[key[0]]
        if not 0 <= key[1] < len(values):
            raise KeyError(key)
        return values[key[1]]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for topic, values in self.lists.items():
            for p in range(len(values)):
                yield (topic, p)

    def __len__(self) -> int:
        return sum(len(values) for values in self.lists.values())


def _known(value: int) -> int | None:
    return None if value < 0 else int(value)


class PolicyOffsets(Mapping[tuple[str, int], PartitionOffsets]):
    """What one poll read for every partition of a policy, as arrays in `layout` order: log
    start, log end and committed offset (NONE: not read, or no commit), and the commit metadata
    of the partitions that have some (flat index -> text). `committed_known` is False when the
    committed-offset read itself failed. Read as a mapping, it gives `PartitionOffsets` one key
    at a time (built on demand, never stored)."""

    __slots__ = ("committed", "committed_known", "end", "layout", "metadata", "start")

    def __init__(
        self,
        layout: Layout,
        start: np.ndarray,
        end: np.ndarray,
        committed: np.ndarray,
        metadata: dict[int, str] | None = None,
        committed_known: bool = True,
    ) -> None:
        self.layout, self.start, self.end, self.committed = layout, start, end, committed
        self.metadata = metadata or {}
        self.committed_known = committed_known

    @classmethod
    def from_mapping(
        cls, topics: Mapping[str, int], offsets: Mapping[tuple[str, int], PartitionOffsets]
    ) -> PolicyOffsets:
        """The columnar form of per-partition reads (a key missing is a partition not read)."""
        layout = Layout.of(topics)
        n = layout.size
        start, end, committed = (np.full(n, NONE, np.int64) for _ in range(3))
        metadata: dict[int, str] = {}
        known = True
        for i, key in enumerate(layout.keys()):
            read = offsets.get(key)
            if read is None:
                continue
            known = known and read.committed_known
            end[i] = NONE if read.log_end is None else read.log_end
            if read.error is None and read.log_start is not None:
                start[i] = read.log_start  # a read with an error stays unknown (start NONE)
            if read.committed is not None and read.committed >= 0:
                committed[i] = read.committed
            if read.metadata:
                metadata[i] = read.metadata
        return cls(layout, start, end, committed, metadata, known)

    def __len__(self) -> int:
        return self.layout.size

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return self.layout.keys()

    def __getitem__(self, key: tuple[str, int]) -> PartitionOffsets:
        i = self.layout.index(key) if isinstance(key, tuple) and len(key) == 2 else None
        if i is None:
            raise KeyError(key)
        return self.at(i)

    def at(self, i: int) -> PartitionOffsets:
        start, end = _known(self.start[i]), _known(self.end[i])
        return PartitionOffsets(
            log_start=start,
            log_end=end,
            committed=_known(self.committed[i]),
            metadata=self.metadata.get(i),
            committed_known=self.committed_known,
            error=None if start is not None and end is not None else "offsets unread",
        )

    def with_metadata(self) -> Iterator[tuple[tuple[str, int], str]]:
        """(key, commit metadata) of the partitions whose commit carries some."""
        if not self.metadata:
            return
        starts = np.array([self.layout.spans[t][0] for t in self.layout.topics], np.int64)
        for i in sorted(self.metadata):
            t = int(np.searchsorted(starts, i, side="right")) - 1
            yield (self.layout.topics[t], i - int(starts[t])), self.metadata[i]


def classify_all(
    offsets: PolicyOffsets,
    offset_reset: str,
    previous_lag: np.ndarray,
    previous_age_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`classify` for every partition at once: (state codes, lags, ages), NONE where a lag is
    unknown. `previous_lag` / `previous_age_s`: the lag carried for each partition from earlier
    polls (NONE: none) and its age."""
    start, end, committed = offsets.start, offsets.end, offsets.committed
    n = len(start)
    states = np.full(n, OK, np.int8)
    lags = np.maximum(end - committed, 0)
    reset = np.maximum(end - start, 0) if offset_reset == "earliest" else np.zeros(n, np.int64)
    uninitialized = committed < 0
    out_of_range = ~uninitialized & (committed < start)
    ahead = ~uninitialized & ~out_of_range & (committed > end)
    states[uninitialized], lags[uninitialized] = UNINITIALIZED, reset[uninitialized]
    states[out_of_range], lags[out_of_range] = OUT_OF_RANGE, reset[out_of_range]
    states[ahead], lags[ahead] = AHEAD, 0
    unknown = (start < 0) | (end < 0)
    if not offsets.committed_known:
        unknown[:] = True
    states[unknown] = UNKNOWN
    lags[unknown] = previous_lag[unknown]
    ages = np.zeros(n, np.float64)
    carried = unknown & (previous_lag >= 0)
    ages[carried] = previous_age_s[carried]
    return states, lags, ages


class PolicyLags(Mapping[tuple[str, int], PartitionLag]):
    """Every partition's lag state, lag and time lag in `layout` order (lag NONE, time lag NaN:
    unknown). Read as a mapping, it gives `PartitionLag` one key at a time."""

    __slots__ = ("ages", "lags", "layout", "states", "time_lags")

    def __init__(
        self,
        layout: Layout,
        states: np.ndarray,
        lags: np.ndarray,
        ages: np.ndarray,
        time_lags: np.ndarray,
    ) -> None:
        self.layout, self.states, self.lags, self.ages = layout, states, lags, ages
        self.time_lags = time_lags

    def __len__(self) -> int:
        return self.layout.size

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return self.layout.keys()

    def __getitem__(self, key: tuple[str, int]) -> PartitionLag:
        i = self.layout.index(key) if isinstance(key, tuple) and len(key) == 2 else None
        if i is None:
            raise KeyError(key)
        return self.at(i)

    def at(self, i: int) -> PartitionLag:
        return PartitionLag(STATES[self.states[i]], _known(self.lags[i]), float(self.ages[i]))

    @property
    def total(self) -> int:
        """The sum of known lags (carried values of unknown partitions included)."""
        return int(self.lags[self.lags >= 0].sum())

    def count(self, state: int) -> int:
        return int(np.count_nonzero(self.states == state))

    def by_state(self) -> dict[str, int]:
        """Partitions per lag state name (states with none left out)."""
        counts = np.bincount(self.states, minlength=len(STATES))
        return {STATES[s].value: int(c) for s, c in enumerate(counts) if c}

    def lag_values(self) -> TopicValues:
        """key -> lag as a float (None: unknown), for the planner's request."""
        return self.layout.per_topic(np.where(self.lags < 0, np.nan, self.lags.astype(np.float64)))

    def time_lag(self, key: tuple[str, int]) -> float | None:
        i = self.layout.index(key)
        if i is None:
            return None
        value = float(self.time_lags[i])
        return None if math.isnan(value) else value
