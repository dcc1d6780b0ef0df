"""kopf registrations: a pod index, a policy index, and one timer per ConsumerGroupPolicy.

The timer wakes every `tick` seconds and polls when the policy's own pollInterval has passed
(kopf timers have one interval per handler, a policy has its own). A wake-up that is not due
returns at once and writes nothing. The poll itself runs in a worker thread: the event loop
never blocks on Kafka, the Kubernetes client or the planner. Level-triggered only: there are
no create/update handlers, so a missed event is just picked up by the next poll.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import kopf

from kafka_rebalance_operator import metrics, names
from kafka_rebalance_operator.members import PodSummary, summarise_pod
from kafka_rebalance_operator.policy import PolicyError, parse_spec
from kafka_rebalance_operator.reconcile import PolicyContext, PolicyRuntime, poll
from kafka_rebalance_operator.settings import SETTINGS

log = logging.getLogger(__name__)


class _QuietTimerSuccess(logging.Filter):
    """kopf logs "... succeeded." at INFO for every timer tick and every watch event; that is
    noise, not news (the poll logs what it does itself)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        return not (
            record.levelno == logging.INFO
            and ("'poll_policy'" in message or "'forget_deleted'" in message)
            and message.endswith("succeeded.")
        )


def _registry() -> kopf.OperatorRegistry:
    return kopf.get_default_registry()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Standalone unless `--peering` was given (chart: one replica, Recreate).
    # The CRD is installed before the operator, and namespaces are named: no need to list CRDs
    # or namespaces (the chart's least-privilege Role does not allow either).
    settings.scanning.disabled = True
    settings.posting.level = logging.INFO  # only explicit kopf.event() calls are posted
    settings.persistence.finalizer = names.FINALIZER
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 30
    logging.getLogger("kopf.objects").addFilter(_QuietTimerSuccess())


@kopf.index("", "v1", "pods")
def pods_by_namespace(namespace: str, body: kopf.Body, **_: Any) -> dict[str, PodSummary]:
    return {namespace: summarise_pod(body)}


@kopf.index(names.GROUP, names.VERSION, names.PLURAL)
def policies_by_namespace(
    namespace: str, name: str, spec: kopf.Spec, meta: kopf.Meta, **_: Any
) -> dict[str, tuple[str, str, str]]:
    """(creationTimestamp, name, groupId) per policy: to find two policies for one group."""
    return {namespace: (str(meta.get("creationTimestamp") or ""), name, str(spec.get("groupId")))}


def _conflict(namespace: str, name: str, spec: Any, index: kopf.Index) -> str | None:
    """The older policy that manages the same group in this namespace, if any (it wins)."""
    group = spec.get("groupId")
    mine = None
    others = []
    for created, other, other_group in index.get(namespace, []):
        if other == name:
            mine = (created, other)
        elif other_group == group:
            others.append((created, other))
    if mine is None:
        return None
    older = sorted(o for o in others if o < mine)
    return older[0][1] if older else None


def _interval(spec: Any) -> float:
    try:
        return parse_spec(spec).poll_interval * SETTINGS.interval_scale
    except PolicyError:
        return 30.0 * SETTINGS.interval_scale


@kopf.timer(names.GROUP, names.VERSION, names.PLURAL, id="poll_policy", interval=SETTINGS.tick_s)
async def poll_policy(
    namespace: str,
    name: str,
    uid: str,
    meta: kopf.Meta,
    spec: kopf.Spec,
    status: kopf.Status,
    memo: kopf.Memo,
    patch: kopf.Patch,
    body: kopf.Body,
    pods_by_namespace: kopf.Index[str, PodSummary],
    policies_by_namespace: kopf.Index[str, tuple[str, str, str]],
    **_: Any,
) -> None:
    runtime: PolicyRuntime | None = memo.get("runtime")
    if runtime is None:
        runtime = PolicyRuntime()
        memo["runtime"] = runtime
    key = f"{namespace}/{name}"
    SETTINGS.liveness.seen(key)
    now = time.monotonic()
    generation = int(meta.get("generation") or 0)
    # A changed spec is polled at the next tick, not after the rest of the interval.
    due = runtime.last_generation != generation or runtime.last_poll is None
    if not due and now - runtime.last_poll < _interval(spec):
        return
    runtime.last_poll, runtime.last_generation = now, generation
    # Snapshot everything from kopf's live views here, on the loop; the thread gets copies.
    context = PolicyContext(
        namespace=namespace,
        name=name,
        uid=uid,
        generation=generation,
        spec=_plain(dict(spec)),
        status=_plain(dict(status)),
        conflict=_conflict(namespace, name, spec, policies_by_namespace),
    )
    pods = list(pods_by_namespace.get(namespace, []))
    log.debug("%s: polling with %d pods of the namespace in the index: %s", key, len(pods), pods)
    try:
        outcome = await asyncio.to_thread(poll, context, pods, runtime, SETTINGS)
    except Exception:
        log.exception("poll of %s failed", key)
        raise kopf.TemporaryError("poll failed; retrying", delay=_interval(spec)) from None
    for field, value in outcome.status.items():
        patch.status[field] = value
    for kind, reason, message in outcome.events:
        kopf.event(body, type=kind, reason=reason, message=message)
    if outcome.succeeded:
        SETTINGS.liveness.succeeded(key)


def _plain(value: Any) -> Any:
    """Deep copy of kopf's dict views into plain data (safe to hand to another thread)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@kopf.on.event(names.GROUP, names.VERSION, names.PLURAL)
def forget_deleted(type: str, namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    """A deleted policy leaves the liveness check and closes its Kafka client. (Its ConfigMaps
    go by ownerReferences, through Kubernetes' garbage collector.)"""
    if type != "DELETED":
        return
    SETTINGS.liveness.forget(f"{namespace}/{name}")
    metrics.forget(namespace, name)
    runtime: PolicyRuntime | None = memo.get("runtime")
    if runtime is not None:
        runtime.close()
