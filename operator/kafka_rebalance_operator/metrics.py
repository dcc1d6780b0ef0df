"""Prometheus metrics (`kafka_rebalance_*`, docs/naming.md), served on :9100/metrics.

Per-partition series are removed when a partition or member leaves a policy, so a long-running
operator does not export the lag of partitions that no longer exist. Their labels name the
partition only (its lag state is counted per policy in `kafka_rebalance_partitions`), so a series
keeps its identity while its lag state changes. Each policy exports at most `max_partition_series`
partitions: those that had a series at the last poll keep it, new ones take the free places in
(topic, partition) order, and the rest are counted in
`kafka_rebalance_partition_series_dropped_total` (one tenant's `topicPattern: .*` cannot flood
the operator's /metrics or crowd out another policy's series).

The per-partition series are not labelled children of a `Gauge` (about 1.3 KiB each): a poll
hands its partitions over as columns (`PartitionRows`), and the policy's series are published as
one immutable snapshot of arrays (`_Published`: which rows have a series, their lag and time lag)
that two collectors turn into samples when /metrics is scraped. The scrape runs on the metrics
server's thread while polls run in worker threads: a poll never changes a published snapshot, it
replaces the policy's reference to it, so a scrape reads one poll's series or the next's, whole.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from kafka_rebalance_operator.lag import STATES, Layout

REGISTRY = CollectorRegistry(auto_describe=True)
POLICY = ("namespace", "policy", "group")

# The default cap on per-partition series per policy (`--max-partition-series`).
DEFAULT_MAX_PARTITION_SERIES = 10_000

PARTITION_LABELS = (*POLICY, "topic", "partition")


class PartitionFamily:
    """A per-partition gauge family, made at scrape time from every policy's published
    snapshot (`_Published`): `lags` (-1: no sample) or `time_lags` (NaN: no sample)."""

    def __init__(self, name: str, documentation: str, column: Literal["lags", "time_lags"]):
        self.name, self.documentation, self.column = name, documentation, column

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation, labels=PARTITION_LABELS)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=PARTITION_LABELS)
        with _SERIES_LOCK:
            published = list(_PUBLISHED.values())
        for one in published:
            one.add_samples(family, self.column)
        yield family


PARTITION_LAG = PartitionFamily(
    "kafka_rebalance_partition_lag",
    "Offset lag of a partition at the last poll (records; unknown partitions carry the last "
    "known value)",
    "lags",
)
REGISTRY.register(PARTITION_LAG)
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
PARTITION_TIME_LAG = PartitionFamily(
    "kafka_rebalance_partition_time_lag_seconds",
    "Time lag of a partition, interpolated from the history of log-end offsets",
    "time_lags",
)
REGISTRY.register(PARTITION_TIME_LAG)
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
GROUP_TRIGGERS = Counter(
    "kafka_rebalance_group_triggers_total",
    "Streams and share groups: recompute triggers sent to make the coordinator follow a new plan",
    (*POLICY, "kind"),
    registry=REGISTRY,
)
GROUP_EPOCH_BUMPS = Histogram(
    "kafka_rebalance_group_epoch_bumps_per_plan",
    "Streams and share groups: group-epoch bumps from a plan's trigger to the group following it",
    (*POLICY, "kind"),
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
PLAN_PUBLISH_SKIPPED = Counter(
    "kafka_rebalance_plan_publish_skipped_total",
    "Broker mode: plans not published, by reason (membership_unknown: the group describe "
    "failed; no_members: the group has no member to name)",
    ("namespace", "policy", "reason"),
    registry=REGISTRY,
)
WEBHOOK_ADMISSIONS = Counter(
    "kafka_rebalance_webhook_admissions_total",
    "Pods the injection webhook answered, by outcome (injected; refused: a bad annotation or "
    "policy; admitted_unchanged: an internal error with failurePolicy Ignore, the pod admitted "
    "without the sidecar)",
    ("namespace", "policy", "outcome"),
    registry=REGISTRY,
)
WEBHOOK_PODS = Counter(
    "kafka_rebalance_webhook_pods_total",
    "Pods the injection webhook answered, one outcome each: mutated (the sidecar added), "
    "admitted (unchanged: it already had its sidecar), skipped (admitted without the sidecar: "
    "an internal error with failurePolicy Ignore), failed (refused); reason from a fixed set "
    "(docs/operator.md, Metrics)",
    ("outcome", "reason"),
    registry=REGISTRY,
)
WEBHOOK_BAD_ANNOTATIONS = Counter(
    "kafka_rebalance_webhook_bad_annotations_total",
    "Per-pod sidecar annotations the injection webhook ignored (a bad value: the default used, "
    "a SidecarAnnotationInvalid event posted), by annotation",
    ("annotation",),
    registry=REGISTRY,
)
WEBHOOK_CERT_EXPIRY = Gauge(
    "kafka_rebalance_webhook_certificate_expiry_timestamp_seconds",
    "When the injection webhook's serving certificate expires (Unix time; absent without the "
    "webhook)",
    registry=REGISTRY,
)
PLAN_KEY_RELOAD_ERRORS = Counter(
    "kafka_rebalance_plan_key_reload_errors_total",
    "Changed --plan-key-file contents that could not be used (the last good keys still sign)",
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

WATCHED_NAMESPACE = Gauge(
    "kafka_rebalance_watched_namespace",
    '1 for each namespace whose policies this operator reconciles; namespace="*" when it '
    "watches every namespace (count() gives how many)",
    ("namespace",),
    registry=REGISTRY,
)
UNWATCHED_POLICIES = Gauge(
    "kafka_rebalance_unwatched_policies",
    "Policies found at start in namespaces this operator does not watch (they get no status); "
    "NaN when it may not list policies across namespaces",
    registry=REGISTRY,
)

_SERIES_LOCK = threading.Lock()
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


@dataclass(frozen=True)
class _Published:
    """A policy's per-partition series as of its last poll, as a scrape reads them. Never
    changed once published (its arrays are read-only copies): the next poll publishes a new
    one. `rows`: the flat indices in `layout` of the partitions that have a series, ascending;
    `lags` (-1: no lag sample) and `time_lags` (NaN: no time-lag sample) are theirs, in order."""

    namespace: str
    policy: str
    group: str
    layout: Layout
    rows: np.ndarray
    lags: np.ndarray
    time_lags: np.ndarray

    def add_samples(self, family: GaugeMetricFamily, column: Literal["lags", "time_lags"]) -> None:
        """One sample per row with a value in `column`, in (topic, partition) order."""
        values = self.lags if column == "lags" else self.time_lags
        known = values >= 0 if column == "lags" else ~np.isnan(values)
        rows = self.rows[known]
        if not len(rows):
            return
        spans = self.layout.spans
        topics = list(spans)
        bases = np.array([spans[t][0] for t in topics], np.int64)
        which = np.searchsorted(bases, rows, side="right") - 1
        partitions = (rows - bases[which]).tolist()
        head = (self.namespace, self.policy, self.group)
        for t, p, value in zip(which.tolist(), partitions, values[known].tolist(), strict=True):
            family.add_metric((*head, topics[t], str(p)), float(value))


_PUBLISHED: dict[tuple[str, str], _Published] = {}


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
    """rows: (topic, partition, state, lag, time_lag_s), or `PartitionRows` (what a poll hands
    over); see the module docstring for the cap."""
    if isinstance(rows, PartitionRows):
        columns, present = rows, None
    else:
        columns, present = _columns_of(list(rows))
    key, layout = (namespace, policy), columns.layout
    with _SERIES_LOCK:
        before = _PUBLISHED.get(key)
    had = _had_series(before, group, layout)
    if present is not None:
        had &= present
    series = _capped_series(had, max_series, present)
    picked = np.flatnonzero(series)
    lags, time_lags = columns.lags[picked], columns.time_lags[picked]
    for array in (picked, lags, time_lags):
        array.flags.writeable = False
    with _SERIES_LOCK:
        _PUBLISHED[key] = _Published(namespace, policy, group, layout, picked, lags, time_lags)
    states = columns.states if present is None else columns.states[present]
    counts = np.bincount(states, minlength=len(STATES))
    by_state = {STATES[s].value: int(c) for s, c in enumerate(counts) if c}
    for state, count in by_state.items():
        PARTITIONS_BY_STATE.labels(namespace, policy, group, state).set(count)
    _replace_series(
        _STATE_SERIES,
        key,
        {(namespace, policy, group, state) for state in by_state},
        (PARTITIONS_BY_STATE,),
        {PARTITIONS_BY_STATE: 4},
    )
    dropped = (layout.size if present is None else int(present.sum())) - len(picked)
    if dropped > 0:
        PARTITION_SERIES_DROPPED.labels(namespace, policy).inc(dropped)


def _columns_of(
    rows: list[tuple[str, int, str, int | None, float | None]],
) -> tuple[PartitionRows, np.ndarray]:
    """Rows as columns over a layout spanning each topic's partitions up to the highest one
    given, and which of its rows were given."""
    counts: dict[str, int] = {}
    for topic, partition, *_rest in rows:
        counts[topic] = max(counts.get(topic, 0), partition + 1)
    layout = Layout.of(counts)
    n, codes = layout.size, {state.value: code for code, state in enumerate(STATES)}
    present, states = np.zeros(n, bool), np.zeros(n, np.int8)
    lags, time_lags = np.full(n, -1, np.int64), np.full(n, np.nan)
    for topic, partition, state, lag, time_lag in rows:
        i = layout.spans[topic][0] + partition
        present[i], states[i] = True, codes[state]
        lags[i] = -1 if lag is None else lag
        time_lags[i] = np.nan if time_lag is None else time_lag
    return PartitionRows(layout, states, lags, time_lags), present


def _had_series(before: _Published | None, group: str, layout: Layout) -> np.ndarray:
    """Which rows of `layout` had a series at the last poll, carried over by topic and
    partition (none when the groupId changed: its series are new ones)."""
    had = np.zeros(layout.size, bool)
    if before is None or before.group != group or not len(before.rows):
        return had
    if before.layout == layout:
        had[before.rows] = True
        return had
    old = before.layout.spans
    topics = list(old)
    bases = np.array([old[t][0] for t in topics], np.int64)
    which = np.searchsorted(bases, before.rows, side="right") - 1
    partitions = before.rows - bases[which]
    spans = [layout.spans.get(t, (0, 0)) for t in topics]
    new_base = np.array([base for base, _count in spans], np.int64)[which]
    keep = partitions < np.array([count for _base, count in spans], np.int64)[which]
    had[new_base[keep] + partitions[keep]] = True
    return had


def _capped_series(had: np.ndarray, cap: int, present: np.ndarray | None = None) -> np.ndarray:
    """Which rows have a series: all (present) rows when they fit the cap, else those that had
    one (the first ones in order when the cap was lowered) plus new ones in order up to the
    cap."""
    candidates = np.ones(had.size, bool) if present is None else present
    if int(candidates.sum()) <= cap:
        return candidates.copy()
    series = had.copy()
    free = max(cap, 0) - int(series.sum())
    if free < 0:  # the cap was lowered: keep the first ones in order
        series[np.flatnonzero(series)[max(cap, 0) :]] = False
    elif free:
        series[np.flatnonzero(candidates & ~series)[:free]] = True
    return series


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


def record_watched_namespaces(watched: Iterable[str] | None) -> None:
    """One series per watched namespace (None: every namespace, as namespace="*")."""
    WATCHED_NAMESPACE.clear()
    for namespace in ["*"] if watched is None else sorted(set(watched)):
        WATCHED_NAMESPACE.labels(namespace).set(1)


def record_unwatched_policies(count: int | None) -> None:
    """How many policies lie outside the watched namespaces; None (unknown): NaN."""
    if count is None:
        UNWATCHED_POLICIES.set(math.nan)
    else:
        UNWATCHED_POLICIES.set(count)


def serve(port: int, address: str = "0.0.0.0") -> None:
    start_http_server(port, addr=address, registry=REGISTRY)


def forget(namespace: str, policy: str) -> None:
    """Drop every series of a deleted policy."""
    with _SERIES_LOCK:
        _PUBLISHED.pop((namespace, policy), None)
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
        GROUP_TRIGGERS,
        GROUP_EPOCH_BUMPS,
        PLAN_PUBLISH_SKIPPED,
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
