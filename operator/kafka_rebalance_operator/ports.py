"""Everything a poll does to the outside world, as one object passed in (`Ports`).

A poll reads a Secret and the policy's ConfigMaps, asks Kafka for offsets, writes ConfigMaps,
reads the clock, and reports to metrics and telemetry. It reaches each through the port given to
it, never through a module global, so the decision logic runs in unit tests with in-memory ports
(tests/operator_ports.py) and the same code runs in the operator with the real ones
(`adapters.real_ports`, the composition root). The Protocols say exactly what a poll needs of
each; this module holds no adapter.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kafka_rebalance_operator.kafka.cluster_identity import ClusterIds
from kafka_rebalance_operator.kube import kube_io

if TYPE_CHECKING:  # types only: the adapters that produce them import this module's Protocols
    from kafka_rebalance_operator.kafka.kafka_io import Observation
    from kafka_rebalance_operator.kafka.share_group import ShareGroup, SharePartitionOffset
    from kafka_rebalance_operator.kafka.streams_group import StreamsGroup
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
        settle_s: float = 0.0,
    ) -> None: ...
    def nudge(self, group_id: str) -> None: ...
    def cluster_id(self) -> str: ...
    def describe_streams_group(self, group_id: str) -> StreamsGroup | None: ...
    def trigger_streams_group(self, group_id: str) -> str: ...
    def describe_share_group(self, group_id: str) -> ShareGroup | None: ...
    def share_offsets(
        self, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> Mapping[tuple[str, int], SharePartitionOffset]: ...
    def trigger_share_group(self, group_id: str, topics: Sequence[str]) -> int: ...
    def clear_streams_trigger(self, group_id: str) -> bool: ...
    def set_heartbeat_interval(self, group_id: str, kind: str, interval_ms: int | None) -> None: ...
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
    def group_trigger(self, namespace: str, policy: str, group: str, kind: str) -> None: ...
    def group_epoch_bumps(
        self, namespace: str, policy: str, group: str, kind: str, bumps: int
    ) -> None: ...


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
