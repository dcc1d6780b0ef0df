"""Everything a poll does to the outside world, as one object passed in (`Ports`).

A poll reads a Secret and the policy's ConfigMaps, asks Kafka for offsets, writes ConfigMaps,
reads the clock, and reports to metrics and telemetry. It reaches each through the port given to
it, never through a module global, so the decision logic runs in unit tests with in-memory ports
(tests/operator_ports.py) and the same code runs in the operator with the real ones built here
(`real_ports`). The Protocols say exactly what a poll needs of each.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3
from kubernetes import client

from kafka_rebalance_operator import kube_io, names
from kafka_rebalance_operator import metrics as prometheus
from kafka_rebalance_operator.clients import SharedObservers
from kafka_rebalance_operator.cluster_identity import ClusterIds
from kafka_rebalance_operator.kafka_io import KafkaObserver, Observation
from kafka_rebalance_operator.streams_group import StreamsGroup
from kafka_rebalance_operator.topic_pattern import TopicPattern

# (topic, partition, lag state, lag, time lag in seconds)
PartitionRow = tuple[str, int, str, int | None, float | None]


# The Secret a policy names does not exist or may not be read (the message names it).
SecretMissing = kube_io.SecretMissing
# A ConfigMap the policy would write exists and is not the policy's (the message names it).
ForeignConfigMap = kube_io.ForeignConfigMap
# A conditional ConfigMap write found it changed since the poll read it (409 Conflict).
WriteConflict = kube_io.WriteConflict


class StoreError(RuntimeError):
    """A call the API server refused (HTTP status and reason, for the condition), or one that
    never reached it (status None: the server is unreachable)."""

    def __init__(self, status: int | None, reason: str | None) -> None:
        super().__init__(f"HTTP {status} {reason}" if status is not None else str(reason))
        self.status, self.reason = status, reason


@contextlib.contextmanager
def api_errors() -> Iterator[None]:
    """API calls raise StoreError, never the client's own exceptions: a refusal keeps its HTTP
    status, and a call that could not reach the server (connection refused, timed out) says so.
    A poll then fails in its own conditions and is retried at the next tick, rather than ending
    its timer with an unexpected exception (kopf backs such a handler off for a minute)."""
    try:
        yield
    except kube_io.ApiException as error:
        raise StoreError(error.status, _reason(error)) from None
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise StoreError(None, f"API server unreachable: {_short(error)}") from None


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 300 else text[:297] + "..."


class ConfigMapStore(Protocol):
    """The policy's per-pod ConfigMaps (raises StoreError; `upsert` raises ForeignConfigMap
    rather than overwrite a ConfigMap the policy does not own). Writes are conditional: a body
    with `metadata.resourceVersion`, or a delete given one, applies only to that version and
    raises WriteConflict if the ConfigMap changed since; `upsert` returns the new version."""

    def list(self, namespace: str, policy: str) -> list[dict[str, Any]]: ...
    def upsert(self, body: Mapping[str, Any]) -> str: ...
    def delete(self, namespace: str, name: str, resource_version: str = "") -> None: ...


class Leadership(Protocol):
    """Whether this process may write now, and the leadership term its documents carry.

    `may_write` is asked right before every write: with leader election it turns False, by this
    process's own monotonic clock, before any standby may take the Lease over
    (`leadership.LeaderElector`). `term` is the Lease's transition count while leading, None
    without leader election (documents then carry no term)."""

    def may_write(self) -> bool: ...

    @property
    def term(self) -> int | None: ...


class AlwaysLeader:
    """Without leader election: the only replica, always allowed to write, no term."""

    def may_write(self) -> bool:
        return True

    @property
    def term(self) -> int | None:
        return None


class StatusWriter(Protocol):
    """Merge-patches a policy's status (None removes a field; raises StoreError)."""

    def patch(self, namespace: str, name: str, status: Mapping[str, Any]) -> None: ...


class SecretReader(Protocol):
    """A Secret's decoded text values (raises SecretMissing, or StoreError when the API server
    fails or cannot be reached)."""

    def read(self, namespace: str, name: str) -> dict[str, str]: ...


