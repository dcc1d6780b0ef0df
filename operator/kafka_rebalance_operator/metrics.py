"""Prometheus metrics (`kafka_rebalance_*`, docs/naming.md), served on :9100/metrics.

Per-partition series are removed when a partition or member leaves a policy, so a long-running
operator does not export the lag of partitions that no longer exist. Their labels name the
partition only (its lag state is counted per policy in `kafka_rebalance_partitions`), so a series
keeps its identity while its lag state changes. Each policy exports at most `max_partition_series`
partitions: those that had a series at the last poll keep it, new ones take the free places in
(topic, partition) order, and the rest are counted in
`kafka_rebalance_partition_series_dropped_total` (one tenant's `topicPattern: .*` cannot flood
the operator's /metrics or crowd out another policy's series).

A poll hands its partitions over as columns (`PartitionRows`); only the series whose value
changed since the last poll are written, so a settled policy of 100,000 partitions costs a few
array comparisons, not 100,000 label look-ups.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from kafka_rebalance_operator.lag import STATES, Layout

REGISTRY = CollectorRegistry(auto_describe=True)
POLICY = ("namespace", "policy", "group")

# The default cap on per-partition series per policy (`--max-partition-series`).
DEFAULT_MAX_PARTITION_SERIES = 10_000

PARTITION_LAG = Gauge(
    "kafka_rebalance_partition_lag",
    "Offset lag of a partition at the last poll (records; unknown partitions carry the last "
    "known value)",
    (*POLICY, "topic", "partition"),
    registry=REGISTRY,
)
PARTITIONS_BY_STATE = Gauge(
    "kafka_rebalance_partitions",
    "Partitions of a policy in each lag state at the last poll",
    (*POLICY, "state"),
    registry=REGISTRY,
)
PARTITION_SERIES_DROPPED = Counter(
    "kafka_rebalance_partition_series_dropped",
    "Partitions left without per-partition series at a poll because the policy has more than "
    "--max-partition-series (counted once per poll)",
    ("namespace", "policy"),
    registry=REGISTRY,
)
PARTITION_TIME_LAG = Gauge(
    "kafka_rebalance_partition_time_lag_seconds",
    "Time lag of a partition, interpolated from the history of log-end offsets",
    (*POLICY, "topic", "partition"),
    registry=REGISTRY,
)
MEMBER_LAG = Gauge(
    "kafka_rebalance_member_lag",
    "Sum of the offset lag of the partitions assigned to a member",
    (*POLICY, "member"),
    registry=REGISTRY,
)
MEMBER_PARTITIONS = Gauge(
    "kafka_rebalance_member_partitions",
    "Partitions assigned to a member by the applied plan",
    (*POLICY, "member"),
    registry=REGISTRY,
)
EPOCH = Gauge("kafka_rebalance_plan_epoch", "Epoch of the applied plan", POLICY, registry=REGISTRY)
MAX_LOAD_RATIO = Gauge(
    "kafka_rebalance_max_load_ratio",
    "Most loaded member's normalised load over the lower bound (1.0 is perfect)",
    POLICY,
    registry=REGISTRY,
)
TOTAL_LAG = Gauge("kafka_rebalance_total_lag", "Sum of known lags", POLICY, registry=REGISTRY)
PLANS = Counter(
    "kafka_rebalance_plans_applied_total", "Plans applied (epochs)", POLICY, registry=REGISTRY
)
MOVES = Counter(
    "kafka_rebalance_moves_total", "Partitions moved by applied plans", POLICY, registry=REGISTRY
)
STREAMS_TRIGGERS = Counter(
    "kafka_rebalance_streams_triggers_total",
    "Streams groups: recompute triggers sent to make the coordinator follow a new plan",
    POLICY,
    registry=REGISTRY,
)
STREAMS_EPOCH_BUMPS = Histogram(
    "kafka_rebalance_streams_epoch_bumps_per_plan",
    "Streams groups: group-epoch bumps from a plan's trigger to the group following it",
    POLICY,
    buckets=(1, 2, 3, 4, 6, 8, 12, 16),
    registry=REGISTRY,
)
POLL_SECONDS = Histogram(
    "kafka_rebalance_poll_duration_seconds",
    "Duration of one poll (observe, plan, apply)",
    ("namespace", "policy"),
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
ERRORS = Counter(
    "kafka_rebalance_poll_errors_total",
    "Polls that failed, by reason (KafkaUnreachable, SecretNotFound, ...)",
    ("namespace", "policy", "reason"),
    registry=REGISTRY,
)
PARTITION_ERRORS = Counter(
    "kafka_rebalance_partition_read_errors_total",
    "Partition reads that failed (the partition's state is unknown for that poll)",
    ("namespace", "policy"),
    registry=REGISTRY,
)
LAST_SUCCESS = Gauge(
    "kafka_rebalance_last_successful_poll_timestamp_seconds",
    "Unix time of the last successful poll",
    ("namespace", "policy"),
    registry=REGISTRY,
)

POLICY_CONDITION = Gauge(
    "kafka_rebalance_policy_condition",
    "1 while the policy's status condition (Ready, Reconciling, Stalled) is True, else 0; "
    "`reason` is the condition's current reason (one series per condition: alerts key on it)",
    ("namespace", "policy", "condition", "reason"),
    registry=REGISTRY,
)

_SERIES_LOCK = threading.Lock()
_PARTITION_SERIES: dict[tuple[str, str], set[tuple[str, ...]]] = {}
_MEMBER_SERIES: dict[tuple[str, str], set[tuple[str, ...]]] = {}
_CONDITION_SERIES: dict[tuple[str, str], set[tuple[str, ...]]] = {}
_STATE_SERIES: dict[tuple[str, str], set[tuple[str, ...]]] = {}


@dataclass(frozen=True)
class PartitionRows:
    """A policy's partitions as columns in `layout` order: lag state codes (`lag.STATES`),
    lags (-1: unknown) and time lags (NaN: unknown). Iterating gives the rows
    (topic, partition, state, lag, time lag) one at a time, for sinks that want rows."""

    layout: Layout
    states: np.ndarray
    lags: np.ndarray
    time_lags: np.ndarray

    def __iter__(self) -> Iterator[tuple[str, int, str, int | None, float | None]]:
        states, lags = self.states.tolist(), self.lags.tolist()
        time_lags = self.time_lags.tolist()
        for i, (topic, partition) in enumerate(self.layout.keys()):
            lag, time_lag = lags[i], time_lags[i]
            yield (
                topic,
                partition,
                STATES[states[i]].value,
                None if lag < 0 else lag,
                None if math.isnan(time_lag) else time_lag,
            )


@dataclass
class _Written:
    """What a policy's per-partition series hold now (columnar path): which partitions have
    series, and the lag and time lag last written (-1 / NaN: none)."""

    layout: Layout
    series: np.ndarray
    lags: np.ndarray
    time_lags: np.ndarray
    group: str


_WRITTEN: dict[tuple[str, str], _Written] = {}


def _replace_series(
    store: dict[tuple[str, str], set[tuple[str, ...]]],
    key: tuple[str, str],
    new: set[tuple[str, ...]],
    gauges: Iterable[Gauge],
    width: Mapping[Gauge, int],
) -> None:
    with _SERIES_LOCK:
        old = store.get(key, set())
        for labels in old - new:
            for gauge in gauges:
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels[: width[gauge]])
        store[key] = new


def record_partitions(
    namespace: str,
    policy: str,
    group: str,
    rows: Iterable[tuple[str, int, str, int | None, float | None]],
    max_series: int = DEFAULT_MAX_PARTITION_SERIES,
) -> None:
    """rows: (topic, partition, state, lag, time_lag_s); see the module docstring for the cap."""
    if isinstance(rows, PartitionRows):
        _record_columns(namespace, policy, group, rows, max_series)
        return
    _WRITTEN.pop((namespace, policy), None)
    rows = list(rows)
    states: dict[str, int] = {}
    for row in rows:
        states[row[2]] = states.get(row[2], 0) + 1
    key = (namespace, policy)
    with _SERIES_LOCK:
        before = _PARTITION_SERIES.get(key, set())
    kept = _within_cap(rows, before, max_series)
    series: set[tuple[str, ...]] = set()
    for topic, partition, _state, lag, time_lag in kept:
        labels = (namespace, policy, group, topic, str(partition))
        series.add(labels)
        if lag is not None:
            PARTITION_LAG.labels(*labels).set(lag)
        else:
            with contextlib.suppress(KeyError):
                PARTITION_LAG.remove(*labels)
        if time_lag is not None:
            PARTITION_TIME_LAG.labels(*labels).set(time_lag)
        else:
            with contextlib.suppress(KeyError):
                PARTITION_TIME_LAG.remove(*labels)
    _replace_series(
        _PARTITION_SERIES,
        key,
        series,
        (PARTITION_LAG, PARTITION_TIME_LAG),
        {PARTITION_LAG: 5, PARTITION_TIME_LAG: 5},
    )
    state_series: set[tuple[str, ...]] = {(namespace, policy, group, state) for state in states}
    for state, count in states.items():
        PARTITIONS_BY_STATE.labels(namespace, policy, group, state).set(count)
    _replace_series(
        _STATE_SERIES, key, state_series, (PARTITIONS_BY_STATE,), {PARTITIONS_BY_STATE: 4}
    )
    if len(rows) > len(kept):
        PARTITION_SERIES_DROPPED.labels(namespace, policy).inc(len(rows) - len(kept))


def _within_cap(
    rows: list[tuple[str, int, str, int | None, float | None]],
    before: set[tuple[str, ...]],
    cap: int,
) -> list[tuple[str, int, str, int | None, float | None]]:
    """The rows that get series: all when they fit, else those that had one (stable between
    polls), then new ones in (topic, partition) order."""
    if len(rows) <= cap:
        return rows
    had = {(labels[3], labels[4]) for labels in before}
    ordered = sorted(rows, key=lambda row: ((row[0], str(row[1])) not in had, row[0], row[1]))
    return ordered[: max(cap, 0)]


def _record_columns(namespace: str, policy: str, group: str, rows: PartitionRows, cap: int) -> None:
    """`record_partitions` for columns: the same series and cap, but only series whose value
    changed are written (and only series that come or go are added or removed)."""
    key, layout, n = (namespace, policy), rows.layout, rows.layout.size
    with _SERIES_LOCK:
        before = _WRITTEN.get(key)
        if before is not None and before.group != group:  # groupId changed: new series
            before = None
            _remove_all(_PARTITION_SERIES.pop(key, set()))
        labels_before = _PARTITION_SERIES.get(key, set())
    had, old_lags, old_time = _previous_columns(before, labels_before, layout)
    series = _capped_series(had, cap)
    lags, time_lags = rows.lags, rows.time_lags
    same_time = (time_lags == old_time) | (np.isnan(time_lags) & np.isnan(old_time))
    changed = series & ((lags != old_lags) | ~same_time | ~had)
    gone_rows = np.flatnonzero(had & ~series)
    new_labels, old_labels = [], []
    spans = sorted((base, topic) for topic, (base, _count) in layout.spans.items())
    bases = np.array([b for b, _t in spans], np.int64)

    def labels_of(i: int) -> tuple[str, ...]:
        t = int(np.searchsorted(bases, i, side="right")) - 1
        return (namespace, policy, group, spans[t][1], str(i - spans[t][0]))

    lag_list, time_list = lags.tolist(), time_lags.tolist()
    for i in np.flatnonzero(changed).tolist():
        labels = labels_of(i)
        if not had[i]:
            new_labels.append(labels)
        if lag_list[i] >= 0:
            PARTITION_LAG.labels(*labels).set(lag_list[i])
        else:
            with contextlib.suppress(KeyError):
                PARTITION_LAG.remove(*labels)
        if not math.isnan(time_list[i]):
            PARTITION_TIME_LAG.labels(*labels).set(time_list[i])
        else:
            with contextlib.suppress(KeyError):
                PARTITION_TIME_LAG.remove(*labels)
    for i in gone_rows.tolist():
        labels = labels_of(i)
        old_labels.append(labels)
        for gauge in (PARTITION_LAG, PARTITION_TIME_LAG):
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
    with _SERIES_LOCK:
        current = _PARTITION_SERIES.setdefault(key, set())
        if before is None or before.layout != layout:
            # partitions gone from the policy lose their series
            kept = {labels_of(i) for i in np.flatnonzero(series & had).tolist()}
            for labels in current - kept - set(new_labels):
                for gauge in (PARTITION_LAG, PARTITION_TIME_LAG):
                    with contextlib.suppress(KeyError):
                        gauge.remove(*labels)
            current.intersection_update(kept)
        current.difference_update(old_labels)
        current.update(new_labels)
        _WRITTEN[key] = _Written(
            layout,
            series,
            np.where(series, lags, -2),
            np.where(series, time_lags, -1.0),
            group,
        )
    counts = np.bincount(rows.states, minlength=len(STATES))
    states = {STATES[s].value: int(c) for s, c in enumerate(counts) if c}
    for state, count in states.items():
        PARTITIONS_BY_STATE.labels(namespace, policy, group, state).set(count)
    _replace_series(
        _STATE_SERIES,
        key,
        {(namespace, policy, group, state) for state in states},
        (PARTITIONS_BY_STATE,),
        {PARTITIONS_BY_STATE: 4},
    )
    dropped = n - int(series.sum())
    if dropped > 0:
        PARTITION_SERIES_DROPPED.labels(namespace, policy).inc(dropped)


def _previous_columns(
    before: _Written | None, labels_before: set[tuple[str, ...]], layout: Layout
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(had a series, lag written, time lag written) per row of `layout`, carried over from the
    last write by topic and partition; -2 and -1.0 mean nothing was written, so any value
    differs."""
    n = layout.size
    had = np.zeros(n, bool)
    old_lags = np.full(n, -2, np.int64)  # -2: nothing written, so anything differs
    old_time = np.full(n, -1.0)
    if before is not None and before.layout == layout:
        had, old_lags, old_time = before.series, before.lags, before.time_lags
    elif before is not None:
        for topic, (base, count) in layout.spans.items():
            span = before.layout.spans.get(topic)
            if span is not None:
                keep = min(count, span[1])
                had[base : base + keep] = before.series[span[0] : span[0] + keep]
                old_lags[base : base + keep] = before.lags[span[0] : span[0] + keep]
                old_time[base : base + keep] = before.time_lags[span[0] : span[0] + keep]
    elif labels_before:  # series written from rows: kept, values rewritten
        for labels in labels_before:
            i = layout.index((labels[3], int(labels[4])))
            if i is not None:
                had[i] = True
    return had, old_lags, old_time


