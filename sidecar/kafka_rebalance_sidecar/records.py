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
