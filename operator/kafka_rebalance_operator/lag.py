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

from dataclasses import dataclass
from enum import StrEnum


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
