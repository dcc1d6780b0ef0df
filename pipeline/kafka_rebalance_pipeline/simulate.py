"""Fluid model of a consumer group, and the scores a replay is judged by.

The model is deliberately simple, so its results can be reasoned about: production adds to each
partition's lag; each member drains at its capacity (records/s), shared max-min fairly over the
partitions it owns (a partition that needs less than its share gets only what it needs, the rest
goes to the backlogged ones); a partition that just moved is paused for a handoff time. Plain
Python lists, not numpy: groups have tens of partitions, where list loops beat array overhead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RATE_FLOOR = 1.0  # records/s under which a partition's time lag is computed as if at 1 rec/s


def share_capacity(demands: Sequence[float], limits: Sequence[float], budget: float) -> list[float]:
    """Max-min fair split of `budget` records over partitions.

    Each partition gets at most min(demand, limit); whatever one cannot use is shared by the
    others (water-filling). The total given is min(budget, sum of the caps).
    """
    caps = [max(0.0, min(d, lim)) for d, lim in zip(demands, limits, strict=True)]
    given = [0.0] * len(caps)
    order = sorted(range(len(caps)), key=caps.__getitem__)
    remaining = max(0.0, budget)
    left = len(order)
    for index in order:
        share = remaining / left
        take = min(caps[index], share)
        given[index] = take
        remaining -= take
        left -= 1
    return given


def drain_step(
    lag: Sequence[float],
    rates: Sequence[float],
    owners: Sequence[str | None],
    capacity: Mapping[str, float],
    dt: float,
    paused_s: Sequence[float] | None = None,
) -> tuple[list[float], list[float]]:
    """Advance one interval of `dt` seconds; return (new lag, records consumed) per partition.

    A partition paused for `paused_s[p]` seconds can use only the rest of the interval: its
    intake is capped at that fraction of its owner's capacity. Partitions with no owner (or an
    owner of unknown capacity) consume nothing.
    """
    count = len(lag)
    demand = [max(0.0, lag[p]) + max(0.0, rates[p]) * dt for p in range(count)]
    consumed = [0.0] * count
    by_member: dict[str, list[int]] = {}
    for p, owner in enumerate(owners):
        if owner is not None:
            by_member.setdefault(owner, []).append(p)
    for member, parts in by_member.items():
        cap = max(0.0, capacity.get(member, 0.0)) * dt
        if cap <= 0.0:
            continue
        limits = []
        for p in parts:
            pause = paused_s[p] if paused_s is not None else 0.0
            fraction = 1.0 if pause <= 0.0 else max(0.0, 1.0 - pause / dt)
            limits.append(cap * fraction)
        given = share_capacity([demand[p] for p in parts], limits, cap)
        for p, amount in zip(parts, given, strict=True):
            consumed[p] = amount
    return [demand[p] - consumed[p] for p in range(count)], consumed


def time_lag(lag: float, rate: float) -> float:
    """Seconds of production the backlog represents (an estimate of time lag)."""
    return lag / max(rate, RATE_FLOOR) if lag > 0 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Score:
    """How a replay went. Lags in records, times in seconds."""

    max_lag: float
    p99_lag: float
    mean_lag: float
    time_over_slo_s: float
    duration_s: float
    moves: int
    epochs: int
    plans: int

    def as_dict(self) -> dict[str, float | int]:
        return {
            "max_lag": self.max_lag,
            "p99_lag": self.p99_lag,
            "mean_lag": self.mean_lag,
            "time_over_slo_s": self.time_over_slo_s,
            "duration_s": self.duration_s,
            "moves": self.moves,
            "epochs": self.epochs,
            "plans": self.plans,
        }


def score(
    total_lag: Sequence[float],
    worst_time_lag: Sequence[float],
    dts: Sequence[float],
    slo_s: float,
    moves: int,
    epochs: int,
    plans: int,
) -> Score:
    """Scores of one replay. `total_lag[t]` is the group's lag at poll t, `worst_time_lag[t]` the
    largest partition time lag then, and `dts[t]` the length of the interval ending at poll t
    (the interval is over the SLO when the poll that ends it is)."""
    over = sum(dt for dt, worst in zip(dts, worst_time_lag, strict=True) if worst > slo_s)
    return Score(
        max_lag=max(total_lag, default=0.0),
        p99_lag=percentile(total_lag, 99.0),
        mean_lag=(sum(total_lag) / len(total_lag)) if total_lag else 0.0,
        time_over_slo_s=over,
        duration_s=sum(dts),
        moves=moves,
        epochs=epochs,
        plans=plans,
    )
