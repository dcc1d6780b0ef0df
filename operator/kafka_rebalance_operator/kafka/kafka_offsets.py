"""A policy's offsets read at wire speed: one Metadata request, one ListOffsets request per
leader broker for the log ends (and, when due, one per leader for the log starts) and one
OffsetFetch to the group's coordinator, all in flight together, on a kafka-python admin
client's own connections (its bootstrap, security and coordinator lookup). The messages are
encoded and decoded by `offset_codecs`, straight into numpy arrays.

Log-start offsets move only when retention deletes a segment (or the topic is recreated), so
they are read again only when older than `LOG_START_MAX_AGE_S`, when a topic's partition count
changed, when a log end went below the log start or the last read of a topic failed. Between
reads a log start may be up to `LOG_START_MAX_AGE_S` stale: retention that deleted records
meanwhile is not seen, so a commit it left behind is `ok` rather than `out-of-range` for at
most that long, and an `uninitialized` partition's lag (earliest reset) counts the deleted
records too.

Blocking: call it from a worker thread. The kafka-python internals used (`_manager.send`,
`_manager.run`, `_find_coordinator_id`, the request header and response-class hooks) are those
of kafka-python 3.0, which `pyproject.toml` pins; a broker that speaks none of
`offset_codecs.VERSIONS` makes `supported` False and the caller uses the admin API instead.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from kafka import errors as kafka_errors
from kafka.protocol.api_header import RequestHeader, ResponseHeader
from kafka.protocol.metadata import CoordinatorType

from kafka_rebalance_operator.kafka import offset_codecs
from kafka_rebalance_operator.lag import NONE, Layout, PolicyOffsets

LOG_START_MAX_AGE_S = 300.0
# OffsetFetch group errors that mean "ask the coordinator again": COORDINATOR_LOAD_IN_PROGRESS,
# COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_MOVED = (14, 15, 16)
METADATA_MAX_AGE_S = 5.0  # a whole-cluster Metadata answer serves this client's policies so long


class _Body:
    """A response's body, undecoded: decoding happens in the caller's thread, so a response
    the codecs cannot read fails that read, never the connection other reads share."""

    __slots__ = ("data",)
    throttle_time_ms = 0

    def __init__(self, data: bytes) -> None:
        self.data = data


class _ResponseType:
    """What kafka-python's parser asks of a response class: the header, then the body."""

    @staticmethod
    def parse_header(buffer: Any) -> Any:
        return ResponseHeader.decode(buffer, flexible=True)

    @staticmethod
    def decode(buffer: Any) -> _Body:
        return _Body(buffer.read())


class _Header:
    __slots__ = ("inner",)

    def __init__(self, inner: RequestHeader) -> None:
        self.inner = inner

    @property
    def correlation_id(self) -> int:
        return self.inner.correlation_id

    @property
    def api_key(self) -> int:
        return self.inner.request_api_key

    @property
    def api_version(self) -> int:
        return self.inner.request_api_version

    def get_response_class(self) -> type[_ResponseType]:
        return _ResponseType


class RawRequest:
    """A request whose body `offset_codecs` encoded, sent through kafka-python's connection
    (which adds the header and correlation id) and answered with the undecoded body (`_Body`)."""

    def __init__(self, api_key: int, version: int, body: bytes) -> None:
        self.API_KEY, self.API_VERSION, self.body = api_key, version, body
        self._header: _Header | None = None

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        self._header = _Header(
            RequestHeader(
                request_api_key=self.API_KEY,
                request_api_version=self.API_VERSION,
                correlation_id=correlation_id,
                client_id=client_id,
            )
        )

    @property
    def header(self) -> _Header | None:
        return self._header

    def encode(self, framed: bool = False, header: bool = False) -> bytes:
        head = self._header.inner.encode(flexible=True) if header and self._header else b""
        payload = head + self.body
        return struct.pack(">i", len(payload)) + payload if framed else payload

    def __repr__(self) -> str:
        return f"RawRequest(api={self.API_KEY}, v{self.API_VERSION}, {len(self.body)} bytes)"


