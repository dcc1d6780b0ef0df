"""Per-poll, per-partition grids read from telemetry rows (`grid[poll][partition]`), as the
replays of consumer and share groups build them.

Invariant: a value a poll did not report (None) is the previous poll's; a rate is a log end's
advance over the poll's interval, unknown (None) where either end is unknown, the interval is
not positive or the log end went back (a recreated topic), and at the first poll.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def carry_forward(grid: list[list[T | None]]) -> None:
    """Fill the grid's gaps with the value the partition had at the poll before, in place."""
    for t in range(1, len(grid)):
        before, now = grid[t - 1], grid[t]
        for p, value in enumerate(now):
            if value is None:
                now[p] = before[p]


def log_end_rates(
    log_end: Sequence[Sequence[float | None]], ts_s: Sequence[float]
) -> list[list[float | None]]:
    """Records per second each partition's log end advanced by between a poll and the one
    before it (None where that cannot be told)."""
    rates: list[list[float | None]] = [[None] * len(row) for row in log_end]
    for t in range(1, len(log_end)):
        dt = ts_s[t] - ts_s[t - 1]
        for p, (a, b) in enumerate(zip(log_end[t - 1], log_end[t], strict=True)):
            if a is not None and b is not None and dt > 0 and b >= a:
                rates[t][p] = (b - a) / dt
    return rates
