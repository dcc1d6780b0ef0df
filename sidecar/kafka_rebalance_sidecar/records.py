"""The shape of what the sidecar hands to the application.

Kept free of kafka-python types so that a handler (in process or behind HTTP) depends only on
these plain frozen values, and so that the ledger and the tests can build batches directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Record:
    """One consumed record, with the coordinates needed to prove it was processed."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class Batch:
    """Records delivered together, tagged with the member and the plan epoch it consumed under,
    so a handler (and the ledger) can tell which plan a record was processed in."""

    member: str
    epoch: int
    records: tuple[Record, ...]


Handler = Callable[[Batch], None]
"""Processes a batch. Raising means "not delivered": the sidecar retries and does not commit."""


_new = object.__new__


def record(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int,
    headers: tuple[tuple[str, bytes], ...],
) -> Record:
    """`Record(...)`, built about four times faster: the sidecar makes one per consumed record
    (`runner.to_batch` does the same inline, without a call per record), and a frozen
    dataclass's generated `__init__` sets each field through `object.__setattr__`. Filling the
    instance's `__dict__` directly gives an equal, equally frozen value (equality, hashing and
    repr read the same attributes). The arguments are trusted: positional, all of them."""
    made = _new(Record)
    made.__dict__.update(
        topic=topic,
        partition=partition,
        offset=offset,
        key=key,
        value=value,
        timestamp_ms=timestamp_ms,
        headers=headers,
    )
    return made
