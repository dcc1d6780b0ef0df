"""In-memory ports for whole polls without a broker or an API server (kafka_rebalance_operator.
ports): ConfigMaps in a dict, Secrets in a dict, a Kafka cluster as a few dicts of offsets, a
clock the test moves, and sinks that keep what they are given.

They implement the same Protocols as the real ports; the integration tests
(tests/integration/test_operator_poll.py, test_operator_k8s.py) prove the real ones.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_common.wire import plan_record
from kafka_rebalance_operator import reconcile
from kafka_rebalance_operator.kafka.cluster_identity import Rival
from kafka_rebalance_operator.kafka.group_heartbeat import HeartbeatConfigRefused
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable, Observation, TooManyPartitions
from kafka_rebalance_operator.kafka.share_group import ShareGroupError, SharePartitionOffset
from kafka_rebalance_operator.kafka.streams_group import StreamsGroupError
from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.lag import PartitionOffsets
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.partition_key import PartitionKey
from kafka_rebalance_operator.ports import Ports, SecretMissing, StoreError, WriteConflict
from kafka_rebalance_operator.settings import OperatorSettings
from kafka_rebalance_operator.topic_pattern import TopicPattern


class MemoryConfigMaps:
    """ConfigMaps with resourceVersions, refusing stale conditional writes as the API server
    does (WriteConflict)."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.writes: list[str] = []  # names upserted, "-name" for deletes
        self.refuse: StoreError | None = None  # raised by every call while set
        self.version = 0  # the last resourceVersion given out
        self.before_write: Any = None  # called with the name before each write (a racing writer)

    def list(self, namespace: str, policy: str) -> list[dict[str, Any]]:
        if self.refuse is not None:
            raise self.refuse
        return [copy.deepcopy(v) for v in self.items.values()]

    def put(self, body: Mapping[str, Any]) -> str:
        """Store `body` unconditionally (another writer, or a person): its new version."""
        self.version += 1
        stored = copy.deepcopy(dict(body))
        stored["metadata"] = {**stored["metadata"], "resourceVersion": str(self.version)}
        self.items[body["metadata"]["name"]] = stored
        return str(self.version)

    def upsert(self, body: Mapping[str, Any]) -> str:
        if self.refuse is not None:
            raise self.refuse
        name = body["metadata"]["name"]
        if self.before_write is not None:
            self.before_write(name)
        expected = body["metadata"].get("resourceVersion")
        existing = self.items.get(name)
        if expected:
            if existing is None or existing["metadata"].get("resourceVersion") != expected:
                raise WriteConflict(body["metadata"]["namespace"], name)
        elif existing is not None:
            raise WriteConflict(body["metadata"]["namespace"], name)
        self.writes.append(name)
        return self.put(body)

    def delete(self, namespace: str, name: str, resource_version: str = "") -> None:
        if self.refuse is not None:
            raise self.refuse
        if self.before_write is not None:
            self.before_write(name)
        existing = self.items.get(name)
        if (
            resource_version
            and existing is not None
            and existing["metadata"].get("resourceVersion") != resource_version
        ):
            raise WriteConflict(namespace, name)
        self.writes.append(f"-{name}")
        self.items.pop(name, None)

    def documents(self) -> dict[str, dict[str, Any]]:
        """member -> its assignment document."""
        return {
            doc["member"]: doc
            for doc in (json.loads(v["data"]["assignment.json"]) for v in self.items.values())
        }


class MemoryStatus:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    def patch(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.patches.append(dict(status))


# broker mode: the operator's plan cluster (without one, broker-mode policies are Stalled)
PLAN_CLIENT = {"bootstrap_servers": "plans:9092"}


class MemorySecrets:
    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, str]] = {}

    def read(self, namespace: str, name: str) -> dict[str, str]:
        try:
            return dict(self.items[(namespace, name)])
        except KeyError:
            raise SecretMissing(f"Secret {namespace}/{name}: HTTP 404") from None


