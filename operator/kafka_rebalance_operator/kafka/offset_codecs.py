"""The three Kafka messages a poll reads offsets with, encoded and decoded here, field by field.

Metadata (API 3, v10-v12), ListOffsets (API 2, v6-v9) and OffsetFetch (API 9, v8) in their
flexible versions (compact strings and arrays, tagged fields). kafka-python builds one Python
object per partition for each of them, three times per poll; at 100,000 partitions that was most
of a poll. These codecs keep only the fields a poll needs (a partition's leader; its offset and
error code; its committed offset, metadata and error code) and put them straight into numpy
arrays indexed by partition number. Where every entry of a topic has the same size (ListOffsets
always; Metadata when all of a topic's partitions have the same replica and ISR counts, and no
tagged fields), a topic's entries are read as one structured numpy array; otherwise entry by
entry. Pure functions over bytes, no I/O: `kafka_io` sends and receives them on kafka-python's
own connections; `tests/unit/operator/test_operator_offset_codecs.py` checks every decoder against
kafka-python's
decoding of the same responses.

Invariants: array indexes are partition numbers (entries may arrive in any order); an offset
array holds -1 where the partition was not in the response or its error code is non-zero.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

METADATA, LIST_OFFSETS, OFFSET_FETCH = 3, 2, 9
# The versions these codecs speak (inclusive): the highest one the broker also speaks is used.
VERSIONS = {METADATA: (10, 12), LIST_OFFSETS: (6, 9), OFFSET_FETCH: (8, 8)}

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_PARTITION_HEAD = struct.Struct(">hiii")  # Metadata partition: error, index, leader, epoch
_COMMIT_HEAD = struct.Struct(">iqi")  # OffsetFetch partition: index, offset, leader epoch

# ListOffsets request partition (flexible): index, current leader epoch, timestamp, no tags
_LIST_REQUEST = np.dtype([("p", ">i4"), ("epoch", ">i4"), ("ts", ">i8"), ("tags", "u1")])
# ListOffsets response partition (v4+, flexible): index, error, timestamp, offset, epoch, tags
_LIST_RESPONSE = np.dtype(
    [("p", ">i4"), ("error", ">i2"), ("ts", ">i8"), ("offset", ">i8"), ("epoch", ">i4"),
     ("tags", "u1")]
)  # fmt: skip


class WireError(ValueError):
    """A response these codecs cannot read (truncated, or of a shape they do not know)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def _decoder(decode: _F) -> _F:
    """Any failure to read a response is a WireError (a truncated body shows up as a struct or
    index error part-way through)."""

    @functools.wraps(decode)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return decode(*args, **kwargs)
        except WireError:
            raise
        except (struct.error, IndexError, ValueError, UnicodeDecodeError) as error:
            raise WireError(f"{decode.__name__}: {error}") from None

    return wrapper  # type: ignore[return-value]


# ------------------------------------------------------------------------------ primitives


def _uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_compact_string(out: bytearray, text: str | None) -> None:
    if text is None:
        out.append(0)
        return
    raw = text.encode()
    _put_uvarint(out, len(raw) + 1)
    out += raw


def _compact_bytes(data: memoryview, pos: int) -> tuple[memoryview | None, int]:
    length, pos = _uvarint(data, pos)
    if length == 0:
        return None, pos
    end = pos + length - 1
    if end > len(data):
        raise WireError("truncated string")
    return data[pos:end], end


def _compact_string(data: memoryview, pos: int) -> tuple[str | None, int]:
    raw, pos = _compact_bytes(data, pos)
    return (None if raw is None else str(raw, "utf-8")), pos


