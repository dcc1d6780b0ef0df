"""The per-pod assignment document (`assignment.json`) as the sidecar reads it, and the tracker
that decides which version of it the sidecar acts on.

The document arrives by a mounted file or a ConfigMap watch, both of which can deliver stale,
half-written or foreign content. The tracker therefore keeps the last good document and only moves
forward: a lower epoch, a malformed text, a document for another group or member, or a rewrite of
the same epoch with different content is refused with one log line, never acted on. The operator
rewrites an epoch only with identical content (it may change `generatedAt`, which is not part of
the plan and is ignored here).
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("kafka_rebalance_sidecar.document")

Partitions = dict[str, tuple[int, ...]]  # topic -> sorted partitions, no empty tuples


class DocumentError(ValueError):
    """The text is not a usable assignment document. The message is one line naming the field
    (`epoch`, `partitions.orders[2]`, `input` for the document as a whole)."""

    def __init__(self, field_name: str, problem: str) -> None:
        self.field = field_name
        self.problem = problem
        super().__init__(f"{_one_line(field_name)}: {_one_line(problem)}")


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


@dataclass(frozen=True)
class AssignmentDocument:
    """What the operator tells one member: its partitions at an epoch, and (assign mode's first
    hand-over step) the partitions it must give up."""

    group: str
    member: str
    epoch: int
    partitions: Partitions = field(default_factory=dict)
    revoking: Partitions = field(default_factory=dict)
    plan_hash: str = ""

    def owned(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this member should consume."""
        return frozenset((t, p) for t, parts in self.partitions.items() for p in parts)

    def revoking_set(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this member must stop consuming and acknowledge."""
        return frozenset((t, p) for t, parts in self.revoking.items() for p in parts)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(raw: Mapping[str, Any], name: str, *, required: bool) -> str:
    if name not in raw:
        if required:
            raise DocumentError(name, "missing")
        return ""
    value = raw[name]
    if not isinstance(value, str):
        raise DocumentError(name, f"not a string ({type(value).__name__})")
    return value


def _partitions(raw: Mapping[str, Any], name: str, *, required: bool) -> Partitions:
    if name not in raw:
        if required:
            raise DocumentError(name, "missing")
        return {}
    value = raw[name]
    if not isinstance(value, dict):
        raise DocumentError(name, f"not an object ({type(value).__name__})")
    result: Partitions = {}
    for topic in sorted(value):
        parts = value[topic]
        path = f"{name}.{topic}"
        if not isinstance(parts, list):
            raise DocumentError(path, f"not a list ({type(parts).__name__})")
        for index, partition in enumerate(parts):
            if not _is_int(partition):
                raise DocumentError(f"{path}[{index}]", "not an integer")
            if partition < 0:
                raise DocumentError(f"{path}[{index}]", f"negative partition {partition}")
        unique = sorted(set(parts))
        if len(unique) != len(parts):
            raise DocumentError(path, "a partition is listed twice")
        if unique:
            result[topic] = tuple(unique)
    return result


def parse_document(
    text: str | bytes, *, group: str | None = None, member: str | None = None
) -> AssignmentDocument:
    """Parse and validate an `assignment.json`. `group`/`member`, when given, must match: a
    sidecar mounting another pod's ConfigMap is a deployment mistake, not a plan."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DocumentError("input", f"not UTF-8 ({error.reason})") from None
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise DocumentError("input", f"not JSON ({error})") from None
    if not isinstance(raw, dict):
        raise DocumentError("input", f"not a JSON object ({type(raw).__name__})")
    doc_group = _string(raw, "group", required=True)
    doc_member = _string(raw, "member", required=True)
    if "epoch" not in raw:
        raise DocumentError("epoch", "missing")
    epoch = raw["epoch"]
    if not _is_int(epoch):
        raise DocumentError("epoch", "not an integer")
    if epoch < 0:
        raise DocumentError("epoch", f"negative ({epoch})")
    partitions = _partitions(raw, "partitions", required=True)
    revoking = _partitions(raw, "revoking", required=False)
    for topic, parts in revoking.items():
        both = set(parts).intersection(partitions.get(topic, ()))
        if both:
            raise DocumentError(f"revoking.{topic}", f"partition {min(both)} is also in partitions")
    plan_hash = _string(raw, "planHash", required=False)
    if group is not None and doc_group != group:
        raise DocumentError("group", f"{doc_group!r} is not this sidecar's group {group!r}")
    if member is not None and doc_member != member:
        raise DocumentError("member", f"{doc_member!r} is not this sidecar's member {member!r}")
    return AssignmentDocument(
        group=doc_group,
        member=doc_member,
        epoch=epoch,
        partitions=partitions,
        revoking=revoking,
        plan_hash=plan_hash,
    )


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
                current = self._current
                if current is not None:
                    if document.epoch < current.epoch:
                        reason = (
                            f"epoch: {document.epoch} is lower than the current {current.epoch}"
                        )
                        result = None
                    elif document.epoch == current.epoch:
                        if document == current:
                            return OfferResult(OfferStatus.UNCHANGED, "same plan", current)
                        reason = f"epoch: {document.epoch} rewritten with different content"
                        result = None
                    else:
                        result = document
                    if result is None:
                        self.rejected += 1
                        log.warning(
                            "rejected assignment from %s: %s (keeping epoch %d)",
                            source,
                            reason,
                            current.epoch,
                        )
                        return OfferResult(OfferStatus.REJECTED, reason, current)
                self._current = document
                subscribers = list(self._subscribers)
            log.info(
                "accepted assignment from %s: group %s member %s epoch %d, %d partitions, "
                "%d revoking",
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
            return OfferResult(OfferStatus.ACCEPTED, f"epoch {document.epoch}", document)

    def _reject(self, source: str, reason: str) -> OfferResult:
        with self._lock:
            self.rejected += 1
            current = self._current
        kept = f"keeping epoch {current.epoch}" if current is not None else "no document yet"
        log.warning("rejected assignment from %s: %s (%s)", source, reason, kept)
        return OfferResult(OfferStatus.REJECTED, reason, current)