def _error_name(code: int) -> str:
    return kafka_errors.for_code(code).__name__


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass
class _Starts:
    """Log starts of one topic, as last read, and when."""

    read_at: float
    offsets: np.ndarray


@dataclass
class Read:
    """One policy's read: the offsets (columnar), the errors (one line per partition or
    request that failed), and the counts of the topics read."""

    offsets: PolicyOffsets
    errors: list[str]


class OffsetReader:
    """Offsets of a policy's partitions through one admin client. Thread-safe: reads of
    policies sharing the client are serialised (each is a few round trips)."""

    def __init__(self, admin: Any, timeout_ms: int) -> None:
        self.admin, self.timeout_ms = admin, timeout_ms
        self._lock = threading.Lock()
        self._starts: dict[str, _Starts] = {}
        self._cluster: tuple[float, dict[str, offset_codecs.TopicMetadata]] | None = None

    # -- versions -----------------------------------------------------------------------------

    def _version(self, api_key: int) -> int | None:
        data = getattr(self.admin._manager, "broker_version_data", None)
        versions = getattr(data, "api_versions", None) or {}
        if api_key not in versions:
            return None
        low, high = versions[api_key]
        mine_low, mine_high = offset_codecs.VERSIONS[api_key]
        version = min(high, mine_high)
        return version if version >= max(low, mine_low) else None

    @property
    def supported(self) -> bool:
        """The broker speaks a version of all three messages these codecs speak."""
        return all(self._version(k) is not None for k in offset_codecs.VERSIONS)

    # -- requests -----------------------------------------------------------------------------

    def _run(self, calls: Mapping[Any, tuple[int | None, RawRequest]]) -> dict[Any, Any]:
        """Send every request at once; each answer is a `_Body` or the exception it failed
        with. A node of None is the group coordinator of the key's group id."""
        manager = self.admin._manager

        async def gather() -> dict[Any, Any]:
            futures = {}
            for key, (node, request) in calls.items():
                try:
                    if node is None:
                        node = await self.admin._find_coordinator_id(key[1])
                    futures[key] = manager.send(
                        request, node_id=node, request_timeout_ms=self.timeout_ms
                    )
                except Exception as error:
                    futures[key] = error
            answers = {}
            for key, future in futures.items():
                if isinstance(future, Exception):
                    answers[key] = future
                    continue
                try:
                    answers[key] = await future
                except Exception as error:
                    answers[key] = error
            return answers

        return manager.run(gather)

    def metadata(self, topics: Sequence[str] | None) -> list[offset_codecs.TopicMetadata]:
        """The topics (None: every topic) with their partitions' leaders; raises on failure.

        The client's metadata view: a whole-cluster answer is kept for `METADATA_MAX_AGE_S`
        and answers every policy of this client in that time (a pattern's or named topics it
        has), so policies sharing a client do not each decode the whole cluster's metadata."""
        version = self._version(offset_codecs.METADATA)
        assert version is not None
        now = time.monotonic()
        with self._lock:
            if self._cluster is not None and now - self._cluster[0] <= METADATA_MAX_AGE_S:
                known = self._cluster[1]
                if topics is None:
                    return list(known.values())
                if all(name in known for name in topics):
                    return [known[name] for name in topics]
            request = RawRequest(
                offset_codecs.METADATA, version, offset_codecs.metadata_request(version, topics)
            )
            node = self.admin._manager.least_loaded_node()
            if node is None:
                raise kafka_errors.NoBrokersAvailable("no broker to ask for metadata")
            answer = self._run({"metadata": (node, request)})["metadata"]
            if isinstance(answer, Exception):
                raise answer
            described = offset_codecs.decode_metadata(version, answer.data)
            if topics is None:
                self._cluster = (now, {t.name: t for t in described})
            return described

    def read(self, group_id: str, topics: Mapping[str, offset_codecs.TopicMetadata]) -> Read:
        """Log start, log end and committed offset of every partition of `topics`."""
        layout = Layout.of({name: meta.partitions for name, meta in topics.items()})
        list_version = self._version(offset_codecs.LIST_OFFSETS)
        fetch_version = self._version(offset_codecs.OFFSET_FETCH)
        assert list_version is not None and fetch_version is not None
        errors: list[str] = []
        ends = {name: np.full(meta.partitions, NONE, np.int64) for name, meta in topics.items()}
        now = time.monotonic()
        with self._lock:
            due = [name for name, meta in topics.items() if self._start_due(name, meta, now)]
            calls: dict[Any, tuple[int | None, RawRequest]] = {
                ("commits", group_id): (
                    None,
                    RawRequest(
                        offset_codecs.OFFSET_FETCH,
                        fetch_version,
                        offset_codecs.offset_fetch_request(fetch_version, group_id),
                    ),
                )
            }
            asked: dict[Any, dict[str, np.ndarray]] = {}
            for kind, names, spec in (
                ("end", list(topics), offset_codecs.LATEST),
                ("start", due, offset_codecs.EARLIEST),
            ):
                quiet: list[str] = []  # a leaderless partition is reported once
                for leader, wanted in self._by_leader(
                    topics, names, errors if kind == "end" else quiet
                ).items():
                    body = offset_codecs.list_offsets_request(list_version, wanted, spec)
                    calls[(kind, leader)] = (
                        leader,
                        RawRequest(offset_codecs.LIST_OFFSETS, list_version, body),
                    )
                    asked[(kind, leader)] = wanted
            answers = self._run(calls)
            starts = {name: np.full(topics[name].partitions, NONE, np.int64) for name in due}
            for (kind, leader), answer in answers.items():
                if kind == "commits":
                    continue
                into = ends if kind == "end" else starts
                self._decode_offsets(answer, into, kind, leader, asked[(kind, leader)], errors)
            for name in due:
                self._starts[name] = _Starts(now, starts[name])
            # a log end below the log start we hold: the topic was recreated or truncated
            stale = [
                name for name in topics if name not in due and self._below_start(name, ends[name])
            ]
            if stale:
                again = {name: np.full(topics[name].partitions, NONE, np.int64) for name in stale}
                retry: dict[Any, tuple[int | None, RawRequest]] = {}
                wanted_again = self._by_leader(topics, stale, [])
                for leader, wanted in wanted_again.items():
                    body = offset_codecs.list_offsets_request(
                        list_version, wanted, offset_codecs.EARLIEST
                    )
                    retry[("start", leader)] = (
                        leader,
                        RawRequest(offset_codecs.LIST_OFFSETS, list_version, body),
                    )
                for (_kind, leader), answer in self._run(retry).items():
                    self._decode_offsets(
                        answer, again, "start", leader, wanted_again[leader], errors
                    )
                for name in stale:
                    self._starts[name] = _Starts(now, again[name])
            for name in list(self._starts):
                if name not in topics and now - self._starts[name].read_at > LOG_START_MAX_AGE_S:
                    del self._starts[name]  # no policy of this client reads it any more
            start_arrays = {name: self._starts[name].offsets for name in topics}
        commits = self._commits(answers[("commits", group_id)], group_id, errors)
        return Read(self._columns(layout, start_arrays, ends, commits), errors)

    def _start_due(self, name: str, meta: offset_codecs.TopicMetadata, now: float) -> bool:
        held = self._starts.get(name)
        return (
            held is None
            or len(held.offsets) != meta.partitions
            or now - held.read_at > LOG_START_MAX_AGE_S
            or bool((held.offsets < 0).any())
        )

    def _below_start(self, name: str, ends: np.ndarray) -> bool:
        held = self._starts[name].offsets
        return bool(((ends >= 0) & (held >= 0) & (ends < held)).any())

    @staticmethod
    def _by_leader(
        topics: Mapping[str, offset_codecs.TopicMetadata], names: Sequence[str], errors: list[str]
    ) -> dict[int, dict[str, np.ndarray]]:
        """Per leader broker, per topic, the partitions it leads; partitions without a leader
        are reported in `errors` (unknown this poll)."""
        out: dict[int, dict[str, np.ndarray]] = {}
        for name in names:
            leaders = topics[name].leaders
            for leader in np.unique(leaders).tolist():
                partitions = np.flatnonzero(leaders == leader).astype(np.int32)
                if leader < 0:
                    errors.extend(f"{name}-{p}: no leader" for p in partitions.tolist())
                    continue
                out.setdefault(leader, {})[name] = partitions
        return out

    @staticmethod
    def _decode_offsets(
        answer: Any,
        into: dict[str, np.ndarray],
        kind: str,
        leader: int,
        wanted: Mapping[str, np.ndarray],
        errors: list[str],
    ) -> None:
        """Offsets of one ListOffsets answer into `into`; one error line per partition that
        could not be read (log starts that fail are read again at the next poll)."""
        if isinstance(answer, Exception):
            errors.extend(
                f"{name}-{p} ({kind} offset): {_short(answer)}"
                for name, partitions in wanted.items()
                for p in partitions.tolist()
            )
            return
        try:
            failed = offset_codecs.decode_list_offsets(answer.data, into)
        except offset_codecs.WireError as error:
            errors.extend(
                f"{name}-{p} ({kind} offset): ListOffsets from broker {leader}: {error}"
                for name, partitions in wanted.items()
                for p in partitions.tolist()
            )
            return
        for name, pairs in failed.items():
            errors.extend(f"{name}-{p} ({kind} offset): {_error_name(code)}" for p, code in pairs)

    def _commits(
        self, answer: Any, group_id: str, errors: list[str]
    ) -> offset_codecs.Commits | None:
        if isinstance(answer, Exception):
            errors.append(f"committed offsets of {group_id}: {_short(answer)}")
            self._forget_coordinator(group_id)
            return None
        try:
            return offset_codecs.decode_offset_fetch(answer.data)
        except offset_codecs.GroupError as error:
            errors.append(f"committed offsets of {group_id}: {_error_name(error.code)}")
            if error.code in COORDINATOR_MOVED:
                self._forget_coordinator(group_id)
        except offset_codecs.WireError as error:
            errors.append(f"committed offsets of {group_id}: {error}")
        return None

    def _forget_coordinator(self, group_id: str) -> None:
        """The next read looks the group's coordinator up again (kafka-python keeps the one it
        found for good)."""
        with contextlib.suppress(Exception):
            self.admin._manager.cluster._coordinators.pop((CoordinatorType.GROUP, group_id), None)

    @staticmethod
    def _columns(
        layout: Layout,
        starts: Mapping[str, np.ndarray],
        ends: Mapping[str, np.ndarray],
        commits: offset_codecs.Commits | None,
    ) -> PolicyOffsets:
        n = layout.size
        start, end = np.empty(n, np.int64), np.empty(n, np.int64)
        committed = np.full(n, NONE, np.int64)
        metadata: dict[int, str] = {}
        for name, (base, count) in layout.spans.items():
            start[base : base + count] = starts[name]
            end[base : base + count] = ends[name]
            if commits is None:
                continue
            mine = commits.offsets.get(name)
            if mine is not None:
                keep = min(count, len(mine))
                committed[base : base + keep] = mine[:keep]
            for p, text in (commits.metadata.get(name) or {}).items():
                if p < count:
                    metadata[base + p] = text
        return PolicyOffsets(layout, start, end, committed, metadata, commits is not None)