class Observer(Protocol):
    """One Kafka connection for one policy (raises kafka_io.KafkaUnavailable, and
    kafka_io.TooManyPartitions over `max_partitions` before reading offsets); broker mode also
    publishes plans through it and nudges the group's coordinator (`kip848`)."""

    def observe(
        self,
        group_id: str,
        topics: Iterable[str] | None,
        pattern: TopicPattern | None,
        describe: bool = False,
        kip848_group: bool = False,
        max_partitions: int = 0,
    ) -> Observation: ...
    def publish_plan(
        self,
        topic: str,
        group_id: str,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        client: Mapping[str, Any],
    ) -> None: ...
    def nudge(self, group_id: str) -> None: ...
    def cluster_id(self) -> str: ...
    def describe_streams_group(self, group_id: str) -> StreamsGroup | None: ...
    def trigger_streams_group(self, group_id: str) -> str: ...
    def close(self) -> None: ...


class ObserverFactory(Protocol):
    """Connects to `bootstrap_servers` with kafka-python `security` settings. Callers that pass
    the same `key` (servers and a fingerprint of the credentials) may be given one shared
    client (`clients.SharedObservers`); closing what they were given lets go of it."""

    def __call__(
        self,
        bootstrap_servers: str,
        security: Mapping[str, Any],
        timeout_s: float,
        key: Hashable | None = None,
    ) -> Observer: ...


class Clock(Protocol):
    def now(self) -> float: ...  # wall time (status timestamps, rates)
    def monotonic(self) -> float: ...  # durations


class MetricsSink(Protocol):
    """What a poll reports to Prometheus (metrics.py names the series)."""

    def poll_finished(self, namespace: str, policy: str, seconds: float) -> None: ...
    def poll_failed(self, namespace: str, policy: str, reason: str) -> None: ...
    def partitions_unread(self, namespace: str, policy: str, count: int) -> None: ...
    def plan_applied(self, namespace: str, policy: str, group: str, moves: int) -> None: ...
    def policy_state(
        self,
        namespace: str,
        policy: str,
        group: str,
        *,
        partitions: Iterable[PartitionRow],
        members: Mapping[str, tuple[int, float]],
        epoch: int,
        total_lag: int,
        max_load_ratio: float | None,
    ) -> None: ...
    def poll_succeeded(self, namespace: str, policy: str, now: float) -> None: ...
    def plan_publish_skipped(self, namespace: str, policy: str, reason: str) -> None: ...
    def streams_trigger(self, namespace: str, policy: str, group: str) -> None: ...
    def streams_epoch_bumps(self, namespace: str, policy: str, group: str, bumps: int) -> None: ...


class TelemetrySink(Protocol):
    """Telemetry rows (telemetry.py); `enabled` False spares building rows nobody reads."""

    @property
    def enabled(self) -> bool: ...
    def emit(self, rows: Sequence[dict[str, Any]]) -> None: ...


