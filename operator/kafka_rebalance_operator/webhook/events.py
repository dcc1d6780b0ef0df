"""Warning events the injection webhook posts (about a policy, or a pod and its owner), off
the admission's path.

Invariant: posting never delays or fails an admission. `post_warning` returns at once; a
daemon thread creates the Event, each attempt bounded by a request timeout and retried with
jittered backoff for up to `budget_s` (the API server may be what failed the admission: the
event is posted once it answers again, or given up with a log line). `Throttle` keeps the same
event about the same object to one per window (a Deployment's pods share their annotations).
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

from kubernetes import client
from tenacity import Retrying, stop_after_delay, wait_random_exponential

from kafka_rebalance_operator import names
from kafka_rebalance_operator.kube import kube_io

log = logging.getLogger(__name__)

COMPONENT = "kafka-rebalance-webhook"


def policy_reference(namespace: str, policy: str, uid: str) -> dict[str, str]:
    """The involvedObject of an event on a ConsumerGroupPolicy."""
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "name": policy,
        "namespace": namespace,
        "uid": uid,
    }


def pod_reference(pod: Mapping[str, Any]) -> dict[str, str] | None:
    """The involvedObject of an event about a pod at its admission: its controller (a
    StatefulSet or ReplicaSet, which exists), else the pod by name (created right after; no
    uid yet), else None (a pod named only at creation, without an owner)."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    owners = [o for o in metadata.get("ownerReferences") or [] if o.get("controller")]
    if owners:
        owner = owners[0]
        return {
            "apiVersion": str(owner.get("apiVersion") or ""),
            "kind": str(owner.get("kind") or ""),
            "name": str(owner.get("name") or ""),
            "namespace": namespace,
            "uid": str(owner.get("uid") or ""),
        }
    if metadata.get("name"):
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": str(metadata["name"]),
            "namespace": namespace,
        }
    return None


class Throttle:
    """Whether an event is due: a key seen within `window_s` is not (at most `size` keys are
    kept, the oldest forgotten first)."""

    def __init__(self, window_s: float = 600.0, size: int = 4096) -> None:
        self.window_s, self.size = window_s, size
        self._seen: OrderedDict[Hashable, float] = OrderedDict()
        self._lock = threading.Lock()

    def due(self, key: Hashable, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last < self.window_s:
                return False
            self._seen[key] = now
            self._seen.move_to_end(key)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
            return True


def post_warning(
    involved: Mapping[str, str],
    reason: str,
    message: str,
    *,
    timeout_s: float = 5.0,
    budget_s: float = 60.0,
) -> threading.Thread:
    """Post a Warning event `reason` on `involved` (an involvedObject, with its namespace) in
    the background; returns the posting thread (tests may join it)."""
    namespace, name = involved["namespace"], involved["name"]

    def post() -> None:
        now = datetime.datetime.now(datetime.UTC)
        body = {
            "metadata": {"generateName": f"{name[:200]}.", "namespace": namespace},
            "involvedObject": dict(involved),
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": COMPONENT},
            "firstTimestamp": now.isoformat(),
            "lastTimestamp": now.isoformat(),
            "count": 1,
        }
        core = client.CoreV1Api(kube_io.api())
        try:
            for attempt in Retrying(
                stop=stop_after_delay(budget_s),
                wait=wait_random_exponential(multiplier=0.5, max=10),
                reraise=True,
            ):
                with attempt:
                    core.create_namespaced_event(
                        namespace,
                        body,  # type: ignore[arg-type]  # the client takes the object as a dict too
                        _request_timeout=timeout_s,
                    )
        except Exception as error:
            log.warning(
                "event %s on %s/%s not posted within %.0f s: %s",
                reason,
                namespace,
                name,
                budget_s,
                " ".join(str(error).split())[:300],
            )

    thread = threading.Thread(target=post, name=f"event-{reason}", daemon=True)
    thread.start()
    return thread
