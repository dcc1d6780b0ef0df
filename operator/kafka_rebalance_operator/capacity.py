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
- Neither figure exists for a member until it has enough evidence: at least `min_samples`
  intervals covering at least `min_seconds` in all. Until then its intervals are pooled (records
  over seconds) and the pooled rate seeds the EWMA. One interval is not a measurement: a
  consumer commits whole batches, so the committed advance over one poll interval is a multiple
  of its batch size (a 12.5 records/s member committing 20-record batches shows 0, 10 or 20
  records/s over 2 s), and an EWMA seeded by it carries that error for about a time constant.
  Pooled over `min_seconds` the error is at most one batch over that time.
- Until some member has a capacity estimate (`measured` is false) the weights are all 1, which
  says nothing about capacity: a load-following plan made on them balances lag or rates among
  members assumed equal, and the first plan made on measured capacity undoes it. The decide
  phase holds such plans (MeasuringCapacity); plans the group needs for coverage still go.
- Both are kept while a member gives no sample (idle, or owns nothing): a slow member stripped of
  its partitions stays slow. Members that left the group are forgotten.

Weights are effective capacities relative to their mean, clamped to [ADAPTIVE_MIN, ADAPTIVE_MAX];
a member never busy gets the mean of the busy members' estimates, raised to its throughput and to
its share of the production the busy members cannot take; until some member has an estimate every
weight is 1. A hysteresis band keeps the weights last used
until some member's new weight differs from its old one by more than `band` (relative), so noise
does not make plans.

Pure and in memory: the state lives in the policy's runtime and is lost on an operator restart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafka_rebalance_operator.kube.members import ADAPTIVE_MAX, ADAPTIVE_MIN
from kafka_rebalance_operator.partition_key import PartitionKey

# How much evidence an estimate needs: busy (or, for throughput, stable) intervals, and the
# seconds they cover together. One 20-record batch over 12 s is 1.7 records/s: inside the 20 %
# hysteresis band for a member that processes more than about 8 records/s.
MIN_SAMPLES = 3
MIN_SECONDS = 12.0


@dataclass(frozen=True)
class _Snapshot:
    t: float
    owners: dict[PartitionKey, str]
    committed: dict[PartitionKey, int]
    lag: dict[PartitionKey, int]


def _fold(old: float, sample: float, dt: float, tau_s: float) -> float:
    """EWMA over time, so an estimate means the same whatever the poll interval."""
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
class _Pooled:
    """A member's intervals before its estimate exists: records and seconds summed."""

    records: float = 0.0
    seconds: float = 0.0
    samples: int = 0


@dataclass
class CapacityEstimator:
    """Per-policy capacity memory; feed it every poll with `observe`, then ask for `weights`.

    Invariant: `capacity` and `throughput` hold a member only once its intervals of that kind
    number at least `min_samples` and cover at least `min_seconds`; until then they are pooled
    in `_pending_*` and the member counts as unmeasured."""

    tau_s: float = 30.0
    min_backlog: int = 10
    settle_s: float = 0.0
    band: float = 0.2
    min_samples: int = MIN_SAMPLES
    min_seconds: float = MIN_SECONDS
    capacity: dict[str, float] = field(default_factory=dict)  # busy-interval EWMA
    throughput: dict[str, float] = field(default_factory=dict)  # any stable interval: lower bound
    used: dict[str, float] = field(default_factory=dict)  # the weight last handed out
    _last: _Snapshot | None = None
    _owner_since: dict[PartitionKey, float] = field(default_factory=dict)
    _pending_capacity: dict[str, _Pooled] = field(default_factory=dict)
    _pending_throughput: dict[str, _Pooled] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        """Some member has a capacity estimate: the weights say something about capacity."""
        return bool(self.capacity)

    def _add(
        self,
        estimates: dict[str, float],
        pending: dict[str, _Pooled],
        member: str,
        records: int,
        dt: float,
    ) -> None:
        """Fold one interval into `estimates[member]` once it exists; else pool it, and seed
        the estimate with the pooled rate once the pool is evidence enough."""
        if member in estimates:
            estimates[member] = _fold(estimates[member], records / dt, dt, self.tau_s)
            return
        pooled = pending.setdefault(member, _Pooled())
        pooled.records += records
        pooled.seconds += dt
        pooled.samples += 1
        if pooled.samples >= self.min_samples and pooled.seconds >= self.min_seconds:
            estimates[member] = pooled.records / pooled.seconds
            del pending[member]

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
        for pending in (self._pending_capacity, self._pending_throughput):
            for name in [n for n in pending if n not in present]:
                del pending[name]
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
                self._add(self.throughput, self._pending_throughput, member, records, dt)
                if member in busy:
                    self._add(self.capacity, self._pending_capacity, member, records, dt)
                    samples[member] = records / dt
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
