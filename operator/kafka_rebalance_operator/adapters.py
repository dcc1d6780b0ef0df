"""The composition root: the real adapters behind the poll's ports (`ports.Ports`), wired in
`real_ports`. The API server through the kubernetes client (ConfigMaps, status, Secrets), Kafka
through kafka-python (`kafka_io`, shared per cluster and credentials by `clients`), the system
clock, and the Prometheus registry. Nothing in the poll imports this module; the command that
starts the operator does.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import urllib3
from kubernetes import client

from kafka_rebalance_operator import metrics as prometheus
from kafka_rebalance_operator import names
from kafka_rebalance_operator.kafka.clients import SharedObservers
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver
from kafka_rebalance_operator.kube import kube_io
from kafka_rebalance_operator.ports import (
    AlwaysLeader,
    Leadership,
    PartitionRow,
    Ports,
    StoreError,
    TelemetrySink,
)


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

    def group_trigger(self, namespace: str, policy: str, group: str, kind: str) -> None:
        prometheus.GROUP_TRIGGERS.labels(namespace, policy, group, kind).inc()

    def group_epoch_bumps(
        self, namespace: str, policy: str, group: str, kind: str, bumps: int
    ) -> None:
        prometheus.GROUP_EPOCH_BUMPS.labels(namespace, policy, group, kind).observe(bumps)


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
