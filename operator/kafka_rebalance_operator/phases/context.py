"""What every phase of a poll is given about the policy, and how a phase gives up."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_rebalance_operator.kafka.cluster_identity import Rival


@dataclass(frozen=True)
class PolicyContext:
    """A snapshot of the policy, taken on the event loop before the poll's thread starts."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    # the older policies for the same groupId in any watched namespace (handlers._rivals):
    # the one on the same cluster wins (cluster_identity)
    rivals: tuple[Rival, ...] = ()

    def previous_ready(self) -> Mapping[str, Any]:
        """The Ready condition the last poll wrote ({} if none)."""
        return next(
            (c for c in self.status.get("conditions") or [] if c.get("type") == "Ready"), {}
        )


class PollFailure(Exception):
    """This poll cannot observe, plan or write: the policy's conditions say why (`reason` is
    the condition reason) and nothing else changes: the epoch, the plan and the ConfigMaps stay
    as they are."""

    def __init__(self, reason: str, message: str, *, stalled: bool = True) -> None:
        super().__init__(message)
        self.reason, self.message, self.stalled = reason, message, stalled


def iso(ts: float) -> str:
    return (
        datetime.datetime.fromtimestamp(ts, datetime.UTC)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z")
    )


def parse_iso(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