@dataclass
class MemoryKafka:
    """One cluster: partition counts, log ends, commits ((offset, metadata)), the group as
    describe_groups shows it, and whether it answers at all."""

    topics: dict[str, int] = field(default_factory=dict)
    log_end: dict[PartitionKey, int] = field(default_factory=dict)
    committed: dict[PartitionKey, tuple[int, str]] = field(default_factory=dict)
    group: dict[str, Any] | None = None
    group_type: tuple[str, str] | None = None
    assignor: str | None = None  # a KIP-848 group's server-side assignor (broker mode)
    reachable: bool = True
    connections: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    # broker mode: (topic, group, record or None for a tombstone), each record's signature
    # (None: unsigned) and all its headers
    published: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    signatures: list[bytes | None] = field(default_factory=list)
    headers: list[dict[str, bytes]] = field(default_factory=list)
    settles: list[float] = field(default_factory=list)  # each publish's wait after the write
    # the id DescribeCluster reports (None: it cannot be read)
    cluster_id: str | None = "memory-cluster"
    # broker mode: why the group describe fails (None: it succeeds)
    membership_error: str | None = None
    nudges: list[str] = field(default_factory=list)
    # streams groups: group id -> the group StreamsGroupDescribe shows; the groups triggered;
    # the error a refused trigger names (None: the brokers accept it)
    streams_groups: dict[str, Any] = field(default_factory=dict)
    streams_triggers: list[str] = field(default_factory=list)
    streams_cleared: list[str] = field(default_factory=list)  # clear_streams_trigger calls
    # set_heartbeat_interval calls (group, kind, ms), and the brokers' refusal to answer with
    heartbeat_set: list[tuple[str, str, int | None]] = field(default_factory=list)
    heartbeat_refusal: str | None = None
    refuse_trigger: str | None = None
    # share groups: group id -> the group ShareGroupDescribe shows; each share-partition's
    # lag as DescribeShareGroupOffsets reports it; the groups triggered
    share_groups: dict[str, Any] = field(default_factory=dict)
    share_lag: dict[PartitionKey, int] = field(default_factory=dict)
    share_triggers: list[str] = field(default_factory=list)
    fail_trigger: str | None = None  # the trigger could not be made (KafkaUnavailable)

    def __call__(
        self,
        bootstrap_servers: str,
        security: Mapping[str, Any],
        timeout_s: float,
        key: Any = None,
    ) -> MemoryObserver:
        if not self.reachable:
            raise KafkaUnavailable(f"cannot reach {bootstrap_servers}: connection refused")
        self.connections.append((bootstrap_servers, dict(security)))
        return MemoryObserver(self)

    def lag(self, topic: str, lags: Mapping[int, int]) -> None:
        """Set each partition's lag (log end minus a commit at 0)."""
        for partition, value in lags.items():
            self.log_end[(topic, partition)] = value
            self.committed.setdefault((topic, partition), (0, ""))


