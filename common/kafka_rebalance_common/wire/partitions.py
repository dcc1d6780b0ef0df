"""Partition sets per topic, as the assignment document carries them.

Version 1 writes each topic's partitions as a JSON list of numbers. That costs 4 to 7 bytes per
partition, so a member owning 150k to 275k partitions no longer fits in a ConfigMap (1 MiB).

Version 2 writes each topic's partitions as one string, in whichever of two forms is shorter:

- ranges: `"0-99,150,152-160"`, ascending, for the usual case of runs of neighbours
  (range and sticky assignors hand out runs; a whole topic is `"0-499"`);
- a bitmap: `"bits:"` + standard base64 of bytes in which bit `p % 8` (least significant first)
  of byte `p // 8` says whether partition `p` is in the set. Its length depends only on the
  highest partition number (4 bytes per 24 partitions), never on the pattern, which bounds the
  worst case (every other partition: ranges would be no shorter than the version-1 list).

Decoding checks what it expands: partition numbers are Kafka's int32, and one field expands to at
most `MAX_PARTITIONS` partitions, so a hand-edited `"0-2147483646"` is refused, not allocated.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_rebalance_common.wire.errors import DocumentError

Partitions = dict[str, tuple[int, ...]]  # topic -> ascending partitions, no empty tuples

MAX_PARTITION = 2**31 - 1  # Kafka's partition numbers are int32
MAX_PARTITIONS = 2**21  # per field of one document: 4x a member owning 500k, a bounded allocation
BITMAP_PREFIX = "bits:"

# _BITS[b]: the positions of the set bits of byte b, least significant first.
_BITS: tuple[tuple[int, ...], ...] = tuple(
    tuple(i for i in range(8) if b >> i & 1) for b in range(256)
)


def normalise(raw: Mapping[str, Iterable[int]]) -> Partitions:
    """Topics in order, each topic's partitions ascending and unique, empty topics dropped."""
    result: Partitions = {}
    for topic in sorted(raw):
        parts = tuple(sorted(set(raw[topic])))
        if parts:
            result[topic] = parts
    return result


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def decode_lists(value: Any, path: str) -> Partitions:
    """Version 1: `{"topic": [2, 0]}`. Partitions are non-negative integers, none twice."""
    if not isinstance(value, dict):
        raise DocumentError(path, f"not an object ({type(value).__name__})")
    result: Partitions = {}
    for topic in sorted(value):
        parts = value[topic]
        where = f"{path}.{topic}"
        if not isinstance(parts, list):
            raise DocumentError(where, f"not a list ({type(parts).__name__})")
        if len(parts) == 1 and type(parts[0]) is int and parts[0] >= 0:
            result[topic] = (parts[0],)  # the usual case at scale: one partition of a topic
            continue
        if not (all(type(p) is int for p in parts) and (not parts or min(parts) >= 0)):
            for index, partition in enumerate(parts):  # find the first bad one, and say so
                if not _is_int(partition):
                    raise DocumentError(f"{where}[{index}]", "not an integer")
                if partition < 0:
                    raise DocumentError(f"{where}[{index}]", f"negative partition {partition}")
        unique = sorted(set(parts))
        if len(unique) != len(parts):
            raise DocumentError(where, "a partition is listed twice")
        if unique:
            result[topic] = tuple(unique)
    return result


def encode_lists(partitions: Partitions) -> dict[str, list[int]]:
    """Version 1's JSON value for a normalised partition map."""
    return {topic: list(parts) for topic, parts in partitions.items()}


def _ranges_text(parts: tuple[int, ...]) -> str:
    items: list[str] = []
    start = previous = parts[0]
    for p in parts[1:]:
        if p != previous + 1:
            items.append(str(start) if start == previous else f"{start}-{previous}")
            start = p
        previous = p
    items.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(items)


def _bitmap_text(parts: tuple[int, ...]) -> str:
    bitmap = bytearray(parts[-1] // 8 + 1)
    for p in parts:
        bitmap[p >> 3] |= 1 << (p & 7)
    return BITMAP_PREFIX + base64.b64encode(bytes(bitmap)).decode("ascii")


def encode_set(parts: tuple[int, ...]) -> str:
    """Version 2's string for one topic's ascending, unique, non-empty partitions: the shorter
    of the range and bitmap forms (ranges on a tie: they are readable)."""
    ranges = _ranges_text(parts)
    bitmap_length = len(BITMAP_PREFIX) + 4 * ((parts[-1] // 8 + 1 + 2) // 3)
    if len(ranges) <= bitmap_length:
        return ranges
    return _bitmap_text(parts)


def encode_sets(partitions: Partitions) -> dict[str, str]:
    """Version 2's JSON value for a normalised partition map."""
    return {topic: encode_set(parts) for topic, parts in partitions.items()}


def _number(text: str, where: str, item: str) -> int:
    if not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0"):
        raise DocumentError(where, f"{item!r} is not a partition number or range")
    value = int(text)
    if value > MAX_PARTITION:
        raise DocumentError(where, f"partition {value} is beyond Kafka's int32 range")
    return value


def _decode_ranges(text: str, where: str, budget: int) -> list[int]:
    result: list[int] = []
    previous = -1
    for item in text.split(","):
        low_text, dash, high_text = item.partition("-")
        low = _number(low_text, where, item)
        high = _number(high_text, where, item) if dash else low
        if high < low:
            raise DocumentError(where, f"range {item!r} runs backwards")
        if low <= previous:
            raise DocumentError(where, f"{item!r} is not above the partition before it")
        if len(result) + high - low + 1 > budget:
            raise DocumentError(where, f"more than {MAX_PARTITIONS} partitions")
        result.extend(range(low, high + 1))
        previous = high
    return result


def _decode_bitmap(text: str, where: str, budget: int) -> list[int]:
    try:
        bitmap = base64.b64decode(text[len(BITMAP_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise DocumentError(where, "the bitmap is not base64") from None
    if len(bitmap) * 8 > MAX_PARTITION + 1:
        raise DocumentError(where, "the bitmap reaches beyond Kafka's int32 partition range")
    if int.from_bytes(bitmap, "little").bit_count() > budget:
        raise DocumentError(where, f"more than {MAX_PARTITIONS} partitions")
    result: list[int] = []
    for index, byte in enumerate(bitmap):
        if byte:
            base = index * 8
            result.extend(base + bit for bit in _BITS[byte])
    if not result:
        raise DocumentError(where, "the bitmap has no partition in it")
    return result


def decode_set(text: Any, where: str, budget: int = MAX_PARTITIONS) -> tuple[int, ...]:
    """One topic's version-2 string back into ascending partitions."""
    if not isinstance(text, str):
        raise DocumentError(where, f"not a string of ranges or bits ({type(text).__name__})")
    if not text:
        raise DocumentError(where, "empty (a topic without partitions is left out)")
    if text.startswith(BITMAP_PREFIX):
        return tuple(_decode_bitmap(text, where, budget))
    return tuple(_decode_ranges(text, where, budget))


def decode_sets(value: Any, path: str) -> Partitions:
    """Version 2: `{"topic": "0-99,150"}` or `{"topic": "bits:..."}`."""
    if not isinstance(value, dict):
        raise DocumentError(path, f"not an object ({type(value).__name__})")
    result: Partitions = {}
    budget = MAX_PARTITIONS
    for topic in sorted(value):
        parts = decode_set(value[topic], f"{path}.{topic}", budget)
        budget -= len(parts)
        result[topic] = parts
    return result
