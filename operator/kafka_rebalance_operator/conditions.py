"""kstatus conditions (Ready, Reconciling, Stalled), so Argo CD and Flux read the policy's health.

lastTransitionTime changes only when a condition's status changes, so an unchanged poll renders
identical conditions and the status write carries no news.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TYPES = ("Ready", "Reconciling", "Stalled")


@dataclass(frozen=True)
class Health:
    """The state of one poll in kstatus terms."""

    ready: bool
    reason: str
    message: str
    reconciling: bool = False
    stalled: bool = False


def build(
    health: Health,
    previous: Iterable[Mapping[str, Any]] | None,
    generation: int,
    now_iso: str,
) -> list[dict[str, Any]]:
    old = {c.get("type"): c for c in previous or []}
    # kstatus: the abnormal-true conditions carry the reason when true; when false they say why
    # not in a neutral way.
    states = {
        "Ready": (health.ready, health.reason, health.message),
        "Reconciling": (
            health.reconciling,
            health.reason if health.reconciling else "Idle",
            health.message if health.reconciling else "nothing in progress",
        ),
        "Stalled": (
            health.stalled,
            health.reason if health.stalled else "Progressing",
            health.message if health.stalled else "no error",
        ),
    }
    result = []
    for kind in TYPES:
        flag, reason, message = states[kind]
        status = "True" if flag else "False"
        before = old.get(kind) or {}
        transition = before.get("lastTransitionTime") if before.get("status") == status else None
        result.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message[:32000],
                "observedGeneration": generation,
                "lastTransitionTime": transition or now_iso,
            }
        )
    return result
