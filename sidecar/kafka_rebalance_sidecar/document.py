"""The per-pod assignment document (`assignment.json`) as the sidecar reads it, and the tracker
that decides which version of it the sidecar acts on.

The document arrives by a mounted file or a ConfigMap watch, both of which can deliver stale,
half-written or foreign content. The tracker therefore keeps the last good document and only moves
forward: a lower epoch, a malformed text, a document for another group or member, or a rewrite of
the same epoch with different content is refused with one log line, never acted on. Epochs count
within one incarnation of the policy (`policyUid`): a policy deleted and created again writes a
new incarnation, which is accepted whatever its epoch, and the incarnation it replaced is never
accepted again. The operator
rewrites an epoch only with identical content (it may change `generatedAt`, which is not part of
the plan and is ignored here). An operator run with leader election stamps its documents with
its leadership term (`leaderTerm`): at one epoch, a document of an older term is refused and one
of a newer term replaces the current one, so a deposed leader's late write is never acted on
once the new leader's is. Decoding either document version is the wire module's
(`kafka_rebalance_common.wire.document`, shared with the operator's encoder); deciding whether to
act on what it decoded is this module's.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kafka_rebalance_common.wire import (
    AssignmentDocument,
    DocumentError,
    Partitions,
    decode_document,
)

__all__ = [
    "AssignmentDocument",
    "AssignmentTracker",
    "DocumentError",
    "OfferResult",
    "OfferStatus",
    "Partitions",
    "parse_document",
]

log = logging.getLogger("kafka_rebalance_sidecar.document")


def parse_document(
    text: str | bytes, *, group: str | None = None, member: str | None = None
) -> AssignmentDocument:
    """Decode an `assignment.json` (any version the wire module reads) and check whom it is for.
    `group`/`member`, when given, must match: a sidecar mounting another pod's ConfigMap is a
    deployment mistake, not a plan."""
    document = decode_document(text)
    if group is not None and document.group != group:
        raise DocumentError("group", f"{document.group!r} is not this sidecar's group {group!r}")
    if member is not None and document.member != member:
        raise DocumentError(
            "member", f"{document.member!r} is not this sidecar's member {member!r}"
        )
    return document


class OfferStatus(enum.Enum):
    ACCEPTED = "accepted"  # a new document: subscribers were told
    UNCHANGED = "unchanged"  # the same plan again (the same epoch, identical content)
    REJECTED = "rejected"  # not acted on; the last good document stays


@dataclass(frozen=True)
class OfferResult:
    status: OfferStatus
    reason: str  # why rejected (one line), or a short note
    current: AssignmentDocument | None  # the tracker's document after this offer

    @property
    def accepted(self) -> bool:
        return self.status is OfferStatus.ACCEPTED


Subscriber = Callable[[AssignmentDocument], None]


class AssignmentTracker:
    """The one document the sidecar acts on, moving forward only. Thread-safe: sources offer from
    their own threads while the consumer and the assignor read `.current`."""

    def __init__(self, *, group: str | None = None, member: str | None = None) -> None:
        self.group = group
        self.member = member
        self._lock = threading.Lock()
        # Held across "accept, then notify" so subscribers see documents in epoch order even when
        # two sources offer at once; re-entrant so a subscriber may offer (it will be refused or
        # accepted like anyone else's offer).
        self._notify = threading.RLock()
        self._current: AssignmentDocument | None = None
        self._subscribers: list[Subscriber] = []
        self._retired: set[str] = set()  # incarnations a later one replaced
        self.rejected = 0  # count of refused offers, for metrics

    @property
    def current(self) -> AssignmentDocument | None:
        with self._lock:
            return self._current

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(document)` on every accepted change (outside the tracker's state lock).
        Returns a function that unsubscribes."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def offer(self, text: str | bytes, source: str) -> OfferResult:
        """Consider a newly read document text from `source` (a file path, a ConfigMap name)."""
        with self._notify:
            try:
                document = parse_document(text, group=self.group, member=self.member)
            except DocumentError as error:
                return self._reject(source, str(error))
            with self._lock:
                refused = self._refusal(document, source)
                if refused is not None:
                    return refused
                self._current = document
                subscribers = list(self._subscribers)
            self._announce(document, source, subscribers)
            return OfferResult(OfferStatus.ACCEPTED, f"epoch {document.epoch}", document)

    def _refusal(self, document: AssignmentDocument, source: str) -> OfferResult | None:
        """REJECTED or UNCHANGED when `document` does not replace the current one, None when it
        does. Called with the state lock held.

        Invariant: a document replaces the current one only with a higher epoch, or at the same
        epoch under a newer operator leader's term, or as a new incarnation of the policy (whose
        epochs start again); a deleted incarnation's documents never return."""
        current = self._current
        if document.policy_uid in self._retired:
            self.rejected += 1
            reason = f"policyUid: {document.policy_uid} is a deleted incarnation of the policy"
            log.warning("rejected assignment from %s: %s", source, reason)
            return OfferResult(OfferStatus.REJECTED, reason, current)
        if current is not None and not document.same_incarnation(current):
            log.warning(
                "assignment from %s is a new incarnation of the policy (policyUid %s "
                "replaces %s): its epochs start again at %d",
                source,
                document.policy_uid,
                current.policy_uid,
                document.epoch,
            )
            self._retired.add(current.policy_uid)
            return None  # epochs are not comparable across incarnations
        if current is None or document.epoch > current.epoch:
            return None
        if document.epoch < current.epoch:
            reason = f"epoch: {document.epoch} is lower than the current {current.epoch}"
        else:
            order = document.term_order(current)
            if order < 0:
                reason = (
                    f"leaderTerm: {document.leader_term} is older than the current "
                    f"{current.leader_term} at epoch {document.epoch} (a deposed "
                    "operator leader wrote it)"
                )
            elif document == current:
                if _names_more(document, current):
                    self._current = document  # incarnation or term named now
                return OfferResult(OfferStatus.UNCHANGED, "same plan", current)
            elif order > 0:
                log.warning(
                    "assignment from %s re-writes epoch %d under leaderTerm %s "
                    "(was %s): the newer operator leader's plan replaces it",
                    source,
                    document.epoch,
                    document.leader_term,
                    current.leader_term,
                )
                return None
            else:
                reason = f"epoch: {document.epoch} rewritten with different content"
        self.rejected += 1
        log.warning(
            "rejected assignment from %s: %s (keeping epoch %d)", source, reason, current.epoch
        )
        return OfferResult(OfferStatus.REJECTED, reason, current)

    def _announce(
        self, document: AssignmentDocument, source: str, subscribers: list[Subscriber]
    ) -> None:
        """Log the accepted document and call each subscriber (a failing one is logged)."""
        log.info(
            "accepted assignment from %s: group %s member %s epoch %d, %d partitions, %d revoking",
            source,
            document.group,
            document.member,
            document.epoch,
            len(document.owned()),
            len(document.revoking_set()),
        )
        for callback in subscribers:
            try:
                callback(document)
            except Exception:
                log.exception("assignment subscriber %r failed", callback)

    def _reject(self, source: str, reason: str) -> OfferResult:
        with self._lock:
            self.rejected += 1
            current = self._current
        kept = f"keeping epoch {current.epoch}" if current is not None else "no document yet"
        log.warning("rejected assignment from %s: %s (%s)", source, reason, kept)
        return OfferResult(OfferStatus.REJECTED, reason, current)


def _names_more(document: AssignmentDocument, current: AssignmentDocument) -> bool:
    """The same plan, now naming its incarnation or a later leadership term: keep the newer
    names, so that an older term's rewrite of this epoch is recognised as one."""
    return bool(document.policy_uid and not current.policy_uid) or (
        document.leader_term is not None
        and (current.leader_term is None or document.leader_term > current.leader_term)
    )
