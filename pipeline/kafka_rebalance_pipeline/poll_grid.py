"""Per-poll, per-partition grids read from telemetry rows (`grid[poll][partition]`), as the
replays of consumer, share and streams groups build them (a streams task is a unit like a
partition: its subtopology in place of the topic).

Invariant: a value a poll did not report (None) is the previous poll's; a rate is a log end's
advance over the poll's interval, unknown (None) where either end is unknown, the interval is
not positive or the log end went back (a recreated topic), and at the first poll.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

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


def number(value: Any) -> float | None:
    """A telemetry value as a float; None for null and NaN (pandas' null)."""
    if value is None:
        return None
    result = float(value)
    return result if result == result else None


def layout(
    rows: Sequence[Mapping[str, Any]], name: str
) -> tuple[list[int], list[tuple[str, int]], dict[int, int], dict[tuple[str, int], int]]:
    """The polls and units of work of one group's rows: (`ts_ms` of each poll, sorted; the units
    (`row[name]`, partition), every partition below the highest seen of each name, in order;
    poll index by `ts_ms`; unit index by unit)."""
    ts_ms = sorted({int(r["ts_ms"]) for r in rows})
    counts: dict[str, int] = {}
    for r in rows:
        counts[str(r[name])] = max(counts.get(str(r[name]), 0), int(r["partition"]) + 1)
    units = [(n, p) for n, c in sorted(counts.items()) for p in range(c)]
    return ts_ms, units, {ts: i for i, ts in enumerate(ts_ms)}, {u: i for i, u in enumerate(units)}


def production_rates(
    log_end: Sequence[Sequence[float | None]],
    reported: Sequence[Sequence[float | None]],
    ts_s: Sequence[float],
) -> list[list[float]]:
    """Production per unit and poll (records/s): the log end's advance (`log_end_rates`), else
    the rate the operator reported (never negative), else 0; at the first poll, when no rate
    was reported there, the second poll's."""
    rates = [
        [a if a is not None else max(0.0, reported[t][p] or 0.0) for p, a in enumerate(row)]
        for t, row in enumerate(log_end_rates(log_end, ts_s))
    ]
    if len(rates) > 1 and all(r is None for r in reported[0]):
        rates[0] = list(rates[1])
    return rates