class MemoryObserver:
    def __init__(self, cluster: MemoryKafka) -> None:
        self.cluster = cluster
        self.closed = False
        self.known_cluster_id: str | None = None

    def observe(
        self,
        group_id: str,
        topics: Iterable[str] | None,
        pattern: TopicPattern | None,
        describe: bool = False,
        kip848_group: bool = False,
        max_partitions: int = 0,
    ) -> Observation:
        cluster = self.cluster
        if not cluster.reachable:
            raise KafkaUnavailable("cannot read cluster metadata: connection refused")
        if pattern is not None:
            wanted = [t for t in cluster.topics if pattern.fullmatch(t)]
        else:
            wanted = list(topics or [])
        counts = {t: cluster.topics[t] for t in sorted(wanted) if t in cluster.topics}
        missing = sorted(t for t in wanted if t not in cluster.topics)
        if max_partitions and sum(counts.values()) > max_partitions:
            raise TooManyPartitions(counts, max_partitions)
        offsets = {}
        for topic, count in counts.items():
            for p in range(count):
                commit = cluster.committed.get((topic, p))
                offsets[(topic, p)] = PartitionOffsets(
                    log_start=0,
                    log_end=cluster.log_end.get((topic, p), 0),
                    committed=commit[0] if commit else None,
                    metadata=commit[1] if commit else None,
                )
        return Observation(
            counts,
            missing,
            offsets,
            group=copy.deepcopy(cluster.group) if describe else None,
            group_type=cluster.group_type if describe else None,
            assignor=(
                cluster.assignor if kip848_group and cluster.membership_error is None else None
            ),
            membership_error=cluster.membership_error if kip848_group else None,
        )

    def publish_plan(
        self,
        topic: str,
        group_id: str,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]] = (),
        client: Mapping[str, Any] | None = None,
        settle_s: float = 0.0,
    ) -> None:
        self.cluster.settles.append(settle_s)
        if not self.cluster.reachable:
            raise KafkaUnavailable(f"publishing the plan to {topic}: connection refused")
        self.cluster.published.append(
            (topic, group_id, None if value is None else json.loads(value))
        )
        named = dict(headers)
        self.cluster.signatures.append(named.get(plan_record.SIGNATURE_HEADER))
        self.cluster.headers.append(named)

    def nudge(self, group_id: str) -> None:
        self.cluster.nudges.append(group_id)

    def cluster_id(self) -> str:
        """Read once per connection, as `KafkaObserver.cluster_id` does."""
        if self.known_cluster_id is None:
            if not self.cluster.reachable or self.cluster.cluster_id is None:
                raise KafkaUnavailable("reading the cluster id: connection refused")
            self.known_cluster_id = self.cluster.cluster_id
        return self.known_cluster_id

    def describe_streams_group(self, group_id: str) -> Any:
        if not self.cluster.reachable:
            raise KafkaUnavailable(f"describing streams group {group_id}: connection refused")
        return self.cluster.streams_groups.get(group_id)

    def trigger_streams_group(self, group_id: str) -> str:
        if self.cluster.refuse_trigger is not None:
            raise StreamsGroupError(self.cluster.refuse_trigger)
        if self.cluster.fail_trigger is not None:
            raise KafkaUnavailable(self.cluster.fail_trigger)
        self.cluster.streams_triggers.append(group_id)
        return "kafka-rebalance-trigger"

    def describe_share_group(self, group_id: str) -> Any:
        if not self.cluster.reachable:
            raise KafkaUnavailable(f"describing share group {group_id}: connection refused")
        return self.cluster.share_groups.get(group_id)

    def share_offsets(self, group_id: str, topics: Mapping[str, Sequence[int]]) -> dict[Any, Any]:
        return {
            (t, p): SharePartitionOffset(t, p, 0, 0, self.cluster.share_lag.get((t, p), 0))
            for t, parts in topics.items()
            for p in parts
        }

    def trigger_share_group(self, group_id: str, topics: Sequence[str]) -> int:
        if self.cluster.refuse_trigger is not None:
            raise ShareGroupError(self.cluster.refuse_trigger)
        self.cluster.share_triggers.append(group_id)
        return 0

    def clear_streams_trigger(self, group_id: str) -> bool:
        if not self.cluster.reachable:
            raise KafkaUnavailable(f"removing the trigger tag of {group_id}: connection refused")
        self.cluster.streams_cleared.append(group_id)
        return True

    def set_heartbeat_interval(self, group_id: str, kind: str, interval_ms: int | None) -> None:
        if not self.cluster.reachable:
            raise KafkaUnavailable(f"setting the heartbeat of {group_id}: connection refused")
        refusal = self.cluster.heartbeat_refusal
        if refusal is not None:
            raise HeartbeatConfigRefused(refusal)
        self.cluster.heartbeat_set.append((group_id, kind, interval_ms))

    def close(self) -> None:
        self.closed = True


class ManualClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.wall = start
        self.mono = 1000.0

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


