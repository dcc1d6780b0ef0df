"""`group` apply mode: subscribe with static membership and the plan-following assignor.

The broker runs the group; the leader's assignor (sidecar.assignor) composes the assignment from
every member's claim. This module makes sure a new plan actually reaches the broker:

- a new document epoch changes this member's claim, so the sidecar asks for a rejoin (from its own
  thread, between polls: kafka-python has no public enforce_rebalance, the private
  `_coordinator.request_rejoin()` is the hook) and the changed metadata makes the broker rebalance;
- a static member restarting into a Stable group gets its old assignment back without any
  rebalance (KAFKA-12759), composed from an older epoch than its document: the sidecar sees the
  composed epoch in the assignment's user_data and rejoins, rate-limited with a growing interval
  while the condition lasts;
- a rejoin asked for while a JoinGroup is already in flight changes nothing: that round goes on
  with the claim of before the new document, and can be composed from the new epoch through the
  other members' claims. The leader says in each member's assignment which claim epoch it saw
  for that member; one older than the document is treated like an old composed epoch (a CI run
  once left two members on the fallback for good this way);
- revoked partitions (cooperative: only those moving away) have their delivered offsets committed
  before they go; lost partitions (the member was fenced or expired) are dropped without a commit,
  because the broker already gave them to someone else. Local state is released only for
  partitions actually gone (KIP-54), never for the whole assignment on every rebalance;
- while the application pushes back (runner.py, back-pressure), the loop keeps calling poll()
  with every assigned partition paused: heartbeats go on, `max.poll.interval.ms` never expires,
  rebalances are joined and new documents acted on, and nothing new is fetched. Held records of
  partitions revoked or lost meanwhile are dropped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
from kafka_rebalance_common.wire import AssignmentDocument

from kafka_rebalance_sidecar.assignor import PlanFollowingAssignor
from kafka_rebalance_sidecar.runner import Runner, key

log = logging.getLogger("kafka_rebalance_sidecar.group")


# Kafka's own default heartbeat interval (`heartbeat.interval.ms`).
HEARTBEAT_INTERVAL_MAX_MS = 3_000


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """A fifth of the session timeout, at most Kafka's default 3 s and at least 0.5 s.

    Members of a classic group learn of a rebalance only from a heartbeat's answer (or a commit's),
    so a follower waits up to one interval before it rejoins; the leader can compose the new
    assignment only once every member has rejoined. A long session timeout (45 s, for restarts
    without a rebalance) must therefore not stretch the interval with it: a fifth of 45 s would
    be 9 s per follower before a plan takes effect. A fifth still gives five heartbeats per
    session for short timeouts; the floor keeps a tiny timeout from heartbeating in a loop."""
    return max(500, min(session_timeout_ms // 5, HEARTBEAT_INTERVAL_MAX_MS))


def new_document_reason(
    document: AssignmentDocument, joined_epoch: int | None, joined: AssignmentDocument | None
) -> str | None:
    """Why the claim this member joined with no longer says what its document says (None: it
    still does): a new epoch, the same epoch re-written by a newer operator leader
    (leaderTerm), or the document of another policy incarnation (the claim names the
    incarnation, and leaders ignore claims of another one), whatever its epoch."""
    if document.epoch != joined_epoch:
        return f"new document epoch {document.epoch}"
    if joined is None:
        return None
    if document.policy_uid != joined.policy_uid:
        return f"new policy incarnation {document.policy_uid or '(none)'} at epoch {document.epoch}"
    if document != joined:
        return f"document epoch {document.epoch} re-written"
    return None


def stale_reason(document_epoch: int, composed: int | None, claim_seen: int | None) -> str | None:
    """Why the last assignment does not follow this member's document, or None when it does
    (or when the leader's user_data does not say: another assignor, an older sidecar)."""
    if composed is not None and composed < document_epoch:
        return f"assignment composed from epoch {composed}, document is at {document_epoch}"
    if claim_seen is not None and claim_seen < document_epoch:
        seen = "no claim" if claim_seen < 0 else f"the claim of epoch {claim_seen}"
        return f"the leader saw {seen} from this member, document is at {document_epoch}"
    return None


class _Listener(AsyncConsumerRebalanceListener):
    """Runs on kafka-python's IO thread while the runner's thread is inside poll()/close(), so
    commits here must be the coordinator's awaitable variant (a blocking commit would deadlock)."""

    def __init__(self, runner: GroupRunner) -> None:
        self.runner = runner

    async def on_partitions_revoked(self, revoked: set[Any]) -> None:
        runner = self.runner
        offsets = runner.take_pending(revoked)
        if offsets and runner.consumer is not None:
            started = time.monotonic()
            try:
                coordinator = runner.consumer._coordinator
                await coordinator._commit_offsets_sync_async(
                    offsets, timeout_ms=runner.config.commit_timeout_ms
                )
                runner.metrics.commit_latency.observe(time.monotonic() - started)
                runner.metrics.commits.inc()
            except Exception as error:
                runner.metrics.commit_failures.inc()
                log.warning(
                    "commit on revoke of %d partitions failed (%s): they may be delivered again",
                    len(offsets),
                    error,
                )
        runner.drop_held(revoked)
        gone = frozenset(key(tp) for tp in revoked)
        log.info("revoked %d partitions: %s", len(gone), _names(gone))
        if runner.assignor.cooperative:
            # KIP-429: what is revoked here is exactly what moves away (or everything, on close).
            runner.release(gone)

    async def on_partitions_assigned(self, assigned: set[Any]) -> None:
        # Eager revokes everything first; only the difference is actually gone (KIP-54).
        self.runner.owned_changed()

    async def on_partitions_lost(self, lost: set[Any]) -> None:
        runner = self.runner
        dropped = runner.take_pending(lost)
        runner.drop_held(lost)
        gone = frozenset(key(tp) for tp in lost)
        log.warning(
            "lost %d partitions (membership lost; %d uncommitted offsets dropped): %s",
            len(gone),
            len(dropped),
            _names(gone),
        )
        # Someone else may have processed them meanwhile: state kept for them is stale even if
        # the next assignment hands them back.
        runner.release(gone)


def _names(partitions: frozenset[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(partitions)) or "-"


class GroupRunner(Runner):
    mode = "group"

    def __init__(self, *args: Any, cooperative: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.assignor = PlanFollowingAssignor(self.tracker, cooperative=cooperative)
        self._seen_generation: int | None = None
        self._owned_before: frozenset[tuple[str, int]] = frozenset()
        self._joined_epoch: int | None = None
        self._joined: AssignmentDocument | None = None  # the document the last join claimed
        self._stale_next = 0.0
        self._stale_interval = self.config.stale_rejoin_min_s

    def _open(self) -> KafkaConsumer:
        c = self.config
        options = self.base_consumer_options()
        options.update(
            group_instance_id=c.member,
            session_timeout_ms=c.session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms(c.session_timeout_ms),
            partition_assignment_strategy=[self.assignor],
        )
        options.update(c.consumer_options)
        consumer = KafkaConsumer(**options)
        self.assignor.owned_source = consumer.assignment
        current = self.tracker.current
        self._joined_epoch = current.epoch if current is not None else None
        self._joined = current
        consumer.subscribe(topics=list(c.topics), listener=_Listener(self))
        return consumer

    def release(self, gone: frozenset[tuple[str, int]]) -> None:
        """Partitions known to be gone (IO thread): tell the application once."""
        gone = gone & self._owned_before
        self._owned_before = self._owned_before - gone
        self.released(gone)

    def owned_changed(self) -> None:
        """After the assignment changed (IO thread): release what is actually gone."""
        assert self.consumer is not None
        now_owned = frozenset(key(tp) for tp in self.consumer.assignment())
        gone = self._owned_before - now_owned
        self._owned_before = now_owned
        self.released(gone)

    def _idle(self, seconds: float) -> None:
        """Poll with every assigned partition paused: the group is served, nothing fetched. A
        partition assigned during this poll may return records before it is paused: they are
        sought back, so they come again when fetching resumes."""
        consumer = self.consumer
        assert consumer is not None
        unpaused = set(consumer.assignment()) - set(consumer.paused())
        if unpaused:
            consumer.pause(*sorted(unpaused))
        polled = consumer.poll(
            timeout_ms=max(1, int(seconds * 1000)), max_records=self.config.max_poll_records
        )
        for tp, records in polled.items():
            if records:
                consumer.seek(tp, records[0].offset)

    def _resume(self) -> None:
        assert self.consumer is not None
        paused = self.consumer.paused()
        if paused:
            self.consumer.resume(*sorted(paused))

    def _note_rebalance(self) -> None:
        generation = self.assignor.last_generation
        if generation is None or generation == self._seen_generation:
            return
        self._seen_generation = generation
        self.metrics.rebalances.inc()
        self.metrics.generation.set(generation)
        assert self.consumer is not None
        log.info(
            "rebalance: generation %s, composed from epoch %s, %d partitions: %s",
            generation,
            self.assignor.last_composed_epoch,
            len(self.consumer.assignment()),
            _names(frozenset(key(tp) for tp in self.consumer.assignment())),
        )

    def epoch(self) -> int:
        """The plan epoch records are consumed under: the epoch the group's assignment was
        composed from (what the leader acted on), or this member's own document's before any
        assignment told it."""
        composed = self.assignor.last_composed_epoch
        if composed is not None:
            return composed
        current = self.tracker.current
        return current.epoch if current is not None else -1

    def request_rejoin(self, why: str) -> None:
        assert self.consumer is not None
        log.info("requesting a rejoin: %s", why)
        self.metrics.rejoins.inc()
        self.consumer._coordinator.request_rejoin()

    def _check_plan(self) -> None:
        document = self.tracker.current
        if document is None:
            return
        changed = new_document_reason(document, self._joined_epoch, self._joined)
        if changed is not None:
            self._joined_epoch, self._joined = document.epoch, document
            self._stale_next = time.monotonic() + self.config.stale_rejoin_min_s
            self._stale_interval = self.config.stale_rejoin_min_s
            self.request_rejoin(changed)
            return
        reason = stale_reason(
            document.epoch, self.assignor.last_composed_epoch, self.assignor.last_claim_epoch
        )
        if reason is None:
            self._stale_interval = self.config.stale_rejoin_min_s
            return
        now = time.monotonic()
        if now < self._stale_next:
            return
        self._stale_next = now + self._stale_interval
        self._stale_interval = min(self._stale_interval * 2, self.config.stale_rejoin_max_s)
        self.request_rejoin(reason)

    def _step(self) -> None:
        self._check_plan()
        self.consume_once(self.epoch)
        self._note_rebalance()
        document = self.tracker.current
        if document is not None:
            self.metrics.document_epoch.set(document.epoch)
        composed = self.assignor.last_composed_epoch
        if composed is not None:
            self.metrics.composed_epoch.set(composed)
        subscribed = set(self.config.topics)
        planned = (
            None if document is None else [(t, p) for t, p in document.owned() if t in subscribed]
        )
        self.report(planned, document.epoch if document is not None else None)
