"""`assign` apply mode: the document's partitions by `assign()`, and the hand-over acknowledgement.

Kafka does not fence manually assigned consumers, so the operator never lets two members hold a
partition at one epoch: it revokes first (epoch E lists the partition under `revoking`, or stops
listing it) and grants it to the new owner only in a later epoch, after the old owner acknowledged.
The acknowledgement is a commit of the partition with metadata `{"member": M, "epoch": E}`.

On a new document, between polls (so the batch in hand is already delivered and committed):
1. note the position of every partition to give up (revoking or no longer listed);
2. `assign()` the document's partitions: fetching of the others stops, kept partitions keep their
   position, granted ones start from their committed offset;
3. commit the noted positions with the new epoch's metadata - also when nothing was consumed,
   because this commit is what the operator waits for. A partition listed as revoking that this
   process never held (it restarted in between) is acknowledged at its committed offset (or, if
   none, where auto_offset_reset would start), which hands over exactly what was committed.
A failed acknowledgement is retried every loop until it succeeds or a newer document arrives.

A partition is started only when the current document lists it: granting happens at the epoch
that grants, never earlier.

Documents are followed while the application pushes back too (runner.py, back-pressure): a
partition given up while some of its records are held is acknowledged at its first held offset,
not at the fetch position, and its held records are dropped, so the new owner starts exactly
where delivery stopped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from kafka_rebalance_sidecar.document import AssignmentDocument
from kafka_rebalance_sidecar.runner import Runner, commit_metadata, key

log = logging.getLogger("kafka_rebalance_sidecar.assign")

UNKNOWN_RECHECK_S = 10.0


class AssignRunner(Runner):
    mode = "assign"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.applied: AssignmentDocument | None = None
        self._unacked: dict[TopicPartition, int] = {}  # revoked partition -> offset to commit
        self._unacked_epoch = -1
        self._known: dict[str, set[int]] = {}
        self._planned: list[tuple[str, int]] | None = None
        self._unknown: set[tuple[str, int]] = set()
        self._unknown_checked = 0.0

    def _open(self) -> Any:
        options = self.base_consumer_options()
        options.update(self.config.consumer_options)
        if self.config.engine == "librdkafka":
            from kafka_rebalance_sidecar.librdkafka_engine import LibrdkafkaConsumer

            return LibrdkafkaConsumer(options)
        return KafkaConsumer(**options)

    def epoch(self) -> int:
        return self.applied.epoch if self.applied is not None else -1

    def incarnation(self) -> str:
        return self.applied.policy_uid if self.applied is not None else ""

    def _existing(self, document: AssignmentDocument) -> list[TopicPartition]:
        """The document's partitions that exist. A partition of a topic not in --topics is
        ignored; one the metadata does not show (yet) is remembered in `_unknown` and looked for
        again every few seconds, so a topic created after the plan is picked up."""
        assert self.consumer is not None
        wanted = []
        unknown = set()
        for topic, partition in sorted(document.owned()):
            if topic not in self.config.topics:
                log.warning(
                    "document lists %s-%d of a topic not in --topics: ignored", topic, partition
                )
                continue
            if partition not in self._known.get(topic, ()):
                self._known[topic] = set(self.consumer.partitions_for_topic(topic) or ())
            if partition not in self._known[topic]:
                unknown.add((topic, partition))
                continue
            wanted.append(TopicPartition(topic, partition))
        if unknown and unknown != self._unknown:
            log.warning(
                "document lists partitions the cluster does not have (yet): %s",
                ",".join(f"{t}-{p}" for t, p in sorted(unknown)),
            )
        self._unknown = unknown
        self._unknown_checked = time.monotonic()
        return wanted

    def _start_offset(self, tp: TopicPartition) -> int:
        """Where a partition this process does not hold stands: its commit, else the reset."""
        assert self.consumer is not None
        committed = self.consumer.committed(tp)
        if committed is not None:
            return int(committed)
        if self.config.auto_offset_reset == "latest":
            return int(self.consumer.end_offsets([tp])[tp])
        return int(self.consumer.beginning_offsets([tp])[tp])

    def apply(self, document: AssignmentDocument) -> None:
        assert self.consumer is not None
        held = set(self.consumer.assignment())
        target = self._existing(document)
        giving_up = held - set(target)
        revoking = {TopicPartition(t, p) for t, p in document.revoking_set()}
        positions: dict[TopicPartition, int] = {}
        for tp in giving_up:
            undelivered = self.held_from(tp)  # fetched, not delivered: not handed over
            positions[tp] = undelivered if undelivered is not None else self.consumer.position(tp)
        self.consumer.assign(target)  # stops fetching what is given up
        self.take_pending(giving_up)  # the acknowledgement commits at least as far
        self.drop_held(giving_up)
        for tp in revoking - giving_up:
            try:
                positions[tp] = self._start_offset(tp)
            except Exception as error:
                log.warning("cannot read the offset of %s-%d to acknowledge: %s", *key(tp), error)
        self.applied = document
        self._planned = [key(tp) for tp in target]
        self._unacked = positions
        self._unacked_epoch = document.epoch
        self.metrics.rebalances.inc()
        self.metrics.document_epoch.set(document.epoch)
        log.info(
            "applied epoch %d: %d partitions (+%d), giving up %d",
            document.epoch,
            len(target),
            len(set(target) - held),
            len(positions),
        )
        self.acknowledge()
        self.released(frozenset(key(tp) for tp in giving_up))

    def _grow(self) -> None:
        """Start partitions of the applied document that did not exist when it was applied."""
        assert self.consumer is not None and self.applied is not None
        if isinstance(self.consumer, KafkaConsumer):
            self.consumer._cluster.request_update()  # partitions added since: seen next time
        target = self._existing(self.applied)
        held = set(self.consumer.assignment())
        if set(target) - held:
            self.consumer.assign(sorted(held | set(target)))
            self._planned = [key(tp) for tp in target]
            log.info("started %d partitions that now exist", len(set(target) - held))

    def acknowledge(self) -> None:
        """Commit the positions of given-up partitions with the document's epoch."""
        if not self._unacked:
            return
        assert self.consumer is not None
        metadata = commit_metadata(self.config.member, self._unacked_epoch, self.incarnation())
        offsets = {tp: OffsetAndMetadata(o, metadata, -1) for tp, o in self._unacked.items()}
        try:
            self.consumer.commit(offsets, timeout_ms=self.config.commit_timeout_ms)
        except Exception as error:
            self.metrics.commit_failures.inc()
            log.warning("hand-over acknowledgement failed (%s); retrying", error)
            return
        self.metrics.commits.inc()
        self.metrics.acknowledgements.inc(len(offsets))
        log.info(
            "acknowledged hand-over at epoch %d: %s",
            self._unacked_epoch,
            ",".join(f"{tp.topic}-{tp.partition}@{o}" for tp, o in sorted(self._unacked.items())),
        )
        self._unacked = {}

    def _step(self) -> None:
        document = self.tracker.current
        if document is not None and (
            self.applied is None
            or document.epoch != self.applied.epoch
            or document.policy_uid != self.applied.policy_uid
            or document != self.applied  # the same epoch re-written by a newer operator leader
        ):
            try:
                self.apply(document)
            except Exception as error:  # a broker call failed: nothing changed, try again
                log.warning("applying epoch %d failed (%s); retrying", document.epoch, error)
                self.stop_event.wait(1.0)
                return
        elif self._unknown and time.monotonic() - self._unknown_checked > UNKNOWN_RECHECK_S:
            self._grow()
        self.acknowledge()
        assert self.consumer is not None
        if self.consumer.assignment():
            self.consume_once(self.epoch)
        else:
            self.stop_event.wait(self.config.poll_timeout_ms / 1000)
        self.report(self._planned, self.epoch() if self.applied is not None else None)
