"""kopf handlers: a pod index, a policy index, and one timer per ConsumerGroupPolicy.

The timer wakes every `tick` seconds and polls when the policy's own pollInterval has passed
(kopf timers have one interval per handler, a policy has its own). A wake-up that is not due
returns at once and writes nothing. The poll itself runs in a worker thread: the event loop
never blocks on Kafka, the Kubernetes client or the planner. Level-triggered only: there are
no create/update handlers, so a missed event is just picked up by the next poll.

Nothing here is registered at import. `registry(settings)` builds the handlers for one run, and
what they share (settings, ports, liveness) reaches them as `memo.operator` (kopf copies the
operator's memo into every resource's memo; the policy's own `PolicyMemory` is added there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf
from kafka_rebalance_common import redaction

from kafka_rebalance_operator import allocator, metrics, names
from kafka_rebalance_operator.health import Liveness
from kafka_rebalance_operator.kafka import cluster_identity, trigger_cleanup
from kafka_rebalance_operator.kube.members import PodSummary, summarise_pod
from kafka_rebalance_operator.kube.pod_audit import PodAudit
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases import connect
from kafka_rebalance_operator.phases.context import PollFailure
from kafka_rebalance_operator.phases.publish import retire
from kafka_rebalance_operator.policy import PolicyError, parse_spec
from kafka_rebalance_operator.ports import Ports, StoreError
from kafka_rebalance_operator.reconcile import PolicyContext, PollOutcome, poll
from kafka_rebalance_operator.settings import OperatorSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Operator:
    """What every handler is given (as `memo.operator`)."""

    settings: OperatorSettings
    ports: Ports
    liveness: Liveness
    pod_audit: PodAudit | None = None  # drops pods the watch index kept by mistake

    def memo(self) -> kopf.Memo:
        return kopf.Memo(operator=self)


def registry(settings: OperatorSettings) -> kopf.OperatorRegistry:
    """The operator's handlers, registered on a fresh registry (the timer ticks every
    settings.tick_s)."""
    handlers = kopf.OperatorRegistry()
    policies = (names.GROUP, names.VERSION, names.PLURAL)
    # A fresh registry has no login handler (kopf's default one adds them): log in as the
    # Kubernetes client does, in-cluster ServiceAccount first, else the kubeconfig.
    kopf.on.login(registry=handlers)(login)
    kopf.on.startup(registry=handlers)(configure)
    # kopf's callback protocols type `namespace` as `str | None` (cluster-scoped resources) and
    # do not list the indexes it passes by name; pods and policies are namespaced.
    kopf.index("", "v1", "pods", registry=handlers)(pods_by_namespace)  # type: ignore[arg-type]
    kopf.index(*policies, registry=handlers)(policies_by_namespace)  # type: ignore[arg-type]
    kopf.timer(*policies, id="poll_policy", interval=settings.tick_s, registry=handlers)(
        poll_policy  # type: ignore[arg-type]
    )
    kopf.on.event(*policies, registry=handlers)(forget_deleted)  # type: ignore[arg-type]
    return handlers


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


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Standalone unless `--peering` was given (chart: one replica, Recreate).
    # The CRD is installed before the operator, and namespaces are named: no need to list CRDs
    # or namespaces (the chart's least-privilege Role does not allow either).
    settings.scanning.disabled = True
    allocator.cap_arenas()  # before any poll thread starts (allocator.py)
    settings.posting.level = logging.INFO  # only explicit kopf.event() calls are posted
    settings.persistence.finalizer = names.FINALIZER
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 30
    logging.getLogger("kopf.objects").addFilter(_QuietTimerSuccess())


def pods_by_namespace(namespace: str, body: kopf.Body, **_: Any) -> dict[str, PodSummary]:
    return {namespace: summarise_pod(body)}


PolicyEntry = tuple[str, str, str, tuple[str, ...]]


def policies_by_namespace(
    namespace: str, name: str, spec: kopf.Spec, meta: kopf.Meta, **_: Any
) -> dict[str, PolicyEntry]:
    """(creationTimestamp, name, groupId, bootstrap servers) per valid policy: to find two
    policies for one group of one cluster, in this namespace or any other the operator watches.
    An invalid policy (InvalidSpec) manages nothing, so it holds no groupId: it is left out,
    and a valid policy for its group is not refused because of it.

    Servers are kept as written (`host:port`, lower-cased): which cluster they reach is
    learned by each policy's poll (`cluster_identity`, docs/operator.md "One policy per
    group")."""
    try:
        parse_spec(_plain(dict(spec)))
    except PolicyError:
        return {}
    kafka = spec.get("kafka") or {}
    servers = cluster_identity.servers_of(str(kafka.get("bootstrapServers") or ""))
    return {
        namespace: (
            str(meta.get("creationTimestamp") or ""),
            name,
            str(spec.get("groupId")),
            tuple(sorted(servers)),
        )
    }


