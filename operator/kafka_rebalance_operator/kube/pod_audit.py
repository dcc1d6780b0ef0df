"""Pods the watch index still holds but the API server no longer has ("ghosts").

Membership comes from kopf's pod index, fed by a watch. When the watch cannot resume (the API
server restarted, or the operator was cut off for longer than the server keeps history), kopf
lists the pods again and adds what it finds, but it never removes entries for pods deleted in
the gap. Such a pod would stay a member, with partitions nobody consumes, until the operator
restarts. So each namespace's pods are listed directly (metadata only) at most every
`interval_s`: an indexed pod whose name is missing from that list, or now belongs to another
uid, was deleted, and is left out of membership from then on. Uids are never reused, so a ghost
stays a ghost; a pod created later under the same name is a different uid and counts normally.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence

from kafka_rebalance_operator.kube.members import PodSummary

log = logging.getLogger(__name__)

PodLister = Callable[[str], dict[str, str]]  # namespace -> {pod name: uid}, from the API server


class PodAudit:
    """Per namespace: the ghost uids found so far, and when the pods were last listed.
    Thread-safe: polls of several policies may ask at once."""

    def __init__(self, lister: PodLister, interval_s: float) -> None:
        self.lister = lister
        self.interval_s = interval_s  # <= 0: never list (the index is taken as it is)
        self._lock = threading.Lock()
        self._ghosts: dict[str, set[str]] = {}
        self._listed_at: dict[str, float] = {}

    def current(self, namespace: str, pods: Sequence[PodSummary], now: float) -> list[PodSummary]:
        """`pods` (a snapshot of the index, taken before this call) without the ghosts. Lists
        the namespace first when the last list is older than `interval_s`; a list that fails
        keeps the ghosts known so far (logged, never fatal: the index is usually right)."""
        if self.interval_s > 0 and now - self._listed_at.get(namespace, -math.inf) >= (
            self.interval_s
        ):
            self._audit(namespace, pods, now)
        with self._lock:
            ghosts = self._ghosts.get(namespace, set())
            return [pod for pod in pods if not pod.uid or pod.uid not in ghosts]

    def _audit(self, namespace: str, pods: Sequence[PodSummary], now: float) -> None:
        try:
            present = self.lister(namespace)
        except Exception as error:
            log.warning(
                "listing the pods of %s to check the watch index failed: %s", namespace, error
            )
            return
        found = {pod.uid for pod in pods if pod.uid and present.get(pod.name) != pod.uid}
        with self._lock:
            known = self._ghosts.setdefault(namespace, set())
            indexed = {pod.uid for pod in pods}
            for pod in pods:
                if pod.uid in found and pod.uid not in known:
                    log.warning(
                        "pod %s/%s (uid %s) is in the watch index but not on the API server: "
                        "it was deleted while the watch was down; left out of membership",
                        namespace,
                        pod.name,
                        pod.uid,
                    )
            # Ghosts the index has dropped since need no remembering.
            self._ghosts[namespace] = (known & indexed) | found
            self._listed_at[namespace] = now
