"""The consume loop both apply modes share: poll, deliver, commit, stop cleanly.

One thread does all of it, in that order, so at any moment every record the consumer has handed
out is either being delivered or already committed. That keeps the guarantees simple:

- at-least-once: an offset is committed only after its record was delivered (or dead-lettered or
  skipped as poison); a crash between delivery and commit delivers those records again. A
  consumer that is caught up (its poll returned less than a full batch) commits after every
  batch; one working through a backlog (full batches) commits at most every `commit_interval_ms`,
  and every consumer commits on revoke, hand-over and shutdown: a synchronous commit after every
  full batch cost as much CPU as fetching it (benchmarks.datapath), while the interval only
  bounds what a crash repeats;
- every commit carries `{"member": M, "epoch": E}` metadata, E being the plan epoch the batch was
  consumed under (the operator reads it back: assign mode's hand-over acknowledgement, and a
  trace of who committed what in either mode);
- shutdown (SIGTERM/SIGINT or `stop()`): the batch in hand is finished and committed, then the
  consumer closes; a static member sends no LeaveGroup, so a restart within the session timeout
  gets its partitions back without a rebalance;
- back-pressure (the application says "not now": 503/429/408, unreachable; delivery.py): the
  undelivered rest of the batch is *held* and offered again when the delay is up, as often as it
  takes. Meanwhile the loop goes on turning: it fetches nothing new (at most one batch is ever
  held), but it keeps polling in group mode with every partition paused (heartbeats, rebalances
  and `max.poll.interval.ms` are served, so membership and ownership stay), keeps following
  documents in assign mode, and keeps committing what was done. A partition that leaves this
  member meanwhile has its held records dropped (its new owner starts at the commit, which never
  passed them), and the health endpoints say "degraded" with the reason until a delivery lands.

The modes (`group_mode`, `assign_mode`) differ only in how partitions are obtained and released.
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from kafka_rebalance_common.wire import CommitMetadata, encode_commit_metadata

from kafka_rebalance_sidecar.backoff import Backoff
from kafka_rebalance_sidecar.delivery import (
    DEFAULT_MAX_BATCH_BYTES,
    FAILING_ALIKE,
    UNAVAILABLE,
    BackPressure,
    Deliverer,
    Stopped,
)
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.health import Health, SidecarMetrics
from kafka_rebalance_sidecar.records import Batch, Record

log = logging.getLogger("kafka_rebalance_sidecar.runner")

APPLY_MODES = ("group", "assign")
ENGINES = ("kafka-python", "librdkafka")
Released = Callable[[frozenset[tuple[str, int]]], None]


@dataclass(frozen=True)
class SidecarConfig:
    """What a sidecar needs besides its document and its delivery."""

    bootstrap_servers: str
    group: str
    topics: tuple[str, ...]
    member: str
    apply_mode: str = "group"
    session_timeout_ms: int = 10_000
    auto_offset_reset: str = "earliest"
    max_poll_records: int = 500
    poll_timeout_ms: int = 500
    # Rejoin when the received assignment is older than the document (KAFKA-12759), at most
    # this often; the interval doubles while the condition persists, up to the maximum.
    stale_rejoin_min_s: float = 5.0
    stale_rejoin_max_s: float = 120.0
    commit_timeout_ms: int = 10_000
    # While polls return full batches (a backlog), delivered offsets are committed at most this
    # often; a partial batch (caught up) is committed at once. 0: after every batch.
    commit_interval_ms: int = 200
    # Extra KafkaConsumer settings (security, client tuning); they win over the defaults.
    consumer_options: Mapping[str, Any] = field(default_factory=dict)
    # The Kafka client: kafka-python, or librdkafka (assign mode only; librdkafka_engine.py).
    engine: str = "kafka-python"
    # The bound of one HTTP body (delivery.pieces); the fetch is sized to it (fetch_options).
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES

    def __post_init__(self) -> None:
        if self.apply_mode not in APPLY_MODES:
            raise ValueError(f"apply mode {self.apply_mode!r}: expected one of {APPLY_MODES}")
        if not self.topics:
            raise ValueError("at least one topic is needed")
        if not self.member:
            raise ValueError("a member name is needed (--member or $POD_NAME)")
        if self.commit_interval_ms < 0:
            raise ValueError(f"--commit-interval-ms {self.commit_interval_ms}: must be >= 0")
        if self.max_batch_bytes < 1:
            raise ValueError(f"--max-batch-bytes {self.max_batch_bytes}: must be at least 1")
        if self.engine not in ENGINES:
            raise ValueError(f"--engine {self.engine!r}: expected one of {ENGINES}")
        if self.engine == "librdkafka" and self.apply_mode != "assign":
            raise ValueError(
                "--engine librdkafka works in assign mode only: group mode hosts the "
                "plan-following assignor, which runs inside kafka-python's group protocol"
            )


def commit_metadata(member: str, epoch: int, policy_uid: str = "") -> str:
    """`{"member": M, "epoch": E}` (and `"policy"` when the document named its incarnation), the
    text the operator's handoff check parses (wire.commit)."""
    return encode_commit_metadata(CommitMetadata(member, epoch, policy_uid))