def _rivals(
    namespace: str, name: str, spec: Any, index: Mapping[str, Iterable[PolicyEntry]]
) -> tuple[cluster_identity.Rival, ...]:
    """The older valid policies for the same groupId, in any watched namespace: the policies
    that win the group over this one if they manage it on the same cluster (which the poll
    decides: `cluster_identity.verdict`). Older means an earlier creationTimestamp, then
    (namespace, name): both sides agree. None while this policy is not indexed (invalid)."""
    group = spec.get("groupId")
    entries = [
        cluster_identity.Rival(created, other_namespace, other, frozenset(servers))
        for other_namespace, stored in index.items()
        for created, other, other_group, servers in stored
        if other_group == group
    ]
    mine = next((e for e in entries if (e.namespace, e.name) == (namespace, name)), None)
    if mine is None:
        return ()
    key = (mine.created, mine.namespace, mine.name)
    return tuple(sorted(e for e in entries if (e.created, e.namespace, e.name) < key))


# How often a policy whose spec does not parse is polled again (the CRD's default pollInterval);
# a changed spec is polled at the next tick anyway.
INVALID_SPEC_INTERVAL_S = 30.0


def _interval(spec: Any, settings: OperatorSettings) -> float:
    """The policy's pollInterval, never shorter than --min-poll-interval (a policy below it is
    Stalled by the poll and re-polled at the minimum)."""
    try:
        interval = parse_spec(spec).poll_interval
    except PolicyError:
        interval = INVALID_SPEC_INTERVAL_S
    return max(interval, settings.min_poll_interval_s)


async def poll_policy(
    namespace: str,
    name: str,
    uid: str,
    meta: kopf.Meta,
    spec: kopf.Spec,
    status: kopf.Status,
    memo: kopf.Memo,
    body: kopf.Body,
    pods_by_namespace: kopf.Index[str, PodSummary],
    policies_by_namespace: kopf.Index[str, PolicyEntry],
    **_: Any,
) -> None:
    operator: Operator = memo.operator
    memory: PolicyMemory | None = memo.get("memory")
    if memory is None:
        memory = PolicyMemory()
        memo["memory"] = memory
    key = f"{namespace}/{name}"
    operator.liveness.woke(key)
    if not operator.ports.leadership.may_write():
        return  # a replica that lost its Lease polls and writes nothing; it exits shortly
    now = time.monotonic()
    generation = int(meta.get("generation") or 0)
    # A changed spec is polled at the next tick, not after the rest of the interval; polls of
    # policies started together are spread over the interval (PolicyMemory.poll_due).
    if not memory.poll_due(now, generation, _interval(spec, operator.settings), uid):
        return
    # Snapshot everything from kopf's live views here, on the loop; the thread gets copies.
    context = PolicyContext(
        namespace=namespace,
        name=name,
        uid=uid,
        generation=generation,
        spec=_plain(dict(spec)),
        status=_plain(dict(status)),
        rivals=_rivals(namespace, name, spec, policies_by_namespace),
    )
    pods = list(pods_by_namespace.get(namespace, []))
    log.debug("%s: polling with %d pods of the namespace in the index: %s", key, len(pods), pods)
    # Queued until a worker thread is free: that is waiting, not being stuck (health.py).
    operator.liveness.poll_queued(key)
    try:
        outcome = await asyncio.to_thread(
            _poll_in_worker, operator, key, context, pods, memory, now
        )
    except Exception:
        log.exception("poll of %s failed", key)
        # Retried at the next tick, which polls again once the interval has passed (last_poll
        # is set): the timer keeps waking, so the liveness check sees the loop run.
        raise kopf.TemporaryError("poll failed; retrying", delay=operator.settings.tick_s) from None
    finally:
        operator.liveness.poll_finished(key)
    if not operator.ports.leadership.may_write():
        return  # the Lease may have passed to a standby while this poll ran: no status, no Event
    for kind, reason, message in outcome.events:
        kopf.event(body, type=kind, reason=reason, message=message)
    conditions = (outcome.status or {}).get("conditions")
    if conditions:  # what the alert rules key on, also while status writes fail
        metrics.record_conditions(namespace, name, conditions)
    if outcome.status:
        await _write_status(operator, memory, body, namespace, name, outcome.status)


