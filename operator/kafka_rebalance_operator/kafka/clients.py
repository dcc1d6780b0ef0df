"""One Kafka client per cluster and credentials, shared by every policy that uses them.

Policies name their cluster (`kafka.bootstrapServers`) and Secrets; the observe phase turns
those into a connection key: the servers, a fingerprint of the Secrets' contents
(`kafka_security.fingerprint`) and the request timeout. `SharedObservers` keeps one observer per
key and hands each policy a `Lease` on it, so 200 policies on one cluster with one Secret hold
one client: one set of broker connections, one network thread, one metadata view (the offset
reader's metadata cache, `kafka_offsets`).

Invariants: a Secret rotation changes the fingerprint, so the next poll of each policy asks for
the new key and gets a new client; the old one is closed when the last policy using it lets go
(`Lease.close`). An observer whose reads failed with KafkaUnavailable is retired: no policy is
given it again (the next asks for a fresh connection, as a policy with its own client did), and
it is closed when its last lease is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable, Observation

if TYPE_CHECKING:  # types only
    from kafka_rebalance_operator.kafka.share_group import ShareGroup, SharePartitionOffset
    from kafka_rebalance_operator.kafka.streams_group import StreamsGroup
    from kafka_rebalance_operator.ports import Observer
    from kafka_rebalance_operator.topic_pattern import TopicPattern

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    observer: Observer
    users: int = 0


class SharedObservers:
    """An `ObserverFactory` that shares observers by connection key (thread-safe)."""

    def __init__(self, factory: Callable[[str, Mapping[str, Any], float], Observer]) -> None:
        """`factory` connects one observer (servers, security, timeout); sharing by key is this
        class's job, so it takes no key."""
        self.factory = factory
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._creating: dict[Hashable, threading.Lock] = {}
        self._live: dict[int, _Entry] = {}  # every shared observer not yet closed

    def __call__(
        self,
        bootstrap_servers: str,
        security: Mapping[str, Any],
        timeout_s: float,
        key: Hashable | None = None,
    ) -> Observer:
        """A lease on the observer for `key` (made now if there is none); without a key, an
        observer of the caller's own."""
        if key is None:
            return self.factory(bootstrap_servers, security, timeout_s)
        full = (key, timeout_s)
        with self._lock:
            creating = self._creating.setdefault(full, threading.Lock())
        with creating:  # one connection attempt per key at a time, others wait for it
            with self._lock:
                entry = self._entries.get(full)
                if entry is not None:
                    entry.users += 1
                    return Lease(self, full, entry)
            observer = self.factory(bootstrap_servers, security, timeout_s)  # may raise
            with self._lock:
                entry = self._entries[full] = _Entry(observer, users=1)
                self._live[id(entry)] = entry
                return Lease(self, full, entry)

    @property
    def open(self) -> int:
        """Observers open now (retired ones still leased included)."""
        with self._lock:
            return len(self._live)

    def _retire(self, full: Hashable, entry: _Entry) -> None:
        with self._lock:
            if self._entries.get(full) is entry:
                del self._entries[full]

    def _release(self, full: Hashable, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            if entry.users > 0:
                return
            if self._entries.get(full) is entry:
                del self._entries[full]
            self._live.pop(id(entry), None)
        try:
            entry.observer.close()
        except Exception:  # closing a broken client must not fail a poll
            log.debug("closing a shared Kafka client failed", exc_info=True)


class Lease:
    """One policy's use of a shared observer (`Observer`); `close` lets go of it."""

    def __init__(self, pool: SharedObservers, full: Hashable, entry: _Entry) -> None:
        self._pool, self._full, self._entry = pool, full, entry
        self._closed = False

    @property
    def observer(self) -> Observer:
        return self._entry.observer

    def observe(
        self,
        group_id: str,
        topics: Iterable[str] | None,
        pattern: TopicPattern | None,
        describe: bool = False,
        kip848_group: bool = False,
        max_partitions: int = 0,
    ) -> Observation:
        try:
            return self._entry.observer.observe(
                group_id, topics, pattern, describe, kip848_group, max_partitions
            )
        except KafkaUnavailable:
            self._pool._retire(self._full, self._entry)  # the next poll connects afresh
            raise

    def publish_plan(
        self,
        topic: str,
        group_id: str,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        client: Mapping[str, Any],
        settle_s: float = 0.0,
    ) -> None:
        self._entry.observer.publish_plan(topic, group_id, value, headers, client, settle_s)

    def nudge(self, group_id: str) -> None:
        self._entry.observer.nudge(group_id)

    def cluster_id(self) -> str:
        try:
            return self._entry.observer.cluster_id()
        except KafkaUnavailable:
            self._pool._retire(self._full, self._entry)  # the next poll connects afresh
            raise

    def describe_streams_group(self, group_id: str) -> StreamsGroup | None:
        try:
            return self._entry.observer.describe_streams_group(group_id)
        except KafkaUnavailable:
            self._pool._retire(self._full, self._entry)  # the next poll connects afresh
            raise

    def trigger_streams_group(self, group_id: str) -> str:
        return self._entry.observer.trigger_streams_group(group_id)

    def describe_share_group(self, group_id: str) -> ShareGroup | None:
        try:
            return self._entry.observer.describe_share_group(group_id)
        except KafkaUnavailable:
            self._pool._retire(self._full, self._entry)  # the next poll connects afresh
            raise

    def share_offsets(
        self, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> Mapping[tuple[str, int], SharePartitionOffset]:
        return self._entry.observer.share_offsets(group_id, topics)

    def trigger_share_group(self, group_id: str, topics: Sequence[str]) -> int:
        return self._entry.observer.trigger_share_group(group_id, topics)

    def clear_streams_trigger(self, group_id: str) -> bool:
        return self._entry.observer.clear_streams_trigger(group_id)

    def set_heartbeat_interval(self, group_id: str, kind: str, interval_ms: int | None) -> None:
        self._entry.observer.set_heartbeat_interval(group_id, kind, interval_ms)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool._release(self._full, self._entry)
