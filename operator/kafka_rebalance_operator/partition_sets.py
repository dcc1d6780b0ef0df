"""A member's partitions per topic, held compactly: `TopicPartitions`.

The operator keeps every member's document for a poll, and the ones members act on between polls
(`PolicyMemory.documents`). As a dict of lists, 1,000 members of ~100 topics each were ~100,000
list objects (~10 MiB a copy). Here one document's partitions are three objects, whatever their
number: the topic names (a tuple, in the order given), every topic's partitions one run after
the other in one int32 array, and where each run starts (another array).

It is a read-only `Mapping[str, list[int]]` that compares like the dict it was made from:
each look-up gives a new list, in the order given, so a caller may change what it got without
changing the document; it equals any mapping with the same topics and equal lists (a mapping of
tuples is not equal, as with a dict of lists).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from typing import Any

import kafka_rebalance_assignors as assignors
import numpy as np


class TopicPartitions(Mapping[str, list[int]]):
    """topic -> partitions, immutable; partition numbers are Kafka's int32 (non-negative)."""

    __slots__ = ("_ordered", "_parts", "_starts", "_topics")

    def __init__(self, raw: Mapping[str, Iterable[int]] | None = None) -> None:
        raw = raw or {}
        self._topics: tuple[str, ...] = tuple(raw)
        parts = array("i")
        ends = []
        for run in raw.values():
            parts.extend(run)
            ends.append(len(parts))
        self._parts = parts
        self._starts = array("i", [0, *ends])
        # sorted names (the usual case: documents list topics in order) are found by bisection
        self._ordered = all(a < b for a, b in zip(self._topics, self._topics[1:], strict=False))

    @classmethod
    def of(cls, raw: Mapping[str, Iterable[int]] | TopicPartitions) -> TopicPartitions:
        """`raw` itself when it already is one (they are immutable), else a new one."""
        return raw if isinstance(raw, TopicPartitions) else cls(raw)

    def _find(self, topic: object) -> int:
        topics = self._topics
        if self._ordered and isinstance(topic, str):
            i = bisect_left(topics, topic)
            return i if i < len(topics) and topics[i] == topic else -1
        try:
            return topics.index(topic)  # type: ignore[arg-type,unused-ignore]
        except ValueError:
            return -1

    def __getitem__(self, topic: str) -> list[int]:
        i = self._find(topic)
        if i < 0:
            raise KeyError(topic)
        return self._parts[self._starts[i] : self._starts[i + 1]].tolist()

    def __contains__(self, topic: object) -> bool:
        return self._find(topic) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)

    def items(self) -> ItemsView[str, list[int]]:
        """(topic, partitions) in order; a new list each."""
        return _Items(self)

    def values(self) -> ValuesView[list[int]]:
        return _Values(self)

    def _runs(self) -> Iterator[tuple[str, list[int]]]:
        parts, starts = self._parts, self._starts
        for i, topic in enumerate(self._topics):
            yield topic, parts[starts[i] : starts[i + 1]].tolist()

    def rows(self, spans: Mapping[str, tuple[int, int]]) -> np.ndarray:
        """The partitions as rows of a layout (`spans`: topic -> (first row, partitions)), in
        order; those of topics not in `spans`, or not numbered within their topic's count, left
        out."""
        if not self._parts:
            return np.empty(0, np.int64)
        found = [spans.get(topic) for topic in self._topics]
        bases = np.array([-1 if f is None else f[0] for f in found], np.int64)
        counts = np.array([0 if f is None else f[1] for f in found], np.int64)
        starts = np.frombuffer(self._starts, np.int32).astype(np.int64)
        lengths = starts[1:] - starts[:-1]
        parts = np.frombuffer(self._parts, np.int32).astype(np.int64)
        inside = (parts >= 0) & (parts < np.repeat(counts, lengths))
        return (np.repeat(bases, lengths) + parts)[inside]

    def columns(self) -> assignors.OwnedColumns:
        """The same partitions as the planner's `OwnedColumns` (no copy: both are read-only),
        which it validates and keeps as arrays instead of reading one list per topic."""
        return assignors.OwnedColumns(self._topics, self._parts, self._starts)

    def count(self) -> int:
        """How many partitions, over all topics."""
        return len(self._parts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TopicPartitions) and other._topics == self._topics:
            return other._starts == self._starts and other._parts == self._parts
        if not isinstance(other, Mapping) or len(other) != len(self):
            return False
        return all(topic in other and other[topic] == parts for topic, parts in self._runs())

    __hash__ = None  # type: ignore[assignment]  # like a dict

    def __repr__(self) -> str:
        return repr(dict(self._runs()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (TopicPartitions, (dict(self._runs()),))


class _Items(ItemsView[str, list[int]]):
    _mapping: TopicPartitions

    def __iter__(self) -> Iterator[tuple[str, list[int]]]:
        return self._mapping._runs()


class _Values(ValuesView[list[int]]):
    _mapping: TopicPartitions

    def __iter__(self) -> Iterator[list[int]]:
        return (parts for _topic, parts in self._mapping._runs())