class RecordingMetrics:
    """Keeps the last value per series name, and counts of the counters."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.plans = 0
        self.moves = 0
        self.unread = 0
        self.polls = 0
        self.successes = 0
        self.state: dict[str, Any] = {}
        self.group_triggers: list[str] = []  # the kind of each trigger sent
        self.group_bumps: list[tuple[str, int]] = []  # (kind, bumps) per followed plan
        self.skipped: list[str] = []  # plan_publish_skipped reasons, in order

    def poll_finished(self, namespace: str, policy: str, seconds: float) -> None:
        self.polls += 1

    def poll_failed(self, namespace: str, policy: str, reason: str) -> None:
        self.failures.append(reason)

    def partitions_unread(self, namespace: str, policy: str, count: int) -> None:
        self.unread += count

    def plan_applied(self, namespace: str, policy: str, group: str, moves: int) -> None:
        self.plans += 1
        self.moves += moves

    def policy_state(self, namespace: str, policy: str, group: str, **state: Any) -> None:
        state["partitions"] = list(state["partitions"])
        self.state = state

    def poll_succeeded(self, namespace: str, policy: str, now: float) -> None:
        self.successes += 1

    def group_trigger(self, namespace: str, policy: str, group: str, kind: str) -> None:
        self.group_triggers.append(kind)

    def plan_publish_skipped(self, namespace: str, policy: str, reason: str) -> None:
        self.skipped.append(reason)

    def group_epoch_bumps(
        self, namespace: str, policy: str, group: str, kind: str, bumps: int
    ) -> None:
        self.group_bumps.append((kind, bumps))


class ListTelemetry:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    @property
    def enabled(self) -> bool:
        return True

    def emit(self, rows: list[dict[str, Any]]) -> None:
        self.rows.extend(rows)


def memory_ports(kafka: MemoryKafka | None = None) -> Ports:
    return Ports(
        configmaps=MemoryConfigMaps(),
        status=MemoryStatus(),
        secrets=MemorySecrets(),
        kafka=kafka if kafka is not None else MemoryKafka(),
        clock=ManualClock(),
        metrics=RecordingMetrics(),
        telemetry=ListTelemetry(),
    )


def pods(count: int, app: str = "c") -> list[PodSummary]:
    return [PodSummary(f"{app}-{i}", {"app": app}, "Running", True) for i in range(count)]


class Policy:
    """Drives polls the way the kopf handler does: status patches merged into the status, the
    policy's memory kept across polls, Events collected."""

    def __init__(
        self,
        spec: dict[str, Any],
        members: list[PodSummary],
        ports: Ports,
        settings: OperatorSettings | None = None,
        generation: int = 1,
    ) -> None:
        self.spec, self.pods, self.ports = spec, members, ports
        self.settings = settings or OperatorSettings(kafka_timeout_s=3, plan_client=PLAN_CLIENT)
        self.status: dict[str, Any] = {}
        self.memory = PolicyMemory()
        self.events: list[tuple[str, str, str]] = []
        self.generation = generation
        self.rivals: tuple[Rival, ...] = ()  # older policies for the group (handlers._rivals)
        self.namespace, self.name = "ns", "pol"
        self.status_writes_fail = False  # as with an admission policy refusing /status
        self.uid = "uid-1"  # the incarnation: a policy deleted and created again gets a new one

    def poll(self) -> reconcile.PollOutcome:
        ctx = reconcile.PolicyContext(
            self.namespace,
            self.name,
            self.uid,
            self.generation,
            self.spec,
            self.status,
            self.rivals,
        )
        outcome = reconcile.poll(ctx, self.pods, self.memory, self.ports, self.settings)
        if self.status_writes_fail:
            self.events += outcome.events
            return outcome
        for key, value in outcome.status.items():
            if value is None:
                self.status.pop(key, None)
            else:
                self.status[key] = value
        self.events += outcome.events
        return outcome

    def condition(self, kind: str) -> dict[str, Any]:
        return next(c for c in self.status["conditions"] if c["type"] == kind)
