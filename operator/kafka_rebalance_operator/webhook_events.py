"""Warning events the injection webhook posts about a policy, off the admission's path.

Invariant: posting never delays or fails an admission. `post_warning` returns at once; a
daemon thread creates the Event, each attempt bounded by a request timeout and retried with
jittered backoff for up to `budget_s` (the API server may be what failed the admission: the
event is posted once it answers again, or given up with a log line).
"""

from __future__ import annotations

import datetime
import logging
import threading

from kubernetes import client
from tenacity import Retrying, stop_after_delay, wait_random_exponential

from kafka_rebalance_operator import kube_io, names

log = logging.getLogger(__name__)

COMPONENT = "kafka-rebalance-webhook"


def post_warning(
    namespace: str,
    policy: str,
    uid: str,
    reason: str,
    message: str,
    *,
    timeout_s: float = 5.0,
    budget_s: float = 60.0,
) -> threading.Thread:
    """Post a Warning event `reason` on policy `namespace/policy` in the background; returns
    the posting thread (tests may join it)."""

    def post() -> None:
        now = datetime.datetime.now(datetime.UTC)
        body = {
            "metadata": {"generateName": f"{policy[:200]}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": names.API_VERSION,
                "kind": names.KIND,
                "name": policy,
                "namespace": namespace,
                "uid": uid,
            },
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
                policy,
                budget_s,
                " ".join(str(error).split())[:300],
            )

    thread = threading.Thread(target=post, name=f"event-{reason}", daemon=True)
    thread.start()
    return thread
