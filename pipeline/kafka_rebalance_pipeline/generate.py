"""Synthetic fleet telemetry (docs/architecture.md, "Telemetry"), with known ground truth.

Each group runs its current strategy (default `range`, Kafka's default) with static membership.
Partition rates are Pareto-skewed (a few hot partitions), follow a diurnal wave, and get bursts;
every member has a true capacity and, in some groups, one member is slow. Consumption follows
the same fluid model the backtest uses (`pipeline.simulate`), so the rows are what an operator
would have observed of such a fleet, and the slow member's identity is known for tests.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kafka_rebalance_assignors as assignors

from kafka_rebalance_pipeline.simulate import drain_step, time_lag


@dataclass(frozen=True)
class FleetSpec:
    groups: int = 20
    polls: int = 240
    interval_s: float = 30.0
    partitions: tuple[int, int] = (8, 32)  # per group, drawn uniformly in this range
    members: tuple[int, int] = (2, 6)
    topics: int = 2  # per group, at most; partitions are split over them
    mean_rate: float = 50.0  # records/s per partition, before skew and waves
    pareto_shape: float = 1.5  # smaller is more skewed
    diurnal_amplitude: float = 0.5
    day_s: float | None = None  # wave period; default: the whole history is one day
    bursts_per_group: float = 2.0
    burst_factor: float = 6.0
    burst_polls: tuple[int, int] = (3, 12)
    headroom: float = 1.5  # total capacity / peak production, before the slow member
    slow_fraction: float = 0.5  # share of groups with one slow member
    slow_factor: float = 0.25  # the slow member's capacity relative to its peers
    capacity_jitter: float = 0.1  # members' capacities vary by up to this fraction
    initial_backlog_s: float = 300.0  # production waiting at the start (a catch-up): long enough
    # that every member is seen saturated for several polls, so its capacity can be measured
    current_strategy: str = "range"
    start_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    cluster: str = "local"
    namespaces: int = 3
    seed: int = 7
    plan_rows: bool = True


@dataclass
class GroupTruth:
    """What the generator knows and the pipeline must infer."""

    group: str
    namespace: str
    policy: str
    members: list[str]
    capacity: dict[str, float]
    slow_member: str | None
    partitions: int
    rows: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def group_name(index: int) -> str:
    return f"group-{index:04d}"


def _topics(rng: random.Random, name: str, total: int, max_topics: int) -> dict[str, int]:
    count = max(1, min(max_topics, total, rng.randint(1, max_topics)))
    sizes = [total // count + (1 if i < total % count else 0) for i in range(count)]
    return {f"{name}-t{i}": n for i, n in enumerate(sizes)}


def generate_group(
    spec: FleetSpec, index: int, truth: list[GroupTruth] | None = None
) -> Iterator[dict[str, Any]]:
    """Rows of one group, poll by poll (a plan row first when `spec.plan_rows`).

    Invariant: the group's random draws happen in one fixed order (sizes, workload, capacities,
    offsets, backlog) from a generator seeded by (spec.seed, index), so a group's rows depend on
    nothing but those two."""
    rng = random.Random(f"{spec.seed}-{index}")
    name = group_name(index)
    namespace = f"team-{index % max(1, spec.namespaces)}"
    total = rng.randint(*spec.partitions)
    topics = _topics(rng, name, total, spec.topics)
    partitions = [(t, p) for t, n in topics.items() for p in range(n)]
    count = len(partitions)
    n_members = max(1, min(count, rng.randint(*spec.members)))
    members = [f"{name}-{i}" for i in range(n_members)]
    workload = _workload(spec, rng, count)
    capacity, slow = _capacities(spec, rng, members, workload.base)
    plan, owners = _initial_plan(spec, topics, members, partitions)

    epoch = 1
    log_end = [float(rng.randint(10_000, 10_000_000)) for _ in partitions]
    lag = [
        workload.rate(p, 0) * spec.initial_backlog_s * rng.uniform(0.5, 1.5) for p in range(count)
    ]
    record = GroupTruth(name, namespace, name, members, capacity, slow, count)
    if truth is not None:
        truth.append(record)
    if spec.plan_rows:
        yield {
            "ts_ms": spec.start_ms,
            "kind": "plan",
            "cluster": spec.cluster,
            "namespace": namespace,
            "policy": name,
            "group": name,
            "epoch": epoch,
            "strategy": spec.current_strategy,
            "moves": 0,
            "max_load_ratio_before": None,
            "max_load_ratio_after": plan.stats.max_load_ratio,
        }
    yield from _poll_rows(spec, record, workload, partitions, owners, log_end, lag, epoch)


@dataclass(frozen=True)
class _Workload:
    """Production of each partition at each poll: a Pareto-skewed base rate on one diurnal
    wave, times `burst_factor` inside a burst."""

    spec: FleetSpec
    base: list[float]
    period: float
    phase: float
    bursts: list[tuple[int, int, int]]  # (partition, first poll, last poll)

    def rate(self, p: int, t: int) -> float:
        spec = self.spec
        wave = 1.0 + spec.diurnal_amplitude * math.sin(
            2 * math.pi * t * spec.interval_s / self.period + self.phase
        )
        burst = any(q == p and a <= t <= b for q, a, b in self.bursts)
        return self.base[p] * wave * (spec.burst_factor if burst else 1.0)


def _workload(spec: FleetSpec, rng: random.Random, count: int) -> _Workload:
    base = [spec.mean_rate * (rng.paretovariate(spec.pareto_shape) / 3.0) for _ in range(count)]
    period = spec.day_s or spec.polls * spec.interval_s
    phase = rng.uniform(0, 2 * math.pi)
    bursts: list[tuple[int, int, int]] = []
    for _ in range(int(spec.bursts_per_group) + (rng.random() < spec.bursts_per_group % 1)):
        start = rng.randrange(max(1, spec.polls))
        bursts.append((rng.randrange(count), start, start + rng.randint(*spec.burst_polls)))
    return _Workload(spec, base, period, phase, bursts)


def _capacities(
    spec: FleetSpec, rng: random.Random, members: list[str], base: list[float]
) -> tuple[dict[str, float], str | None]:
    """Each member's capacity (records/s): `headroom` over the peak production shared out,
    jittered; in a `slow_fraction` of groups one member is `slow_factor` as fast. Returns the
    capacities and the slow member, if any."""
    n_members = len(members)
    peak = sum(base) * (1.0 + spec.diurnal_amplitude)
    per_member = spec.headroom * peak / n_members
    jitter = spec.capacity_jitter
    capacity = {m: per_member * rng.uniform(1 - jitter, 1 + jitter) for m in members}
    slow = None
    if n_members > 1 and rng.random() < spec.slow_fraction:
        slow = members[rng.randrange(n_members)]
        capacity[slow] = per_member * spec.slow_factor
    return capacity, slow


def _initial_plan(
    spec: FleetSpec,
    topics: dict[str, int],
    members: list[str],
    partitions: list[tuple[str, int]],
) -> tuple[assignors.Plan, list[str | None]]:
    """The current strategy's plan the history starts from, and each partition's owner."""
    request = assignors.PlanRequest(
        topics=topics,
        members={m: assignors.MemberRequest(topics=list(topics)) for m in members},
        strategy=spec.current_strategy,
    )
    plan = assignors.plan_request(request)
    owners: list[str | None] = [None] * len(partitions)
    position = {tp: i for i, tp in enumerate(partitions)}
    for member, owned in plan.assignment.items():
        for topic, parts in owned.items():
            for part in parts:
                owners[position[(topic, part)]] = member
    return plan, owners


def _poll_rows(
    spec: FleetSpec,
    record: GroupTruth,
    workload: _Workload,
    partitions: list[tuple[str, int]],
    owners: list[str | None],
    log_end: list[float],
    lag: list[float],
    epoch: int,
) -> Iterator[dict[str, Any]]:
    """One row per partition and poll while the group drains under its fixed owners (each
    counted in `record.rows`)."""
    name, namespace, capacity = record.group, record.namespace, record.capacity
    for t in range(spec.polls):
        rates = [workload.rate(p, t) for p in range(len(partitions))]
        if t > 0:
            lag, _ = drain_step(lag, rates, owners, capacity, spec.interval_s)
            log_end = [e + r * spec.interval_s for e, r in zip(log_end, rates, strict=True)]
        ts_ms = spec.start_ms + int(t * spec.interval_s * 1000)
        for p, (topic, part) in enumerate(partitions):
            end = int(log_end[p])
            committed = max(0, end - round(lag[p]))
            record.rows += 1
            yield {
                "ts_ms": ts_ms,
                "cluster": spec.cluster,
                "namespace": namespace,
                "policy": name,
                "group": name,
                "topic": topic,
                "partition": part,
                "log_start": 0,
                "log_end": end,
                "committed": committed,
                "lag": end - committed,
                "lag_state": "ok",
                "time_lag_s": round(time_lag(end - committed, rates[p]), 3),
                "owner": owners[p],
                "epoch": epoch,
            }


def generate_fleet(
    spec: FleetSpec, truth: list[GroupTruth] | None = None
) -> Iterator[dict[str, Any]]:
    for index in range(spec.groups):
        yield from generate_group(spec, index, truth)


# ------------------------------------------------------------------------------ share groups


@dataclass(frozen=True)
class ShareFleetSpec:
    """Share groups (KIP-932) on `simple`'s shape with one hot partition: partition 0 of each
    group's one topic produces `hot_factor` times the others' rate, and the members' capacity
    (equal, `headroom` times the group's production in all) would keep up if it were where the
    backlog is. `simple` gives partition 0 one member (partitions >= members), so its backlog
    grows: the case a share plan is for."""

    groups: int = 1
    polls: int = 40
    interval_s: float = 30.0
    partitions: int = 4
    members: int = 3
    rate: float = 10.0  # records/s of a cold partition
    hot_factor: float = 10.0
    headroom: float = 1.5
    initial_backlog_s: float = 60.0  # of each partition's production, waiting at the start
    member_rows: bool = True  # one share-member row per member and poll, with its throughput
    start_ms: int = 1_767_225_600_000
    cluster: str = "local"
    namespace: str = "queues"


def share_group_name(index: int) -> str:
    return f"share-{index:04d}"


def generate_share_group(
    spec: ShareFleetSpec, index: int, truth: list[GroupTruth] | None = None
) -> Iterator[dict[str, Any]]:
    """Rows of one share group, poll by poll: a `share` row per partition (backlog in `lag`,
    `rate`, `members`), then a `share-member` row per member (its capacity as `throughput`, a
    consumer's own records-per-second while busy). Deterministic: no random draws. Consumption
    follows the backtest's share model (`share_simulate.share_drain_step`) under `simple`."""
    from kafka_rebalance_assignors.share_simple import simple_assignment

    from kafka_rebalance_pipeline.share_simulate import share_drain_step

    name = share_group_name(index)
    topic = f"{name}-jobs"
    rates = [spec.rate * (spec.hot_factor if p == 0 else 1.0) for p in range(spec.partitions)]
    members = [f"{name}-consumer-{i}" for i in range(spec.members)]
    capacity = {m: spec.headroom * sum(rates) / spec.members for m in members}
    keyed = simple_assignment(members, [(topic, p) for p in range(spec.partitions)])
    assignment = {m: tuple(sorted(p for _t, p in parts)) for m, parts in keyed.items()}
    holders = {
        p: sorted(m for m, parts in assignment.items() if p in parts)
        for p in range(spec.partitions)
    }
    record = GroupTruth(name, spec.namespace, name, members, capacity, None, spec.partitions)
    record.extra["simple"] = {m: list(parts) for m, parts in assignment.items()}
    if truth is not None:
        truth.append(record)
    backlog = [r * spec.initial_backlog_s for r in rates]
    log_end = [100_000.0 + b for b in backlog]
    for t in range(spec.polls):
        if t > 0:
            backlog, _used = share_drain_step(backlog, rates, assignment, capacity, spec.interval_s)
            log_end = [e + r * spec.interval_s for e, r in zip(log_end, rates, strict=True)]
        ts_ms = spec.start_ms + int(t * spec.interval_s * 1000)
        head = {"ts_ms": ts_ms, "cluster": spec.cluster, "namespace": spec.namespace,
                "policy": name, "group": name}  # fmt: skip
        for p in range(spec.partitions):
            record.rows += 1
            yield {**head, "kind": "share", "topic": topic, "partition": p,
                   "log_end": int(log_end[p]), "lag": round(backlog[p]), "rate": rates[p],
                   "members": holders[p], "epoch": 0}  # fmt: skip
        if spec.member_rows:
            for member in members:
                record.rows += 1
                yield {**head, "kind": "share-member", "owner": member,
                       "throughput": round(capacity[member], 3)}  # fmt: skip


def generate_share_fleet(
    spec: ShareFleetSpec, truth: list[GroupTruth] | None = None
) -> Iterator[dict[str, Any]]:
    for index in range(spec.groups):
        yield from generate_share_group(spec, index, truth)


# ---------------------------------------------------------------------------- streams groups


@dataclass(frozen=True)
class StreamsFleetSpec:
    """Streams groups (KIP-1071) on Kafka's `sticky` task shape with one hot task on a slow
    instance: subtopology "0" (stateless) and "1" (stateful, one standby each) with `tasks`
    tasks each; task ("0", 0) produces `hot_factor` times the others' rate, and the instance
    `sticky` gives it runs at `slow_factor` of its peers' capacity. The peers' capacity is
    `headroom` times the group's production over the instances: enough for the hot task and a
    share of the rest, so a plan that moves the hot task off the slow instance keeps up, while
    `sticky` (blind to load) leaves it there and its backlog grows."""

    groups: int = 1
    polls: int = 40
    interval_s: float = 30.0
    tasks: int = 4  # per subtopology
    members: int = 3
    rate: float = 10.0  # records/s of a cold task
    hot_factor: float = 8.0
    headroom: float = 2.5
    slow_factor: float = 0.25
    initial_backlog_s: float = 300.0  # of each task's production waiting at the start: long
    # enough that every instance is seen busy for a few polls, so its capacity is measured
    changelog: int = 50_000  # records in each stateful task's changelog
    start_ms: int = 1_767_225_600_000
    cluster: str = "local"
    namespace: str = "apps"


def streams_group_name(index: int) -> str:
    return f"streams-{index:04d}"


def generate_streams_group(
    spec: StreamsFleetSpec, index: int, truth: list[GroupTruth] | None = None
) -> Iterator[dict[str, Any]]:
    """Rows of one streams group, poll by poll: a `streams` row per task, as the operator's
    streams kind writes them (`telemetry.streams_rows`). Deterministic: no random draws.
    Consumption follows the backtest's streams model (`simulate.drain_step` over tasks) under
    `sticky`; `truth.slow_member` is the slow instance, `extra["hot"]` the hot task."""
    from kafka_rebalance_pipeline.streams_sticky import sticky_tasks

    name = streams_group_name(index)
    tasks = [(s, p) for s in ("0", "1") for p in range(spec.tasks)]
    stateful = [s == "1" for s, _p in tasks]
    rates = [spec.rate * (spec.hot_factor if t == ("0", 0) else 1.0) for t in tasks]
    members = [f"{name}-instance-{i}" for i in range(spec.members)]
    placed = sticky_tasks(members, tasks[spec.tasks :], tasks[: spec.tasks], {})
    owners = [placed[t] for t in tasks]
    slow = placed[("0", 0)]
    fast = spec.headroom * sum(rates) / spec.members
    capacity = {m: fast * (spec.slow_factor if m == slow else 1.0) for m in members}
    standbys = [
        [members[(members.index(owner) + 1) % len(members)]] if heavy else []
        for owner, heavy in zip(owners, stateful, strict=True)
    ]
    record = GroupTruth(name, spec.namespace, name, members, capacity, slow, len(tasks))
    record.extra["hot"] = ("0", 0)
    if truth is not None:
        truth.append(record)
    backlog = [r * spec.initial_backlog_s for r in rates]
    log_end = [100_000.0 + b for b in backlog]
    for t in range(spec.polls):
        if t > 0:
            backlog, _used = drain_step(backlog, rates, owners, capacity, spec.interval_s)
            log_end = [e + r * spec.interval_s for e, r in zip(log_end, rates, strict=True)]
        ts_ms = spec.start_ms + int(t * spec.interval_s * 1000)
        head = {"ts_ms": ts_ms, "kind": "streams", "cluster": spec.cluster,
                "namespace": spec.namespace, "policy": name, "group": name}  # fmt: skip
        for k, (subtopology, p) in enumerate(tasks):
            record.rows += 1
            yield {**head, "subtopology": subtopology, "partition": p,
                   "lag": round(backlog[k]), "rate": rates[k], "log_end": int(log_end[k]),
                   "owner": owners[k], "process": f"process-{owners[k]}",
                   "stateful": stateful[k], "changelog": spec.changelog if stateful[k] else None,
                   "standbys": standbys[k], "epoch": 0}  # fmt: skip


def generate_streams_fleet(
    spec: StreamsFleetSpec, truth: list[GroupTruth] | None = None
) -> Iterator[dict[str, Any]]:
    for index in range(spec.groups):
        yield from generate_streams_group(spec, index, truth)
