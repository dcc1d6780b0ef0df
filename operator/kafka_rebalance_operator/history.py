"""Per-partition memory across polls: EWMA rates and time lag from the history of end offsets.

Rates are exponentially weighted over a time constant (not a sample count) so they mean the same
whatever the poll interval. Time lag follows kafka-lag-exporter's method: remember (time, log
end) points, find when the log end passed the committed offset, and report now minus that time.
It needs two points; until then it is unknown (None), never zero.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

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