def _skip_tags(data: memoryview, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def _skip_int32_array(data: memoryview, pos: int) -> int:
    length, pos = _uvarint(data, pos)
    return pos + 4 * max(0, length - 1)


# ------------------------------------------------------------------------------------ Metadata


@dataclass
class TopicMetadata:
    """One topic of a Metadata response: its error code, whether it is internal, and the leader
    of each partition (index = partition number; -1: no leader)."""

    name: str
    error: int
    internal: bool
    leaders: np.ndarray = field(repr=False)

    @property
    def partitions(self) -> int:
        return len(self.leaders)


def metadata_request(version: int, topics: Sequence[str] | None) -> bytes:
    """Metadata for `topics` (None: every topic), never creating a topic."""
    out = bytearray()
    if topics is None:
        out.append(0)
    else:
        _put_uvarint(out, len(topics) + 1)
        for name in topics:
            out += bytes(16)  # topic id: none, look up by name
            _put_compact_string(out, name)
            out.append(0)
    out.append(0)  # allow_auto_topic_creation
    if version <= 10:
        out.append(0)  # include_cluster_authorized_operations
    out.append(0)  # include_topic_authorized_operations
    out.append(0)
    return bytes(out)


def _partition_leaders(data: memoryview, pos: int, count: int) -> tuple[np.ndarray, int]:
    """`count` Metadata partition entries from `pos`: the leaders by partition number."""
    if count == 0:
        return np.empty(0, np.int32), pos
    fast = _uniform_partitions(data, pos, count)
    if fast is not None:
        return fast
    indexes = np.empty(count, np.int32)
    leaders = np.empty(count, np.int32)
    for i in range(count):
        _error, index, leader, _epoch = _PARTITION_HEAD.unpack_from(data, pos)
        pos += 14
        for _ in range(3):
            pos = _skip_int32_array(data, pos)
        pos = _skip_tags(data, pos)
        indexes[i], leaders[i] = index, leader
    return _by_index(indexes, leaders, count), pos


_HEAD = np.dtype([("error", ">i2"), ("p", ">i4"), ("leader", ">i4"), ("epoch", ">i4")])


def _uniform_partitions(data: memoryview, pos: int, count: int) -> tuple[np.ndarray, int] | None:
    """The entries read at once when they all have the first one's shape: the same replica,
    ISR and offline counts (one-byte lengths) and no tagged fields; None otherwise. The entries
    must also name each partition number once, so a misread shape cannot pass."""
    marks = []  # offsets of the three array lengths within an entry
    at = 14
    for _ in range(3):
        if pos + at >= len(data) or data[pos + at] & 0x80 or data[pos + at] == 0:
            return None
        marks.append(at)
        at += 1 + 4 * (data[pos + at] - 1)
    size = at + 1  # the tagged-field count, which must be 0
    if pos + size * count > len(data):
        return None
    rows = np.frombuffer(data, np.uint8, size * count, pos).reshape(count, size)
    for mark in marks:
        if (rows[:, mark] != rows[0, mark]).any():
            return None
    if rows[:, at].any():
        return None
    heads = np.ascontiguousarray(rows[:, :14]).view(_HEAD)[:, 0]
    index = heads["p"].astype(np.int64)
    if index.min() < 0 or index.max() >= count or len(np.unique(index)) != count:
        return None
    leaders = np.empty(count, np.int32)
    leaders[index] = heads["leader"]
    return leaders, pos + size * count


def _by_index(indexes: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    out = np.full(count, -1, np.int32)
    valid = (indexes >= 0) & (indexes < count)
    out[indexes[valid]] = values[valid]
    return out


@_decoder
def decode_metadata(version: int, body: bytes | memoryview) -> list[TopicMetadata]:
    """The topics of a Metadata response body (after the response header)."""
    data = memoryview(body)
    pos = 4  # throttle_time_ms
    brokers, pos = _uvarint(data, pos)
    for _ in range(max(0, brokers - 1)):
        pos += 4
        _host, pos = _compact_bytes(data, pos)
        pos += 4
        _rack, pos = _compact_bytes(data, pos)
        pos = _skip_tags(data, pos)
    _cluster, pos = _compact_bytes(data, pos)
    pos += 4  # controller id
    count, pos = _uvarint(data, pos)
    topics = []
    for _ in range(max(0, count - 1)):
        (error,) = _I16.unpack_from(data, pos)
        name, pos = _compact_string(data, pos + 2)
        pos += 16  # topic id
        internal = bool(data[pos])
        partitions, pos = _uvarint(data, pos + 1)
        leaders, pos = _partition_leaders(data, pos, max(0, partitions - 1))
        pos = _skip_tags(data, pos + 4)  # after topic_authorized_operations
        topics.append(TopicMetadata(name or "", error, internal, leaders))
    return topics


# --------------------------------------------------------------------------------- ListOffsets


def list_offsets_request(version: int, topics: Mapping[str, np.ndarray], timestamp: int) -> bytes:
    """One ListOffsets request: `topics` maps a topic to the partition numbers to read."""
    out = bytearray(_I32.pack(-1))  # replica id: a client
    out.append(0)  # isolation level: read uncommitted (the log end, as lag is defined)
    _put_uvarint(out, len(topics) + 1)
    for name, partitions in topics.items():
        _put_compact_string(out, name)
        _put_uvarint(out, len(partitions) + 1)
        rows = np.zeros(len(partitions), _LIST_REQUEST)
        rows["p"], rows["epoch"], rows["ts"] = partitions, -1, timestamp
        out += rows.tobytes()
        out.append(0)
    out.append(0)
    return bytes(out)


@_decoder
def decode_list_offsets(
    body: bytes | memoryview, into: Mapping[str, np.ndarray]
) -> dict[str, list[tuple[int, int]]]:
    """Writes each partition's offset into `into[topic][partition]` (-1 where its error code is
    not 0); returns the (partition, error code) pairs that failed, per topic. Topics absent
    from `into` are skipped."""
    data = memoryview(body)
    pos = 4  # throttle_time_ms
    count, pos = _uvarint(data, pos)
    failed: dict[str, list[tuple[int, int]]] = {}
    for _ in range(max(0, count - 1)):
        name, pos = _compact_string(data, pos)
        partitions, pos = _uvarint(data, pos)
        n = max(0, partitions - 1)
        size = _LIST_RESPONSE.itemsize * n
        if pos + size > len(data):
            raise WireError("truncated ListOffsets response")
        rows = np.frombuffer(data, _LIST_RESPONSE, n, pos)
        if rows["tags"].any():
            raise WireError("ListOffsets partition with tagged fields")
        pos = _skip_tags(data, pos + size)
        target = into.get(name or "")
        if target is None:
            continue
        index = rows["p"].astype(np.int64)
        ok = (index >= 0) & (index < len(target))
        errors = rows["error"] != 0
        target[index[ok]] = np.where(errors[ok], -1, rows["offset"][ok])
        if errors.any():
            failed[name or ""] = [
                (int(p), int(e))
                for p, e in zip(rows["p"][errors], rows["error"][errors], strict=True)
            ]
    return failed


# --------------------------------------------------------------------------------- OffsetFetch


def offset_fetch_request(version: int, group_id: str) -> bytes:
    """Every committed offset of one group (topics null: all of them)."""
    out = bytearray([2])  # one group
    _put_compact_string(out, group_id)
    out.append(0)  # topics: null, every partition the group committed
    out.append(0)
    out.append(0)  # require_stable: false
    out.append(0)
    return bytes(out)


@dataclass
class Commits:
    """A group's committed offsets: per topic, offsets by partition number (-1: none) and the
    commit metadata of the partitions that have some (shared strings: one per distinct text)."""

    offsets: dict[str, np.ndarray] = field(default_factory=dict)
    metadata: dict[str, dict[int, str]] = field(default_factory=dict)


class GroupError(RuntimeError):
    """OffsetFetch answered with an error for the whole group (e.g. NOT_COORDINATOR)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"OffsetFetch error code {code}")
        self.code = code


@_decoder
def decode_offset_fetch(body: bytes | memoryview) -> Commits:
    data = memoryview(body)
    pos = 4  # throttle_time_ms
    groups, pos = _uvarint(data, pos)
    commits = Commits()
    texts: dict[bytes, str] = {}
    for _ in range(max(0, groups - 1)):
        _group, pos = _compact_bytes(data, pos)
        topics, pos = _uvarint(data, pos)
        for _ in range(max(0, topics - 1)):
            name, pos = _compact_string(data, pos)
            partitions, pos = _uvarint(data, pos)
            n = max(0, partitions - 1)
            indexes = np.empty(n, np.int64)
            offsets = np.empty(n, np.int64)
            notes: dict[int, str] = {}
            head, i16 = _COMMIT_HEAD.unpack_from, _I16.unpack_from
            size = len(data)
            for i in range(n):
                index, offset, _epoch = head(data, pos)
                pos += 16
                length = data[pos] if pos < size else 0x80
                if length < 0x80:  # one-byte length (texts under 127 bytes): inline
                    pos += 1
                    raw = data[pos : pos + length - 1] if length else None
                    pos += length - 1 if length else 0
                else:
                    raw, pos = _compact_bytes(data, pos)
                (error,) = i16(data, pos)
                pos += 2
                if pos < size and data[pos] == 0:
                    pos += 1
                else:
                    pos = _skip_tags(data, pos)
                indexes[i], offsets[i] = index, offset if error == 0 else -1
                if raw is not None and len(raw) and error == 0:
                    key = bytes(raw)
                    text = texts.get(key)
                    if text is None:
                        text = texts[key] = key.decode("utf-8", "replace")
                    notes[index] = text
            pos = _skip_tags(data, pos)
            size = int(indexes.max()) + 1 if n else 0
            by_index = np.full(size, -1, np.int64)
            valid = indexes >= 0
            by_index[indexes[valid]] = offsets[valid]
            commits.offsets[name or ""] = by_index
            if notes:
                commits.metadata[name or ""] = notes
        (error,) = _I16.unpack_from(data, pos)
        pos = _skip_tags(data, pos + 2)
        if error:
            raise GroupError(error)
    return commits
