"""Adaptive weights: each member's capacity (records/s it can process), estimated across polls.

The consumption rate of the partitions a member owns now is the wrong measure: a partition's
rate includes what its previous owner consumed, a member that owns nothing has no rate at all
(and fell back to weight 1, so a slow member stripped of everything was handed partitions again),
and a member that keeps up consumes what is produced (its load), not what it could (its
capacity). Load-following without those corrections runs away (KIP-794's lesson), so:

- A poll interval counts for a member only through *stable* partitions: owned by it in the
  applied ConfigMaps (and, in group mode, in the group's actual assignment) at both ends of the
  interval, and since at least `settle_s` before the
  interval began (a hand-over takes a rebalance). A partition that changed owner counts for
  nobody, so no member inherits another's speed.
- A member is *busy* in an interval when one of its stable partitions was backlogged (lag above
  `min_backlog`) at both ends: it was consuming as fast as it could. Only then is the
  committed-offset advance of its stable partitions over the interval a capacity sample; samples
  are folded into a per-member EWMA (time constant `tau_s`).
- Every interval with stable partitions also feeds a throughput EWMA, a lower bound on capacity:
  it only ever raises a member's effective capacity, so an idle fast member never looks slow.
- Both are kept while a member gives no sample (idle, or owns nothing): a slow member stripped of
  its partitions stays slow. Members that left the group are forgotten.

Weights are effective capacities relative to their mean, clamped to [ADAPTIVE_MIN, ADAPTIVE_MAX];
a member never busy gets the mean of the busy members' estimates, raised to its throughput and to
its share of the production the busy members cannot take; until some member has been busy every
weight is 1. A hysteresis band keeps the weights last used
until some member's new weight differs from its old one by more than `band` (relative), so noise
does not make plans.

Pure and in memory: the state lives in the policy's runtime and is lost on an operator restart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafka_rebalance_operator.members import ADAPTIVE_MAX, ADAPTIVE_MIN
from kafka_rebalance_operator.partition_key import PartitionKey


@dataclass(frozen=True)
class _Snapshot:
    t: float
    owners: dict[PartitionKey, str]
    committed: dict[PartitionKey, int]
    lag: dict[PartitionKey, int]


def _fold(old: float | None, sample: float, dt: float, tau_s: float) -> float:
    """EWMA over time, so an estimate means the same whatever the poll interval."""
    if old is None:
        return sample
    return old + (1.0 - math.exp(-dt / tau_s)) * (sample - old)


def confirmed_owners(
    planned: Mapping[PartitionKey, str],
    actual: Mapping[PartitionKey, str] | None,
    stable: bool = True,
) -> dict[PartitionKey, str]:
    """The owners to measure by: the plan's, where the group's actual assignment (group mode,
    when described) agrees. A partition the plan gave a member that has not taken it yet is
    backlogged and still: counted for that member it would make a fast member look slow. While
    the group rebalances nobody owns anything, so every partition settles again afterwards."""
    if actual is None:
        return dict(planned)
    if not stable:
        return {}
    return {key: member for key, member in planned.items() if actual.get(key) == member}


@dataclass
class CapacityEstimator:
    """Per-policy capacity memory; feed it every poll with `observe`, then ask for `weights`."""

    tau_s: float = 30.0
    min_backlog: int = 10
    settle_s: float = 0.0
    band: float = 0.2
    capacity: dict[str, float] = field(default_factory=dict)  # busy-interval EWMA
    throughput: dict[str, float] = field(default_factory=dict)  # any stable interval: lower bound
    used: dict[str, float] = field(default_factory=dict)  # the weight last handed out
    _last: _Snapshot | None = None
    _owner_since: dict[PartitionKey, float] = field(default_factory=dict)

    def observe(
        self,
        t: float,
        owners: Mapping[PartitionKey, str],
        committed: Mapping[PartitionKey, int],
        lag: Mapping[PartitionKey, int],
        members: Iterable[str],
    ) -> dict[str, float]:
        """Take this poll's readings (owner per partition from the applied ConfigMaps; committed
        offset and lag where known). Returns the capacity samples taken, per busy member."""
        present = set(members)
        for table in (self.capacity, self.throughput, self.used):
            for name in [n for n in table if n not in present]:
                del table[name]
        samples: dict[str, float] = {}
        last = self._last
        if last is not None and t > last.t:
            dt = t - last.t
            advance: dict[str, int] = {}
            busy: set[str] = set()
            for key, member in owners.items():
                if last.owners.get(key) != member or member not in present:
                    continue
                if self._owner_since.get(key, math.inf) > last.t - self.settle_s:
                    continue
                c0, c1 = last.committed.get(key), committed.get(key)
                if c0 is None or c1 is None or c1 < c0:
                    continue  # unknown or reset: no evidence either way
                advance[member] = advance.get(member, 0) + (c1 - c0)
                l0, l1 = last.lag.get(key), lag.get(key)
                if l0 is not None and l1 is not None and min(l0, l1) > self.min_backlog:
                    busy.add(member)
            for member, records in advance.items():
                rate = records / dt
                self.throughput[member] = _fold(self.throughput.get(member), rate, dt, self.tau_s)
                if member in busy:
                    self.capacity[member] = _fold(self.capacity.get(member), rate, dt, self.tau_s)
                    samples[member] = rate
        previous = last.owners if last is not None else {}
        self._owner_since = {
            key: (self._owner_since.get(key, t) if previous.get(key) == member else t)
            for key, member in owners.items()
        }
        self._last = _Snapshot(t, dict(owners), dict(committed), dict(lag))
        return samples

    def effective(self, members: Iterable[str], demand: float | None = None) -> dict[str, float]:
        """Capacity per member as the weights see it; empty until some member has been busy.

        A member never busy has capacity at least the busy members' mean, its own throughput,
        and its share of the `demand` (records/s produced) the busy members cannot take: it is
        not saturated, so it carries that share now. Without the last, a slow member would keep
        a weight near the others' while they idle, and keep too many partitions."""
        members = list(members)
        busy = {m: v for m in members if (v := self.capacity.get(m)) is not None and v > 0}
        if not busy:
            return {}
        mean = sum(busy.values()) / len(busy)
        idle = [m for m in members if m not in busy]
        left_over = 0.0
        if demand is not None and demand > 0 and idle:
            left_over = (demand - sum(busy.values())) / len(idle)
        result = {}
        for member in members:
            base = busy[member] if member in busy else max(mean, left_over)
            result[member] = max(base, self.throughput.get(member, 0.0))
        return result

    def weights(self, members: Iterable[str], demand: float | None = None) -> dict[str, float]:
        """Adaptive weight per member, with hysteresis over the whole set: the weights last handed
        out are kept while every member's new weight is within `band` of its old one; once one
        is not (or membership changed), all are renewed together, since only their ratios matter
        to the planner (holding the others while one moves would skew them)."""
        members = list(members)
        capacities = self.effective(members, demand)
        mean = sum(capacities.values()) / len(capacities) if capacities else 0.0
        raw = {
            m: min(ADAPTIVE_MAX, max(ADAPTIVE_MIN, capacities[m] / mean)) if mean > 0 else 1.0
            for m in members
        }
        held = self.used
        if set(held) == set(raw) and all(abs(raw[m] - held[m]) <= self.band * held[m] for m in raw):
            return dict(held)
        self.used = dict(raw)
        return raw