@dataclass(frozen=True)
class Ports:
    configmaps: ConfigMapStore
    status: StatusWriter
    secrets: SecretReader
    kafka: ObserverFactory
    clock: Clock
    metrics: MetricsSink
    telemetry: TelemetrySink
    leadership: Leadership = field(default_factory=AlwaysLeader)
    # every policy's cluster id as its polls learn it (one policy per group of a cluster)
    clusters: ClusterIds = field(default_factory=ClusterIds)


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class PrometheusMetrics:
    """The operator's Prometheus series (metrics.REGISTRY, served on :9100/metrics), at most
    `max_partition_series` per-partition series per policy."""

    def __init__(self, max_partition_series: int = prometheus.DEFAULT_MAX_PARTITION_SERIES):
        self.max_partition_series = max_partition_series

    def poll_finished(self, namespace: str, policy: str, seconds: float) -> None:
        prometheus.POLL_SECONDS.labels(namespace, policy).observe(seconds)

    def poll_failed(self, namespace: str, policy: str, reason: str) -> None:
        prometheus.ERRORS.labels(namespace, policy, reason).inc()

    def partitions_unread(self, namespace: str, policy: str, count: int) -> None:
        prometheus.PARTITION_ERRORS.labels(namespace, policy).inc(count)

    def plan_applied(self, namespace: str, policy: str, group: str, moves: int) -> None:
        prometheus.PLANS.labels(namespace, policy, group).inc()
        prometheus.MOVES.labels(namespace, policy, group).inc(moves)

    def policy_state(
        self,
        namespace: str,
        policy: str,
        group: str,
        *,
        partitions: Iterable[PartitionRow],
        members: Mapping[str, tuple[int, float]],
        epoch: int,
        total_lag: int,
        max_load_ratio: float | None,
    ) -> None:
        prometheus.record_partitions(
            namespace, policy, group, partitions, self.max_partition_series
        )
        prometheus.record_members(namespace, policy, group, members)
        prometheus.EPOCH.labels(namespace, policy, group).set(epoch)
        prometheus.TOTAL_LAG.labels(namespace, policy, group).set(total_lag)
        if max_load_ratio is not None:
            prometheus.MAX_LOAD_RATIO.labels(namespace, policy, group).set(max_load_ratio)

    def poll_succeeded(self, namespace: str, policy: str, now: float) -> None:
        prometheus.LAST_SUCCESS.labels(namespace, policy).set(now)

    def plan_publish_skipped(self, namespace: str, policy: str, reason: str) -> None:
        prometheus.PLAN_PUBLISH_SKIPPED.labels(namespace, policy, reason).inc()

    def streams_trigger(self, namespace: str, policy: str, group: str) -> None:
        prometheus.STREAMS_TRIGGERS.labels(namespace, policy, group).inc()

    def streams_epoch_bumps(self, namespace: str, policy: str, group: str, bumps: int) -> None:
        prometheus.STREAMS_EPOCH_BUMPS.labels(namespace, policy, group).observe(bumps)


class KubeConfigMaps:
    """ConfigMaps through the API server, with the client it is given."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def list(self, namespace: str, policy: str) -> list[dict[str, Any]]:
        with api_errors():
            return kube_io.list_configmaps(namespace, policy, api_client=self.api_client)

    def upsert(self, body: Mapping[str, Any]) -> str:
        with api_errors():
            return kube_io.upsert_configmap(body, api_client=self.api_client)

    def delete(self, namespace: str, name: str, resource_version: str = "") -> None:
        with api_errors():
            kube_io.delete_configmap(namespace, name, resource_version, api_client=self.api_client)


class KubeStatus:
    """The policy's status subresource through the API server. Written here rather than by
    kopf's patch: kopf ends a timer whose status patch is refused (an admission policy on
    /status, an oversized object), and the policy would then never be polled again."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def patch(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        with api_errors():
            client.CustomObjectsApi(self.api_client).patch_namespaced_custom_object_status(
                names.GROUP,
                names.VERSION,
                namespace,
                names.PLURAL,
                name,
                {"status": dict(status)},
                _content_type="application/merge-patch+json",
                _request_timeout=kube_io.REQUEST_TIMEOUT_S,
            )


def _reason(error: Any) -> str:
    """The API server's message (an admission policy's, say), else the HTTP reason."""
    try:
        return str(json.loads(error.body).get("message") or error.reason)
    except (TypeError, ValueError, AttributeError):
        return str(error.reason)


class KubeSecrets:
    """Secrets through the API server, with the client it is given."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def read(self, namespace: str, name: str) -> dict[str, str]:
        with api_errors():
            return kube_io.read_secret(namespace, name, api_client=self.api_client)


def real_ports(
    api_client: Any,
    telemetry: TelemetrySink,
    max_partition_series: int = prometheus.DEFAULT_MAX_PARTITION_SERIES,
    leadership: Leadership | None = None,
) -> Ports:
    """The operator's ports: the API server through `api_client`, Kafka through kafka-python
    (one client per cluster and credentials, shared by the policies that use them), the system
    clock, the Prometheus registry, the configured telemetry sinks, and the leader elector
    (None: no leader election)."""
    return Ports(
        configmaps=KubeConfigMaps(api_client),
        status=KubeStatus(api_client),
        secrets=KubeSecrets(api_client),
        kafka=SharedObservers(KafkaObserver),
        clock=SystemClock(),
        metrics=PrometheusMetrics(max_partition_series),
        telemetry=telemetry,
        leadership=leadership if leadership is not None else AlwaysLeader(),
    )
