"""Reading a group's offsets from Kafka. Blocking: call it from a worker thread, never from the
event loop.

Metadata, log offsets and committed offsets are read by `kafka_offsets` (one request per leader
broker, decoded by `offset_codecs` into arrays) on the admin client's connections. The admin
API path below is the fallback for brokers that speak none of `offset_codecs.VERSIONS`:
log offsets are read for every partition of the policy in one call per offset kind (kafka-python
sends one ListOffsets request per leader), so a poll's round trips do not grow with its topics.
kafka-python raises for the whole call when any one partition fails, so a failed call is retried
per topic and a failing topic is bisected down to the partitions that fail: a partition without a
leader degrades that partition (state unknown), not the poll. Only when cluster metadata itself
cannot be read is Kafka unreachable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic, OffsetSpec
from kafka.errors import TopicAlreadyExistsError

from kafka_rebalance_operator.kafka import (
    group_heartbeat,
    kip848,
    offset_codecs,
    share_group,
    streams_group,
    streams_standby_config,
    streams_trigger,
)
from kafka_rebalance_operator.kafka.kafka_offsets import OffsetReader
from kafka_rebalance_operator.lag import PartitionOffsets, PolicyOffsets
from kafka_rebalance_operator.partition_key import PartitionKey
from kafka_rebalance_operator.topic_pattern import TopicPattern

log = logging.getLogger(__name__)


class KafkaUnavailable(RuntimeError):
    """Cluster metadata could not be read: nothing about the group is known this poll."""


@dataclass
class Observation:
    topics: dict[str, int]
    missing_topics: list[str]
    # columnar (`PolicyOffsets`) from Kafka; a plain mapping from the admin API fallback and
    # test fakes, which the observe phase turns into a `PolicyOffsets`
    offsets: PolicyOffsets | Mapping[PartitionKey, PartitionOffsets]
    errors: list[str] = field(default_factory=list)
    group: dict[str, Any] | None = None  # describe_groups result for the group, when read
    # ("consumer", state) when ListGroups says the group is a KIP-848 group (which
    # describe_groups cannot describe); None otherwise or when unknown
    group_type: tuple[str, str] | None = None
    duration_s: float = 0.0
    assignor: str | None = None  # a KIP-848 group's server-side assignor (broker mode)
    # broker mode: why ConsumerGroupDescribe failed (None: the members are known, or there is
    # no such KIP-848 group); a plan is never published for members nobody could read
    membership_error: str | None = None


class TooManyPartitions(Exception):
    """The policy's topics hold more partitions than the operator takes per policy."""

    def __init__(self, counts: Mapping[str, int], limit: int) -> None:
        total = sum(counts.values())
        super().__init__(
            f"{total} partitions in {len(counts)} topics exceed --max-partitions-per-policy "
            f"{limit}: narrow spec.topics or spec.topicPattern, split the group into several "
            "policies, or raise the operator's limit (chart value maxPartitionsPerPolicy) and "
            "its memory with it"
        )
        self.total, self.limit = total, limit


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 200 else text[:197] + "..."