def _capped_series(had: np.ndarray, cap: int) -> np.ndarray:
    """Which rows have a series: all when they fit the cap, else those that had one (the first
    ones in order when the cap was lowered) plus new ones in order up to the cap."""
    n = had.size
    if n <= cap:
        series = np.ones(n, bool)
    else:
        series = had.copy()
        free = max(cap, 0) - int(series.sum())
        if free < 0:  # the cap was lowered: keep the first ones in order
            series[np.flatnonzero(series)[max(cap, 0) :]] = False
        elif free:
            series[np.flatnonzero(~series)[:free]] = True
    return series


def _remove_all(labels: Iterable[tuple[str, ...]]) -> None:
    for one in labels:
        for gauge in (PARTITION_LAG, PARTITION_TIME_LAG):
            with contextlib.suppress(KeyError):
                gauge.remove(*one)


def record_members(
    namespace: str, policy: str, group: str, members: Mapping[str, tuple[int, float]]
) -> None:
    """members: name -> (partitions, lag)."""
    series: set[tuple[str, ...]] = set()
    for member, (count, lag) in members.items():
        labels = (namespace, policy, group, member)
        MEMBER_PARTITIONS.labels(*labels).set(count)
        MEMBER_LAG.labels(*labels).set(lag)
        series.add(labels)
    _replace_series(
        _MEMBER_SERIES,
        (namespace, policy),
        series,
        (MEMBER_PARTITIONS, MEMBER_LAG),
        {MEMBER_PARTITIONS: 4, MEMBER_LAG: 4},
    )