# A ConsumerRecord's (offset, key, value, timestamp, headers) in one C call: five attribute
# lookups of a namedtuple cost more than the tuple this returns.
_RECORD_FIELDS = operator.itemgetter(3, 6, 7, 4, 8)
_new_record = object.__new__

# The wait after a turn that failed with a retriable Kafka error: a jittered window from this
# minimum, doubled per failed turn up to the maximum (backoff.py).
_KAFKA_BACKOFF_MIN_S = 0.25
_KAFKA_BACKOFF_MAX_S = 5.0
# kafka-python's own bound of one partition's share of a fetch (its default).
_PARTITION_FETCH_BYTES = 1024 * 1024


def fetch_options(max_batch_bytes: int) -> dict[str, int]:
    """Fetch no more than one HTTP body's worth: a body carries a record's bytes as base64 (4
    per 3) plus its fields, so a fetch of `max_batch_bytes` makes at most about 1.4 bodies,
    where kafka-python's default fetch (50 MiB) would make dozens of them in memory at once. A
    single record larger than the bound is still fetched (the broker returns the first record
    batch whatever its size, KIP-74) and delivered alone."""
    return {
        "fetch_max_bytes": max_batch_bytes,
        "max_partition_fetch_bytes": min(_PARTITION_FETCH_BYTES, max_batch_bytes),
    }


def to_batch(member: str, epoch: int, polled: Mapping[Any, list[Any]]) -> Batch:
    """kafka-python's poll result as a Batch: partitions in a stable order, offsets ascending.

    This runs for every record the sidecar consumes and was the sidecar's largest own cost in the
    consume loop (benchmarks.datapath, profiled), so it does per partition what it can (topic and
    partition are the same for all of a partition's records), takes a record's fields in one call,
    and builds each Record inline the way `records.record` does (no call per record), which is
    the same value the constructor makes."""
    records: list[Record] = []
    add = records.append
    fields = _RECORD_FIELDS
    new = _new_record
    for tp in sorted(polled):  # TopicPartition is a (topic, partition) tuple
        topic, partition = tp
        for r in polled[tp]:
            offset, k, v, timestamp, headers = fields(r)
            made = new(Record)
            made.__dict__.update(
                topic=topic,
                partition=partition,
                offset=offset,
                key=k,
                value=v,
                timestamp_ms=timestamp,
                headers=tuple((hk, hv if hv is not None else b"") for hk, hv in headers)
                if headers
                else (),
            )
            add(made)
    return Batch(member=member, epoch=epoch, records=tuple(records))