class KafkaObserver:
    """One admin client per policy connection (bootstrap servers + Secret fingerprint)."""

    def __init__(self, bootstrap_servers: str, security: Mapping[str, Any], timeout_s: float):
        self.timeout_ms = int(max(1.0, timeout_s) * 1000)
        self.bootstrap_servers, self.security = bootstrap_servers, dict(security)
        # broker mode's plan publisher and its admin client (the operator's own credentials),
        # made lazily; nudge members that could not leave, retried at the next nudge
        self.producer: KafkaProducer | None = None
        self.plan_admin: KafkaAdminClient | None = None
        self.left_behind: list[tuple[str, str]] = []
        self._offsets: OffsetReader | None = None  # offsets at wire speed, made at first read
        self._cluster_id: str | None = None  # the brokers' cluster id, once read
        try:
            self.admin = KafkaAdminClient(
                bootstrap_servers=bootstrap_servers.split(","),
                client_id="kafka-rebalance-operator",
                request_timeout_ms=self.timeout_ms,
                bootstrap_timeout_ms=self.timeout_ms,
                reconnect_backoff_max_ms=5000,
                **security,
            )
        except Exception as error:
            raise KafkaUnavailable(f"cannot reach {bootstrap_servers}: {_short(error)}") from error

    def close(self) -> None:
        for client in (self.producer, self.plan_admin, self.admin):
            if client is None:
                continue
            try:
                client.close()
            except Exception:  # closing a broken client must not fail a poll
                log.debug("closing a Kafka client failed", exc_info=True)
        self.producer = self.plan_admin = None

    def cluster_id(self) -> str:
        """The cluster id the brokers report (DescribeCluster, or Metadata v2+ on older
        brokers), read once per connection: which cluster the policy's servers reach, whatever
        they are called (`cluster_identity`). Raises KafkaUnavailable when it cannot be read."""
        if self._cluster_id is None:
            try:
                described = self.admin.describe_cluster()
            except Exception as error:
                raise KafkaUnavailable(f"reading the cluster id: {_short(error)}") from error
            found = described.get("cluster_id") if isinstance(described, dict) else None
            if not found:
                raise KafkaUnavailable("reading the cluster id: the brokers reported none")
            self._cluster_id = str(found)
        return self._cluster_id

    # -- broker mode (KIP-848 groups) ----------------------------------------------------------

    def describe_consumer_group(
        self, group_id: str
    ) -> tuple[kip848.ConsumerGroup | None, str | None]:
        """The KIP-848 group as its coordinator describes it (None: no such KIP-848 group), and
        why the describe failed (None: it did not; the group is then unknown, not absent)."""
        try:
            return kip848.describe(self.admin, group_id), None
        except Exception as error:
            log.debug("ConsumerGroupDescribe failed", exc_info=True)
            return None, f"describing group {group_id}: {_short(error)}"

    # -- streams groups (KIP-1071) ------------------------------------------------------------

    def describe_streams_group(self, group_id: str) -> streams_group.StreamsGroup | None:
        """The streams group as its coordinator describes it (None: no such streams group),
        with its `streams.num.standby.replicas` (None when it could not be read, logged);
        raises KafkaUnavailable when the describe fails."""
        try:
            group = streams_group.describe(self.admin, group_id)
        except Exception as error:
            raise KafkaUnavailable(
                f"describing streams group {group_id}: {_short(error)}"
            ) from error
        if group is None:
            return None
        try:
            replicas = streams_standby_config.read_standby_replicas(self.admin, group_id)
        except Exception as error:  # standbys are then left to the plug-in, not guessed
            log.warning("%s; standbys are left to the brokers' task assignor", _short(error))
            return group
        return dataclasses.replace(group, standby_replicas=replicas)

    def trigger_streams_group(self, group_id: str) -> str:
        """Make the streams group's coordinator recompute its target assignment
        (`streams_trigger.trigger`: the reserved tag toggled, the app's own tags kept; returns
        the config value set); raises streams_group.StreamsGroupError when the brokers refuse
        the config change, KafkaUnavailable when the config could not be read (nothing is then
        written), other writers kept changing it, or the call could not be made."""
        try:
            return streams_trigger.trigger(self.admin, group_id)
        except streams_group.StreamsGroupError:
            raise
        except Exception as error:
            raise KafkaUnavailable(
                f"triggering a recompute of streams group {group_id}: {_short(error)}"
            ) from error

    def set_heartbeat_interval(self, group_id: str, kind: str, interval_ms: int | None) -> None:
        """Set (or with None, remove) group `group_id`'s own heartbeat interval
        (`group_heartbeat`); raises group_heartbeat.HeartbeatConfigRefused with the brokers'
        reason, KafkaUnavailable when the call could not be made."""
        try:
            group_heartbeat.set_heartbeat_interval(self.admin, group_id, kind, interval_ms)
        except group_heartbeat.HeartbeatConfigRefused:
            raise
        except Exception as error:
            raise KafkaUnavailable(
                f"setting the heartbeat interval of group {group_id}: {_short(error)}"
            ) from error

    def clear_streams_trigger(self, group_id: str) -> bool:
        """Take the reserved trigger tag out of the streams group's tags, keeping the app's own
        (`streams_trigger.remove`); returns whether it was there. Raises KafkaUnavailable (or
        streams_group.StreamsGroupError for a refused write) when it could not."""
        try:
            return streams_trigger.remove(self.admin, group_id)
        except streams_group.StreamsGroupError:
            raise
        except Exception as error:
            raise KafkaUnavailable(
                f"removing the recompute trigger tag of streams group {group_id}: {_short(error)}"
            ) from error

    def describe_share_group(self, group_id: str) -> share_group.ShareGroup | None:
        """The share group as its coordinator describes it (None: no such share group);
        raises KafkaUnavailable when the describe fails."""
        try:
            return share_group.describe(self.admin, group_id)
        except Exception as error:
            raise KafkaUnavailable(f"describing share group {group_id}: {_short(error)}") from error

    def share_offsets(
        self, group_id: str, topics: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], share_group.SharePartitionOffset]:
        """The group's share-partition start offsets (and lag where reported) for `topics`;
        raises KafkaUnavailable when the call fails."""
        try:
            return share_group.start_offsets(self.admin, group_id, topics)
        except Exception as error:
            raise KafkaUnavailable(
                f"reading the share offsets of {group_id}: {_short(error)}"
            ) from error

    def trigger_share_group(self, group_id: str, topics: Sequence[str]) -> int:
        """Make the share group's coordinator recompute (`share_group.trigger`: a member
        joins and leaves); returns the group epoch of the join. Raises
        share_group.ShareGroupError when the coordinator refuses, KafkaUnavailable when the
        call could not be made."""
        try:
            return share_group.trigger(self.admin, group_id, topics)
        except share_group.ShareGroupError:
            raise
        except Exception as error:
            raise KafkaUnavailable(f"triggering share group {group_id}: {_short(error)}") from error

    def publish_plan(
        self,
        topic: str,
        group_id: str,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
        client: Mapping[str, Any],
        settle_s: float = 0.0,
    ) -> None:
        """Write the group's plan record (compacted topic, keyed by group id; `value` None
        writes a tombstone) with `headers` (its signature; a tombstone's incarnation and epoch:
        `plan_record`), creating the topic when it does not exist; raises KafkaUnavailable
        when the write is not confirmed.

        Invariant: the plan topic is written with the operator's own plan-topic credentials
        (`client`: kafka-python settings from --plan-client-config) to the plan cluster its
        `bootstrap_servers` names, never with the policy's Secret (no tenant needs Write on
        it) and never to the policy's bootstrap (a tenant's server never sees the operator's
        credentials). Without `bootstrap_servers` nothing is written.

        Returns once the write is acknowledged (acks=all), then waits `settle_s` more when
        the caller's trigger makes the coordinator recompute at once (docs/kip848.md, "How
        fast a plan is followed")."""
        settings = dict(client)
        servers = settings.pop("bootstrap_servers", None)
        if not servers:
            raise KafkaUnavailable(
                f"publishing the plan to {topic}: the plan client config names no "
                "bootstrap_servers (the operator writes plans only to its own plan cluster)"
            )
        try:
            if isinstance(servers, str):
                servers = servers.split(",")
            if self.plan_admin is None:
                self.plan_admin = KafkaAdminClient(
                    bootstrap_servers=servers,
                    client_id="kafka-rebalance-operator-plans",
                    request_timeout_ms=self.timeout_ms,
                    bootstrap_timeout_ms=self.timeout_ms,
                    **settings,
                )
            if self.producer is None:
                self.producer = KafkaProducer(
                    bootstrap_servers=servers,
                    client_id="kafka-rebalance-operator-plans",
                    acks="all",
                    request_timeout_ms=self.timeout_ms,
                    # the brokers' compression counts against max.message.bytes: ranges and
                    # bitmaps compress well (docs/kip848.md, "Record size")
                    compression_type="gzip",
                    **settings,
                )
            self._ensure_compacted(topic)
            sent = self.producer.send(
                topic, key=group_id.encode(), value=value, headers=list(headers) or None
            )
            sent.get(timeout=self.timeout_ms / 1000)
        except Exception as error:
            raise KafkaUnavailable(f"publishing the plan to {topic}: {_short(error)}") from error
        if value is not None and settle_s > 0:
            time.sleep(settle_s)

    def nudge(self, group_id: str) -> None:
        """Make the group's coordinator recompute its target assignment (kip848.nudge). A nudge
        member that could not leave (kip848.NudgeLeftBehind) is retried here first, at the next
        nudge, rather than left in the group until its session times out."""
        try:
            for group, member_id in list(self.left_behind):
                kip848.leave(self.admin, group, member_id)
                self.left_behind.remove((group, member_id))
            kip848.nudge(self.admin, group_id)
        except kip848.NudgeLeftBehind as error:
            if (error.group_id, error.member_id) not in self.left_behind:
                self.left_behind.append((error.group_id, error.member_id))
            raise KafkaUnavailable(f"nudging group {group_id}: {_short(error)}") from error
        except Exception as error:
            raise KafkaUnavailable(f"nudging group {group_id}: {_short(error)}") from error

    def _ensure_compacted(self, topic: str) -> None:
        admin = self.plan_admin
        assert admin is not None  # connected by the caller (`publish_plan`) just before
        if topic in set(admin.list_topics()):
            return
        brokers = len(admin.describe_cluster().get("brokers") or []) or 1
        compacted = NewTopic(topic, 1, min(3, brokers), topic_configs={"cleanup.policy": "compact"})
        with contextlib.suppress(TopicAlreadyExistsError):  # another operator made it meanwhile
            admin.create_topics([compacted])

    # -- topics ---------------------------------------------------------------------------------

    def topic_partitions(
        self, topics: Iterable[str] | None, pattern: TopicPattern | None
    ) -> tuple[dict[str, int], list[str]]:
        """Partition count per topic, and the named topics that do not exist."""
        try:
            if pattern is not None:
                described = self.admin.describe_topics(None)
            else:
                described = self.admin.describe_topics(list(topics or []))
        except Exception as error:
            raise KafkaUnavailable(f"cannot read cluster metadata: {_short(error)}") from error
        counts: dict[str, int] = {}
        missing: list[str] = []
        for entry in described:
            name = entry.get("name")
            if pattern is not None and (
                entry.get("is_internal") or name.startswith("__") or not pattern.fullmatch(name)
            ):
                continue
            if entry.get("error_code"):
                missing.append(name)
                continue
            counts[name] = len(entry.get("partitions") or [])
        return dict(sorted(counts.items())), sorted(missing)

    # -- offsets --------------------------------------------------------------------------------

    def _list_offsets(
        self, partitions: list[TopicPartition], spec: int, errors: list[str], deadline: float
    ) -> dict[TopicPartition, int]:
        """Offsets for `partitions`, bisecting on failure so only failing partitions are lost.

        Past `deadline` no more requests are made (the rest is unknown this poll): a topic
        whose every read times out must not cost one timeout per partition."""
        if not partitions:
            return {}
        if time.monotonic() > deadline:
            errors.extend(
                f"{tp.topic}-{tp.partition}: not read (poll deadline)" for tp in partitions
            )
            return {}
        try:
            result = self.admin.list_partition_offsets(
                {tp: spec for tp in partitions}, timeout_ms=self.timeout_ms
            )
            return {tp: value.offset for tp, value in result.items()}
        except Exception as error:
            if len(partitions) == 1:
                tp = partitions[0]
                errors.append(f"{tp.topic}-{tp.partition}: {_short(error)}")
                return {}
            middle = len(partitions) // 2
            found = self._list_offsets(partitions[:middle], spec, errors, deadline)
            found.update(self._list_offsets(partitions[middle:], spec, errors, deadline))
            return found

    def _offsets_of_all(
        self,
        by_topic: Mapping[str, list[TopicPartition]],
        spec: int,
        errors: list[str],
        deadline: float,
    ) -> dict[TopicPartition, int]:
        """Offsets for every partition of `by_topic`: one call, per topic only if it fails."""
        everything = [tp for partitions in by_topic.values() for tp in partitions]
        if len(by_topic) > 1 and time.monotonic() <= deadline:
            try:
                result = self.admin.list_partition_offsets(
                    dict.fromkeys(everything, spec), timeout_ms=self.timeout_ms
                )
                return {tp: value.offset for tp, value in result.items()}
            except Exception:
                log.debug("one ListOffsets call for every topic failed; per topic", exc_info=True)
        found: dict[TopicPartition, int] = {}
        for partitions in by_topic.values():
            found.update(self._list_offsets(partitions, spec, errors, deadline))
        return found

    def committed(
        self, group_id: str, errors: list[str]
    ) -> dict[PartitionKey, tuple[int, str | None]] | None:
        """Committed offset and metadata per partition; None when the read failed."""
        try:
            result = self.admin.list_group_offsets({group_id: None})
        except Exception as error:
            errors.append(f"committed offsets of {group_id}: {_short(error)}")
            return None
        committed: dict[PartitionKey, tuple[int, str | None]] = {}
        for tp, value in (result.get(group_id) or {}).items():
            if value.offset is not None and value.offset >= 0:
                committed[(tp.topic, tp.partition)] = (value.offset, value.metadata or None)
        return committed

    def describe_group(self, group_id: str) -> dict[str, Any] | None:
        try:
            return self.admin.describe_groups([group_id]).get(group_id)
        except Exception:
            log.debug("describe_groups failed", exc_info=True)
            return None

    def kip848_group(self, group_id: str) -> tuple[str, str] | None:
        """("consumer", state) if ListGroups (Kafka 4.0+, v5 type filter) lists the group as a
        KIP-848 group; None if not, or if the broker cannot say (older brokers)."""
        try:
            groups = self.admin.list_groups(types_filter=["consumer"])
        except Exception:
            log.debug("list_groups with a type filter failed", exc_info=True)
            return None
        for entry in groups:
            if entry.get("group_id") == group_id:
                return ("consumer", str(entry.get("group_state") or ""))
        return None

    def observe(
        self,
        group_id: str,
        topics: Iterable[str] | None,
        pattern: TopicPattern | None,
        describe: bool = False,
        kip848_group: bool = False,
        max_partitions: int = 0,
    ) -> Observation:
        """`kip848_group` (broker mode): describe the group as a KIP-848 group, falling back to
        DescribeGroups only to say that it is a classic one. `max_partitions` (0: none): raise
        TooManyPartitions when the topics hold more, before reading any offset."""
        started = time.monotonic()
        fast = self._read_fast(group_id, topics, pattern, max_partitions)
        offsets: PolicyOffsets | dict[PartitionKey, PartitionOffsets]
        if fast is not None:
            counts, missing, offsets, errors = fast
        else:
            counts, missing, offsets, errors = self._read_admin(
                group_id, topics, pattern, started, max_partitions
            )
        group, group_type, assignor = None, None, None
        described, membership_error = None, None
        if kip848_group:
            described, membership_error = self.describe_consumer_group(group_id)
        if described is not None:
            group = described.as_describe_groups()
            group_type, assignor = ("consumer", described.state), described.assignor
        elif describe or kip848_group:
            group = self.describe_group(group_id)
            if group is None or group.get("error") or group.get("group_state") == "Dead":
                # DescribeGroups does not describe KIP-848 groups (GROUP_ID_NOT_FOUND / Dead)
                group_type = self.kip848_group(group_id)
        return Observation(
            counts,
            missing,
            offsets,
            errors,
            group,
            group_type,
            duration_s=time.monotonic() - started,
            assignor=assignor,
            membership_error=membership_error,
        )

    def _read_fast(
        self,
        group_id: str,
        topics: Iterable[str] | None,
        pattern: TopicPattern | None,
        max_partitions: int = 0,
    ) -> tuple[dict[str, int], list[str], PolicyOffsets, list[str]] | None:
        """Metadata and offsets through `kafka_offsets` (None: the broker does not speak its
        message versions; the admin API is used instead)."""
        if self._offsets is None:
            self._offsets = OffsetReader(self.admin, self.timeout_ms)
        if not self._offsets.supported:
            return None
        try:
            described = self._offsets.metadata(None if pattern is not None else list(topics or []))
        except Exception as error:
            raise KafkaUnavailable(f"cannot read cluster metadata: {_short(error)}") from error
        selected: dict[str, offset_codecs.TopicMetadata] = {}
        missing: list[str] = []
        for entry in described:
            name = entry.name
            if pattern is not None and (
                entry.internal or name.startswith("__") or not pattern.fullmatch(name)
            ):
                continue
            if entry.error:
                missing.append(name)
                continue
            selected[name] = entry
        selected = dict(sorted(selected.items()))
        counts = {name: entry.partitions for name, entry in selected.items()}
        if max_partitions and sum(counts.values()) > max_partitions:
            raise TooManyPartitions(counts, max_partitions)  # before any offset is read
        read = self._offsets.read(group_id, selected)
        return counts, sorted(missing), read.offsets, read.errors

    def _read_admin(
        self,
        group_id: str,
        topics: Iterable[str] | None,
        pattern: TopicPattern | None,
        started: float,
        max_partitions: int = 0,
    ) -> tuple[dict[str, int], list[str], dict[PartitionKey, PartitionOffsets], list[str]]:
        """Metadata and offsets through kafka-python's admin API (brokers too old for
        `kafka_offsets`)."""
        counts, missing = self.topic_partitions(topics, pattern)
        if max_partitions and sum(counts.values()) > max_partitions:
            raise TooManyPartitions(counts, max_partitions)  # before any offset is read
        errors: list[str] = []
        committed = self.committed(group_id, errors)
        offsets: dict[PartitionKey, PartitionOffsets] = {}
        deadline = started + 3 * self.timeout_ms / 1000.0
        by_topic = {
            topic: [TopicPartition(topic, p) for p in range(count)]
            for topic, count in counts.items()
        }
        starts = self._offsets_of_all(by_topic, OffsetSpec.EARLIEST, errors, deadline)
        ends = self._offsets_of_all(by_topic, OffsetSpec.LATEST, errors, deadline)
        for topic, partitions in by_topic.items():
            for tp in partitions:
                key = (topic, tp.partition)
                commit = committed.get(key) if committed is not None else None
                start, end = starts.get(tp), ends.get(tp)
                offsets[key] = PartitionOffsets(
                    log_start=start,
                    log_end=end,
                    committed=commit[0] if commit else None,
                    metadata=commit[1] if commit else None,
                    committed_known=committed is not None,
                    error=None if start is not None and end is not None else "offsets unread",
                )
        return counts, missing, offsets, errors