def _poll_in_worker(
    operator: Operator,
    key: str,
    context: PolicyContext,
    pods: list[PodSummary],
    memory: PolicyMemory,
    now: float,
) -> PollOutcome:
    """The poll, in a worker thread: from here on its time counts toward liveness."""
    operator.liveness.poll_started(key)
    if operator.pod_audit is not None:
        pods = operator.pod_audit.current(context.namespace, pods, now)
    return poll(context, pods, memory, operator.ports, operator.settings)


async def _write_status(
    operator: Operator,
    memory: PolicyMemory,
    body: kopf.Body,
    namespace: str,
    name: str,
    status: dict[str, Any],
) -> None:
    """Patch the policy's status. A refused write costs this policy its status report, never
    its polls: the safeguards status carries are also in its memory. A Warning Event says so
    when writes start failing, and `kafka_rebalance_poll_errors_total{reason=
    "StatusWriteFailed"}` counts every refused write."""
    try:
        await asyncio.to_thread(operator.ports.status.patch, namespace, name, status)
    except StoreError as error:
        operator.ports.metrics.poll_failed(namespace, name, "StatusWriteFailed")
        message = redaction.redact(f"status not written: {error}")[:1000]
        log.warning("%s/%s %s", namespace, name, message)
        if not memory.status_failing:
            kopf.event(body, type="Warning", reason="StatusWriteFailed", message=message)
        memory.status_failing = True
    else:
        memory.status_failing = False


def _plain(value: Any) -> Any:
    """Deep copy of kopf's dict views into plain data (safe to hand to another thread)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def forget_deleted(type: str, namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    """A deleted policy leaves the liveness check, retires its broker-mode plan record (a
    tombstone), takes the streams trigger tag out of its streams group's tags and closes its
    Kafka client. (Its ConfigMaps go by ownerReferences, through
    Kubernetes' garbage collector.) A policy the operator has not polled since it started
    (deleted while it was down, or before its first poll) has its plan retired and its tag
    removed all the same, from what its object says it published (`_published_memory`)."""
    if type != "DELETED":
        return
    operator: Operator = memo.operator
    operator.liveness.forget(f"{namespace}/{name}")
    operator.ports.clusters.forget((namespace, name))
    metrics.forget(namespace, name)
    memory: PolicyMemory | None = memo.get("memory")
    if memory is None:
        memory = _published_memory(namespace, name, _.get("body") or {}, operator)
    if memory is not None:
        retire(memory, operator.settings, f"{namespace}/{name}")
        group = trigger_cleanup.streams_group_of(_.get("spec"))
        trigger_cleanup.clear_trigger(memory.observer, group, f"{namespace}/{name}")
        memory.close()


def _published_memory(
    namespace: str, name: str, body: Mapping[str, Any], operator: Operator
) -> PolicyMemory | None:
    """What a broker-mode policy published, rebuilt from its object (group, uid as the
    incarnation, status.epoch) with a Kafka client of its own; None when its status names no
    applied plan (it published nothing, so there is nothing to retire and no tag of its), or
    when no client can be had (logged: the plan expires by the brokers' max age and the tag,
    which the plug-in ignores, stays)."""
    status = body.get("status") or {}
    metadata = body.get("metadata") or {}
    if not status.get("appliedPlan"):
        return None
    try:
        spec = parse_spec(_plain(dict(body.get("spec") or {})))
    except PolicyError:
        return None
    if spec.apply_mode != "broker":
        return None
    context = PolicyContext(
        namespace=namespace,
        name=name,
        uid=str(metadata.get("uid") or ""),
        generation=int(metadata.get("generation") or 0),
        spec=_plain(dict(body.get("spec") or {})),
        status=_plain(dict(status)),
    )
    memory = PolicyMemory()
    try:
        connect.kafka_client(spec, context, memory, operator.ports, operator.settings)
    except PollFailure as failure:
        log.warning(
            "%s/%s deleted: its plan and trigger tag stay until they expire (%s: %s)",
            namespace,
            name,
            failure.reason,
            failure.message,
        )
        memory.close()
        return None
    memory.published_group = spec.group_id
    memory.published_incarnation = context.uid
    memory.published_epoch = int(status.get("epoch") or 0)
    return memory