def next_offsets(polled: Mapping[Any, list[Any]]) -> dict[TopicPartition, int]:
    """Per partition, the offset after the last polled record (what to commit)."""
    return {
        TopicPartition(tp.topic, tp.partition): rs[-1].offset + 1 for tp, rs in polled.items() if rs
    }


def record_offsets(records: Iterable[Record]) -> dict[TopicPartition, int]:
    """Per partition, the offset after the last of `records` (records of a partition ascend)."""
    offsets: dict[TopicPartition, int] = {}
    for r in records:
        offsets[TopicPartition(r.topic, r.partition)] = r.offset + 1
    return offsets


def key(tp: Any) -> tuple[str, int]:
    return (tp.topic, tp.partition)


class Runner:
    """Shared machinery; subclasses implement `_open()` and `_step()`."""

    mode = "?"

    def __init__(
        self,
        config: SidecarConfig,
        tracker: AssignmentTracker,
        deliverer: Deliverer,
        *,
        metrics: SidecarMetrics | None = None,
        health: Health | None = None,
        stop: threading.Event | None = None,
        on_released: Released | None = None,
    ) -> None:
        self.config = config
        self.tracker = tracker
        self.deliverer = deliverer
        self.metrics = metrics or SidecarMetrics(config.group, config.member)
        self.health = health or Health()
        self.stop_event = stop or deliverer.stop
        # The deliverer's retries must notice a shutdown, and keep the liveness probe fed.
        deliverer.stop = self.stop_event
        deliverer.heartbeat = self.health.beat
        self.on_released = on_released
        self.consumer: KafkaConsumer | None = None
        self._lock = threading.Lock()
        self._pending: dict[TopicPartition, OffsetAndMetadata] = {}
        self._commit_due = 0.0  # monotonic time of the next interval commit
        # Back-pressure: the undelivered rest of a batch, and when to offer it again.
        self._held: Batch | None = None
        self._held_retry_at = 0.0
        self._kafka_failures = 0  # consecutive turns failed with a retriable Kafka error
        self._kafka_backoff = Backoff(_KAFKA_BACKOFF_MIN_S, _KAFKA_BACKOFF_MAX_S)

    # -- lifecycle -------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to finish its batch, commit and close (safe from any thread)."""
        self.stop_event.set()

    def base_consumer_options(self) -> dict[str, Any]:
        c = self.config
        return {
            "bootstrap_servers": c.bootstrap_servers.split(","),
            "group_id": c.group,
            "client_id": f"kafka-rebalance-sidecar-{c.member}",
            "enable_auto_commit": False,
            "auto_offset_reset": c.auto_offset_reset,
            "max_poll_records": c.max_poll_records,
            **fetch_options(c.max_batch_bytes),
        }

    def run(self) -> None:
        """Consume until stopped. Raises on fatal errors (the process should exit non-zero)."""
        self.consumer = self._open()
        log.info(
            "%s mode: member %s in group %s consuming %s (client %s)",
            self.mode,
            self.config.member,
            self.config.group,
            ",".join(self.config.topics),
            self.config.engine,
        )
        try:
            while not self.stop_event.is_set():
                self.health.beat()
                self.metrics.sync_rejected(self.tracker.rejected)
                try:
                    self._step()
                except Stopped:
                    log.info("stopped with a batch undelivered; it is not committed")
                    break
                except KafkaError as error:
                    if not error.retriable:
                        raise
                    self._survive(error)
                else:
                    self._kafka_failures = 0
        finally:
            self.health.stopping()
            held = self._held
            if held is not None and held.records:
                log.info(
                    "stopping while the application is not taking records: %d held records "
                    "are not committed and will be delivered again",
                    len(held.records),
                )
            self._close()

    def _survive(self, error: KafkaError) -> None:
        """A turn failed with a retriable Kafka error (the broker restarting or unreachable,
        the coordinator moving): the consumer keeps its assignment and its delivered offsets
        stay pending, so the next turn carries on where this one stopped. Waits with a
        jittered doubling backoff (up to `_KAFKA_BACKOFF_MAX_S`), so an outage costs neither
        the process nor a busy loop, and a fleet of sidecars that lost the same broker does
        not come back to it in lockstep."""
        self.metrics.kafka_errors.inc()
        self._kafka_failures += 1
        backoff = self._kafka_backoff.wait(self._kafka_failures)
        log.warning("Kafka not reachable (%s); trying again in %.1fs", error, backoff)
        self.stop_event.wait(backoff)

    def _close(self) -> None:
        consumer = self.consumer
        if consumer is None:
            return
        try:
            self.commit_pending()
        except Exception as error:
            log.warning("final commit failed (%s): the last batch may be delivered again", error)
        try:
            consumer.close(autocommit=False)
        except Exception as error:
            log.warning("consumer close failed: %s", error)
        log.info("closed")

    # -- subclass hooks --------------------------------------------------------------------

    def _open(self) -> KafkaConsumer:
        raise NotImplementedError

    def _step(self) -> None:
        raise NotImplementedError

    # -- delivery and commits --------------------------------------------------------------

    def incarnation(self) -> str:
        """The policy incarnation the consumed records belong to, for the commit metadata ("":
        not said; assign mode, whose commits are hand-over acknowledgements, says it)."""
        return ""

    def consume_once(self, epoch_now: Callable[[], int]) -> int:
        """Poll once, deliver what came, commit it. Returns the number of records delivered.

        The epoch is read after the poll: a rebalance inside poll() may have changed it, and the
        records returned belong to the assignment that poll ended with. While a batch is held
        (back-pressure) nothing is fetched: the held batch is offered again when its delay is
        up, and until then the turn only idles (`_idle`) and commits what is due."""
        assert self.consumer is not None
        held = self._held
        if held is not None:
            if not held.records:  # every held partition went away meanwhile
                self._release_hold()
            else:
                wait = self._held_retry_at - time.monotonic()
                if wait > 0:
                    self._idle(min(wait, self.config.poll_timeout_ms / 1000))
                    self.commit_if_due()
                    return 0
                return self._deliver(held, None)
        polled = self.consumer.poll(
            timeout_ms=self.config.poll_timeout_ms, max_records=self.config.max_poll_records
        )
        if not polled:
            self.commit_if_due()
            return 0
        epoch = epoch_now()
        batch = to_batch(self.config.member, epoch, polled)
        return self._deliver(batch, polled)

    def _deliver(self, batch: Batch, polled: Mapping[Any, list[Any]] | None) -> int:
        """Deliver `batch` (raises Stopped: nothing committed, delivered again later); on
        back-pressure keep what was done as pending and hold the rest."""
        try:
            self.deliverer.deliver(batch)
        except BackPressure as pressure:
            done = batch.records[: pressure.done]
            self._add_pending(batch.epoch, record_offsets(done))
            self._hold(Batch(batch.member, batch.epoch, batch.records[pressure.done :]), pressure)
            self.commit_if_due()
            return len(done)
        offsets = next_offsets(polled) if polled is not None else record_offsets(batch.records)
        self._add_pending(batch.epoch, offsets)
        if self._held is not None:
            self._release_hold()
        self.commit_if_due(caught_up=len(batch.records) < self.config.max_poll_records)
        return len(batch.records)

    def _add_pending(self, epoch: int, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        metadata = commit_metadata(self.config.member, epoch, self.incarnation())
        with self._lock:
            for tp, offset in offsets.items():
                self._pending[tp] = OffsetAndMetadata(offset, metadata, -1)

    # -- back-pressure ---------------------------------------------------------------------

    def _hold(self, rest: Batch, pressure: BackPressure) -> None:
        with self._lock:
            self._held = rest
        self._held_retry_at = time.monotonic() + pressure.delay_s
        if pressure.kind == UNAVAILABLE:
            self.metrics.backpressure.inc()
        elif pressure.kind == FAILING_ALIKE:
            self.metrics.failing_alike.inc()
        self.metrics.holding.set(1)
        self.health.degraded(
            f"application not taking records ({pressure.kind}): {pressure.reason}; holding "
            f"{len(rest.records)} records, try {pressure.tries}, next in {pressure.delay_s:.1f} s"
        )

    def _release_hold(self) -> None:
        """The held batch is delivered (or all its partitions went away): fetch again."""
        with self._lock:
            self._held = None
        self.metrics.holding.set(0)
        self.health.degraded(None)
        self._resume()

    def drop_held(self, partitions: Iterable[Any]) -> None:
        """Forget the held records of partitions this member no longer owns (any thread: the
        group listener calls it while the loop's thread is inside poll())."""
        gone = {key(tp) for tp in partitions}
        with self._lock:
            held = self._held
            if held is None or not gone:
                return
            kept = tuple(r for r in held.records if (r.topic, r.partition) not in gone)
            if len(kept) != len(held.records):
                log.info(
                    "dropped %d held records of partitions no longer owned",
                    len(held.records) - len(kept),
                )
                self._held = Batch(held.member, held.epoch, kept)

    def held_from(self, tp: Any) -> int | None:
        """The first held (undelivered) offset of `tp`, None when nothing of it is held."""
        with self._lock:
            held = self._held
        if held is None:
            return None
        return next((r.offset for r in held.records if (r.topic, r.partition) == key(tp)), None)

    def _idle(self, seconds: float) -> None:
        """Spend up to `seconds` without fetching, while a batch is held. Here: wait (assign
        mode has no group membership to keep; documents are looked at every turn)."""
        self.stop_event.wait(seconds)

    def _resume(self) -> None:
        """Undo what `_idle` did to the consumer (nothing here)."""

    def commit_if_due(self, caught_up: bool = True) -> None:
        """Commit what was delivered, at once when caught up, else when `commit_interval_ms`
        passed since the last try."""
        now = time.monotonic()
        if self._pending and (caught_up or now >= self._commit_due):
            self._commit_due = now + self.config.commit_interval_ms / 1000
            self.commit_pending()

    def commit_pending(self) -> bool:
        """Commit what was delivered; on failure keep it for the next try (or the revoke)."""
        assert self.consumer is not None
        with self._lock:
            offsets = dict(self._pending)
        if not offsets:
            return True
        started = time.monotonic()
        try:
            self.consumer.commit(offsets, timeout_ms=self.config.commit_timeout_ms)
        except Exception as error:
            self.metrics.commit_failures.inc()
            log.warning("commit of %d partitions failed: %s", len(offsets), error)
            return False
        self.metrics.commit_latency.observe(time.monotonic() - started)
        self.metrics.commits.inc()
        with self._lock:
            for tp, committed in offsets.items():
                if self._pending.get(tp) == committed:
                    del self._pending[tp]
        return True

    def take_pending(self, partitions: Iterable[Any]) -> dict[TopicPartition, OffsetAndMetadata]:
        """Remove and return the uncommitted offsets of `partitions`."""
        wanted = {TopicPartition(tp.topic, tp.partition) for tp in partitions}
        with self._lock:
            return {tp: self._pending.pop(tp) for tp in list(self._pending) if tp in wanted}

    def released(self, partitions: frozenset[tuple[str, int]]) -> None:
        """Partitions this member no longer owns: the application may drop their local state."""
        if partitions and self.on_released is not None:
            try:
                self.on_released(partitions)
            except Exception:
                log.exception("on_released callback failed")

    def report(self, planned: Iterable[tuple[str, int]] | None, epoch: int | None) -> None:
        assert self.consumer is not None
        owned = [key(tp) for tp in self.consumer.assignment()]
        self.metrics.owned_partitions.set(len(owned))
        planned_set = None if planned is None else frozenset(planned)
        self.metrics.planned_partitions.set(len(planned_set) if planned_set is not None else 0)
        self.health.update(running=True, planned=planned_set, owned=owned, epoch=epoch)