def record_conditions(
    namespace: str, policy: str, conditions: Iterable[Mapping[str, object]]
) -> None:
    """The policy's current status conditions as gauges; a condition whose reason changed loses
    its old series, so `== 1` on any reason is the condition's state now."""
    series: set[tuple[str, ...]] = set()
    for condition in conditions:
        kind, reason = str(condition.get("type") or ""), str(condition.get("reason") or "")
        if not kind:
            continue
        labels = (namespace, policy, kind, reason)
        POLICY_CONDITION.labels(*labels).set(1 if condition.get("status") == "True" else 0)
        series.add(labels)
    _replace_series(
        _CONDITION_SERIES, (namespace, policy), series, (POLICY_CONDITION,), {POLICY_CONDITION: 4}
    )


def serve(port: int, address: str = "0.0.0.0") -> None:
    start_http_server(port, addr=address, registry=REGISTRY)


def forget(namespace: str, policy: str) -> None:
    """Drop every series of a deleted policy."""
    with _SERIES_LOCK:
        _WRITTEN.pop((namespace, policy), None)
    _replace_series(
        _PARTITION_SERIES,
        (namespace, policy),
        set(),
        (PARTITION_LAG, PARTITION_TIME_LAG),
        {PARTITION_LAG: 5, PARTITION_TIME_LAG: 5},
    )
    _replace_series(
        _STATE_SERIES, (namespace, policy), set(), (PARTITIONS_BY_STATE,), {PARTITIONS_BY_STATE: 4}
    )
    _replace_series(
        _MEMBER_SERIES,
        (namespace, policy),
        set(),
        (MEMBER_PARTITIONS, MEMBER_LAG),
        {MEMBER_PARTITIONS: 4, MEMBER_LAG: 4},
    )
    _replace_series(
        _CONDITION_SERIES, (namespace, policy), set(), (POLICY_CONDITION,), {POLICY_CONDITION: 4}
    )
    for gauge in (
        EPOCH,
        MAX_LOAD_RATIO,
        TOTAL_LAG,
        PLANS,
        MOVES,
        PARTITION_SERIES_DROPPED,
        STREAMS_TRIGGERS,
        STREAMS_EPOCH_BUMPS,
    ):
        for sample_labels in [
            labels
            for labels in list(getattr(gauge, "_metrics", {}))
            if labels[:2] == (namespace, policy)
        ]:
            with contextlib.suppress(KeyError):
                gauge.remove(*sample_labels)
    with contextlib.suppress(KeyError):
        LAST_SUCCESS.remove(namespace, policy)
