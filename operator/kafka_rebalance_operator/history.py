"""Per-partition memory across polls: EWMA rates and time lag from the history of end offsets.

Rates are exponentially weighted over a time constant (not a sample count) so they mean the same
whatever the poll interval. Time lag follows kafka-lag-exporter's method: remember (time, log
end) points, find when the log end passed the committed offset, and report now minus that time.
It needs two points; until then it is unknown (None), never zero.

`PolicyHistory` is the same memory for every partition of a policy at once, in numpy arrays
(what the operator keeps); `Ewma`, `EndOffsetHistory` and `PartitionMemory` are the
per-partition reference it is tested against.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from kafka_rebalance_operator.lag import Layout, TopicValues

MAX_POINTS = 60


@dataclass
class Ewma:
    """An exponentially weighted rate (units per second) with time constant `tau_s`."""

    tau_s: float = 60.0
    value: float | None = None
    _last_t: float | None = None
    _last_x: int | None = None

    def update(self, t: float, x: int) -> float | None:
        """Feed a counter reading `x` at time `t`; a counter that went down restarts the rate
        (topic recreated, offsets reset) instead of producing a negative rate."""
        if self._last_t is None or self._last_x is None or t <= self._last_t or x < self._last_x:
            if self._last_x is not None and x < self._last_x:
                self.value = None
            self._last_t, self._last_x = t, x
            return self.value
        dt = t - self._last_t
        rate = (x - self._last_x) / dt
        if self.value is None:
            self.value = rate
        else:
            alpha = 1.0 - math.exp(-dt / self.tau_s)
            self.value += alpha * (rate - self.value)
        self._last_t, self._last_x = t, x
        return self.value


@dataclass
class EndOffsetHistory:
    """Points (t, log end), newest last; flat runs keep their first and last point only."""

    points: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))

    def add(self, t: float, end: int) -> None:
        if self.points:
            last_t, last_end = self.points[-1]
            if t <= last_t:
                return  # out of order
            if end < last_end:
                self.points.clear()  # non-monotonic: the log was recreated; start over
            elif len(self.points) >= 2 and end == last_end and self.points[-2][1] == last_end:
                self.points[-1] = (t, end)  # extend a flat run
                return
        self.points.append((t, end))

    def time_lag(self, committed: int, now: float) -> float | None:
        """Seconds since the log end was at `committed`; None until two points exist."""
        if not self.points:
            return None
        latest_end = self.points[-1][1]
        if committed >= latest_end:
            return 0.0
        if len(self.points) < 2:
            return None
        points = list(self.points)
        estimate: float | None = None
        for (t0, e0), (t1, e1) in zip(reversed(points[:-1]), reversed(points[1:]), strict=True):
            if e0 <= committed <= e1:
                estimate = t0 if e1 == e0 else t0 + (committed - e0) * (t1 - t0) / (e1 - e0)
                break
        if estimate is None:
            (t0, e0), (t1, e1) = points[0], points[-1]
            if e1 == e0:
                return max(0.0, now - t0)
            estimate = t0 + (committed - e0) * (t1 - t0) / (e1 - e0)
        return max(0.0, now - estimate)


@dataclass
class PartitionMemory:
    """Everything the operator remembers about one partition between polls."""

    produce: Ewma = field(default_factory=Ewma)
    consume: Ewma = field(default_factory=Ewma)
    ends: EndOffsetHistory = field(default_factory=EndOffsetHistory)
    last_lag: int | None = None
    last_lag_t: float | None = None

    def observe(self, t: float, end: int | None, committed: int | None, lag: int | None) -> None:
        if end is not None:
            self.produce.update(t, end)
            self.ends.add(t, end)
        if committed is not None and committed >= 0:
            self.consume.update(t, committed)
        if lag is not None:
            self.last_lag, self.last_lag_t = lag, t


# ------------------------------------------------------------------------- one policy, columnar


class _Rates:
    """`Ewma` for every partition of a policy: value (NaN: None), last time (NaN: None) and
    last counter reading (-1: None), in `Layout` order; also each partition's rate over its
    last interval alone (NaN: none since a restart), which a step in production moves at once
    while the EWMA follows it over a time constant."""

    __slots__ = ("last_rate", "last_t", "last_x", "tau_s", "value")

    def __init__(self, n: int, tau_s: float = 60.0) -> None:
        self.tau_s = tau_s
        self.value = np.full(n, np.nan)
        self.last_t = np.full(n, np.nan)
        self.last_x = np.full(n, -1, np.int64)
        self.last_rate = np.full(n, np.nan)

    def update(self, t: float, x: np.ndarray, mask: np.ndarray) -> None:
        """`Ewma.update(t, x[i])` for each partition i in `mask`."""
        had = mask & (self.last_x >= 0)
        down = had & (x < self.last_x)
        restart = mask & (~had | ~(t > self.last_t) | down)
        self.value[down] = np.nan
        self.last_rate[restart] = np.nan
        go = np.flatnonzero(mask & ~restart)
        if len(go):
            dt = t - self.last_t[go]
            rate = (x[go] - self.last_x[go]) / dt
            old = self.value[go]
            alpha = 1.0 - np.exp(-dt / self.tau_s)
            self.value[go] = np.where(np.isnan(old), rate, old + alpha * (rate - old))
            self.last_rate[go] = rate
        self.last_t[mask] = t
        self.last_x[mask] = x[mask]

    def take(self, old: _Rates, new_rows: np.ndarray, old_rows: np.ndarray) -> None:
        for name in ("value", "last_t", "last_x", "last_rate"):
            getattr(self, name)[new_rows] = getattr(old, name)[old_rows]


class PolicyHistory:
    """`PartitionMemory` for every partition of a policy, as arrays in `layout` order: the two
    EWMA rates, the end-offset history (at most `points` (time, log end) points per partition,
    flat runs kept as their first and last point, oldest first) and the lag last reported.

    The same arithmetic as the per-partition objects, in the same order, so rates and time lags
    are those the objects give (tests/unit/operator/test_operator_columnar.py). A point is 4 bytes:
    its time
    as an int16 index into the policy's table of poll times (all partitions of a policy are
    read at the same times, so a time is stored once; the table is compacted to the times still
    referred to when it grows past `4 * points + 1024`, and the index widened to int32 should
    those ever outgrow int16), and its log end as a uint16 step above the point before it (the
    oldest point's step is 0: its log end is the partition's `base`; steps past a partition's
    count are 0, so a partition's last log end is its base plus the sum of its steps). The
    first step of more than 65,535 offsets between two points of any partition widens the
    policy's steps to uint32 (6 bytes a point from then on); should one partition's points span
    more than 2**31 - 1 offsets, its oldest points are dropped until they fit (the objects
    would keep them), so a step always fits uint32. Memory per partition: 4 bytes per point
    plus 90 (`bytes_per_partition`); a poll's working arrays are bounded by working through
    `CHUNK` partitions at a time."""

    CHUNK = 8192
    _SPAN = 2**31 - 1

    def __init__(self, layout: Layout, points: int = MAX_POINTS) -> None:
        n = layout.size
        self.layout, self.points = layout, points
        self.produce, self.consume = _Rates(n), _Rates(n)
        self.clock = np.empty(0)  # poll times the points refer to
        self._clock_limit = 4 * points + 1024  # the clock is compacted when longer
        self.when = np.zeros((n, points), np.int16)  # each point's time: an index into clock
        self.base = np.zeros(n, np.int64)  # each partition's oldest point's log end
        self.step = np.zeros((n, points), np.uint16)  # each point's log end minus the one before
        self.count = np.zeros(n, np.int16)
        self.reported_lag = np.full(n, -1, np.int64)  # the lag the last poll reported
        self.last_lag_t = np.full(n, np.nan)  # when a lag was last known

    @property
    def times(self) -> np.ndarray:
        """Each point's time (a copy; cells past a partition's count are meaningless)."""
        return self.clock[self.when] if len(self.clock) else np.zeros(self.when.shape)

    @property
    def ends(self) -> np.ndarray:
        """Each point's log end (a copy; cells past a partition's count are meaningless)."""
        return self.base[:, None] + np.cumsum(self.step, axis=1, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        arrays: list[np.ndarray] = [self.when, self.base, self.step, self.count, self.reported_lag]
        arrays.append(self.last_lag_t)
        for rates in (self.produce, self.consume):
            arrays += [rates.value, rates.last_t, rates.last_x, rates.last_rate]
        return sum(a.nbytes for a in arrays)

    @staticmethod
    def bytes_per_partition(points: int = MAX_POINTS) -> int:
        return 4 * points + 8 + 2 + 8 + 8 + 2 * (8 + 8 + 8 + 8)

    def resized(self, layout: Layout) -> PolicyHistory:
        """This history for `layout`: partitions in both keep theirs (by topic and number),
        new ones start empty, gone ones are dropped."""
        if layout == self.layout:
            return self
        fresh = PolicyHistory(layout, self.points)
        fresh.clock = self.clock
        fresh.when = fresh.when.astype(self.when.dtype)  # as widened here
        fresh.step = fresh.step.astype(self.step.dtype)
        into, out = layout.carry(self.layout)
        if len(into):
            fresh.produce.take(self.produce, into, out)
            fresh.consume.take(self.consume, into, out)
            for name in ("when", "base", "step", "count", "reported_lag", "last_lag_t"):
                getattr(fresh, name)[into] = getattr(self, name)[out]
        return fresh

    def carried(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """(the lag each partition last reported (-1: none), seconds since a lag was known)."""
        ages = np.where(np.isnan(self.last_lag_t), 0.0, now - self.last_lag_t)
        return self.reported_lag, ages

    def observe(
        self,
        t: float,
        end: np.ndarray,
        committed: np.ndarray,
        known: np.ndarray,
        lags: np.ndarray,
    ) -> None:
        """`PartitionMemory.observe` for every partition: `end` where it is >= 0; `committed`
        and the lag where the partition's state is `known` (not unknown)."""
        has_end = end >= 0
        self.produce.update(t, end, has_end)
        self._add(t, end, has_end)
        self.consume.update(t, committed, known & (committed >= 0))
        lag_known = known & (lags >= 0)
        self.last_lag_t[lag_known] = t
        self.reported_lag = lags.copy()

    def _tick(self, t: float) -> int:
        """The index of time `t` in the clock (added if new; the clock is compacted to the
        times still referred to when it grows long)."""
        if len(self.clock) and self.clock[-1] == t:
            return len(self.clock) - 1
        if len(self.clock) > self._clock_limit:
            blocks = [slice(s, s + self.CHUNK) for s in range(0, len(self.count), self.CHUNK)]
            steps = np.arange(self.points)[None, :]
            used = np.unique(
                np.concatenate(
                    [np.empty(0, np.int64)]
                    + [np.unique(self.when[b][steps < self.count[b, None]]) for b in blocks]
                )
            )
            for b in blocks:
                valid = steps < self.count[b, None]
                self.when[b] = np.where(valid, np.searchsorted(used, self.when[b]), 0)
            self.clock = self.clock[used]
        if len(self.clock) >= np.iinfo(self.when.dtype).max:  # still referred to: widen
            self.when = self.when.astype(np.int32)
        self.clock = np.append(self.clock, t)
        return len(self.clock) - 1

    def _last_ends(self, rows: np.ndarray) -> np.ndarray:
        """Each of `rows`' newest log end (its base where it has no points)."""
        out: np.ndarray = self.base[rows].copy()
        for start in range(0, len(rows), self.CHUNK):
            chunk = rows[start : start + self.CHUNK]
            out[start : start + self.CHUNK] += self.step[chunk].sum(axis=1, dtype=np.int64)
        return out

    def _add(self, t: float, end: np.ndarray, mask: np.ndarray) -> None:
        """`EndOffsetHistory.add(t, end[i])` for each partition i in `mask`."""
        rows = np.flatnonzero(mask)
        if not len(rows):
            return
        k = self._tick(t)
        count = self.count[rows].astype(np.int64)
        e = end[rows]
        some = count > 0
        last = np.maximum(count - 1, 0)
        last_t = self.clock[self.when[rows, last]]
        last_e = self._last_ends(rows)
        skip = some & ~(t > last_t)
        clear = some & ~skip & (e < last_e)
        before = last_e - self.step[rows, last]  # the point before the last one, if any
        extend = some & ~skip & ~clear & (count >= 2) & (e == last_e) & (before == last_e)
        self.when[rows[extend], last[extend]] = k
        count[clear] = 0
        self.step[rows[clear]] = 0
        append = ~skip & ~extend
        full = append & (count >= self.points)
        if full.any():
            self._drop_oldest(rows[full])
            count[full] = self.points - 1
        at, pos, value = rows[append], count[append], e[append]
        fresh = pos == 0
        self.base[at[fresh]] = value[fresh]
        for i in np.flatnonzero(value - self.base[at] > self._SPAN).tolist():  # rare
            row = int(at[i])
            while pos[i] > 0 and value[i] - self.base[row] > self._SPAN:
                self._drop_oldest(np.array([row]))
                pos[i] -= 1
            if pos[i] == 0:
                self.step[row] = 0
                self.base[row] = value[i]
        steps = np.where(pos == 0, 0, value - last_e[append])
        if len(steps) and steps.max() > np.iinfo(self.step.dtype).max:
            self.step = self.step.astype(np.uint32)  # at most _SPAN: fits
        self.step[at, pos] = steps
        self.when[at, pos] = k
        count[append] = pos + 1
        self.count[rows] = count

    def _drop_oldest(self, rows: np.ndarray) -> None:
        """The oldest point of each of `rows` dropped: the next one's log end is the base."""
        self.when[rows, :-1] = self.when[rows, 1:]
        if self.points > 1:
            self.base[rows] += self.step[rows, 1]
            self.step[rows, 1:-1] = self.step[rows, 2:]
        self.step[rows, -1] = 0

    def time_lags(self, committed: np.ndarray, ok: np.ndarray, now: float) -> np.ndarray:
        """`EndOffsetHistory.time_lag(committed[i], now)` for each partition i in `ok` (NaN
        elsewhere, and where the history cannot say)."""
        out = np.full(len(committed), np.nan)
        rows = np.flatnonzero(ok & (self.count > 0))
        for start in range(0, len(rows), self.CHUNK):
            chunk = rows[start : start + self.CHUNK]
            out[chunk] = self._time_lags(chunk, committed[chunk], now)
        return out

    def _time_lags(self, rows: np.ndarray, c: np.ndarray, now: float) -> np.ndarray:
        out = np.full(len(rows), np.nan)
        count = self.count[rows].astype(np.int64)
        base = self.base[rows]
        latest = self._last_ends(rows)
        caught_up = c >= latest
        out[caught_up] = 0.0
        need = np.flatnonzero(~caught_up & (count >= 2))
        if not len(need):
            return out
        r, count, c, base = rows[need], count[need], c[need], base[need]
        delta = np.cumsum(self.step[r], axis=1, dtype=np.int64)  # each point's log end - base
        valid = np.arange(self.points)[None, :] < count[:, None]
        j = (valid & (delta <= (c - base)[:, None])).sum(axis=1) - 1
        found = j >= 0
        k0 = np.where(found, j, 0)
        k1 = np.where(found, j + 1, count - 1)
        line = np.arange(len(r))
        t0, t1 = self.clock[self.when[r, k0]], self.clock[self.when[r, k1]]
        e0, e1 = base + delta[line, k0], base + delta[line, k1]
        flat = e1 == e0
        with np.errstate(divide="ignore", invalid="ignore"):
            estimate = np.where(flat, t0, t0 + (c - e0) * (t1 - t0) / np.where(flat, 1, e1 - e0))
        out[need] = np.maximum(0.0, now - estimate)
        return out

    def produce_rates(self) -> TopicValues:
        """key -> production EWMA (None: not known yet), for the planner's request."""
        return self.layout.per_topic(self.produce.value)

    def demand(self) -> float:
        """Records/s the policy's partitions are produced: the larger of the summed production
        EWMAs and the production over the last poll interval alone. A step up counts from the
        first poll after it (the EWMA alone would read low for about a time constant, and
        capacity shares computed from it would load a slow member); a step down is followed
        at the EWMA's pace, so one quiet interval does not take capacity away."""
        if not len(self.produce.value):
            return 0.0
        return max(float(np.nansum(self.produce.value)), float(np.nansum(self.produce.last_rate)))
