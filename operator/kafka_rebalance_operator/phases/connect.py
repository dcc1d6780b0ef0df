"""What every group kind does first when it observes: admit the policy (its spec parses, no
older policy holds the group, its servers are allowed), reach its Kafka cluster with the
policy's credentials, identify the cluster, and keep each partition's lag history.

Shared by every kind in `groups/`; the kind-specific reads (consumer ConfigMaps and offsets,
streams topologies) live with each kind.
"""

from __future__ import annotations

from kafka_rebalance_common import redaction

from kafka_rebalance_operator.history import PolicyHistory
from kafka_rebalance_operator.kafka import admission, cluster_identity, kafka_security
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable
from kafka_rebalance_operator.lag import (
    OK,
    UNKNOWN,
    Layout,
    PolicyLags,
    PolicyOffsets,
    classify_all,
)
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure
from kafka_rebalance_operator.policy import PolicyError, PolicySpec, parse_spec
from kafka_rebalance_operator.ports import Observer, Ports, SecretMissing, StoreError
from kafka_rebalance_operator.settings import OperatorSettings

PLAN_CLUSTER_NOT_CONFIGURED = "PlanClusterNotConfigured"


def admit(ctx: PolicyContext, settings: OperatorSettings) -> PolicySpec:
    """The parsed spec, if this policy may run at all (checked before any I/O)."""
    try:
        spec = parse_spec(ctx.spec)
    except PolicyError as error:
        raise PollFailure("InvalidSpec", str(error)) from None
    rival = cluster_identity.by_servers(
        cluster_identity.servers_of(spec.bootstrap_servers), ctx.rivals
    )
    if rival is not None:  # servers written alike: one cluster, known before any Kafka call
        raise PollFailure(
            cluster_identity.CONFLICT_REASON,
            f"policy {rival.shown_from(ctx.namespace)} (older) already manages group "
            f"{spec.group_id}; this one does nothing",
        )
    # broker mode (streams groups are in it too): plans go only to the operator's plan cluster
    if spec.apply_mode == "broker" and not settings.plan_client.get("bootstrap_servers"):
        raise PollFailure(
            PLAN_CLUSTER_NOT_CONFIGURED,
            "this operator has no plan cluster to publish plans to: start it with "
            "--plan-bootstrap-servers or bootstrap_servers in --plan-client-config (chart: "
            "brokerMode.planBootstrapServers)",
        )
    refusal = admission.bootstrap_allowed(
        spec.bootstrap_servers, settings.allowed_bootstrap_servers
    )
    if refusal is not None:
        raise PollFailure(admission.REFUSAL_REASON, refusal)
    if spec.poll_interval < settings.min_poll_interval_s:
        raise PollFailure(
            "PollIntervalTooShort",
            f"spec.rebalance.pollInterval {spec.poll_interval:g}s is below this operator's "
            f"--min-poll-interval {settings.min_poll_interval_s:g}s: set it to at least that",
        )
    return spec


def identify(
    ctx: PolicyContext, spec: PolicySpec, observer: Observer, memory: PolicyMemory, ports: Ports
) -> str:
    """The policy's cluster id, recorded for the other policies' polls, if this policy may
    manage its group on that cluster (`cluster_identity.verdict`); else the PollFailure that
    says why not: its cluster is unknown (ClusterUnknown), an older policy manages the group
    on it (ConflictingPolicy), or an older policy for the group is not identified yet
    (ClusterIdentityPending). Before any offset is read, plan made or document written."""
    servers = cluster_identity.servers_of(spec.bootstrap_servers)
    try:
        cluster_id = observer.cluster_id()
    except KafkaUnavailable as error:
        memory.close()  # a fresh client next poll: the cluster may have moved
        raise PollFailure(
            cluster_identity.UNKNOWN_REASON,
            f"{error}: the policy does nothing until its cluster is known",
        ) from None
    ports.clusters.learned((ctx.namespace, ctx.name), servers, cluster_id)
    found = cluster_identity.verdict(servers, cluster_id, ctx.rivals, ports.clusters.snapshot())
    if found is None:
        return cluster_id
    other = found.rival.shown_from(ctx.namespace)
    if found.reason == cluster_identity.CONFLICT_REASON:
        raise PollFailure(
            found.reason,
            f"policy {other} (older) already manages group {spec.group_id} on Kafka cluster "
            f"{cluster_id}; this one does nothing",
        )
    raise PollFailure(
        found.reason,
        f"waiting for the first poll of policy {other} (older, same group {spec.group_id}): "
        "if it names the same Kafka cluster, it manages the group",
        stalled=False,
    )


def kafka_client(
    spec: PolicySpec,
    ctx: PolicyContext,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
) -> Observer:
    """The policy's Kafka client (shared with the policies that name the same servers and
    credentials: `clients`), asked for again when the servers or the Secrets change."""
    secret = _secret(ports, ctx.namespace, spec.secret_name)
    ca = _secret(ports, ctx.namespace, spec.ca_secret_name)
    key = (spec.bootstrap_servers, kafka_security.fingerprint(secret, ca))
    if memory.observer is None or memory.observer_key != key:
        memory.close()
        try:
            security = kafka_security.client_settings(secret, ca)
        except kafka_security.SecretError as error:
            names = ", ".join(n for n in (spec.secret_name, spec.ca_secret_name) if n)
            raise PollFailure("InvalidSecret", f"Secret {names}: {error}") from None
        timeout = min(settings.kafka_timeout_s, max(2.0, spec.poll_interval))
        try:
            memory.observer = ports.kafka(spec.bootstrap_servers, security, timeout, key=key)
        except KafkaUnavailable as error:
            raise PollFailure("KafkaUnreachable", str(error)) from None
        memory.observer_key = key
    return memory.observer


def _secret(ports: Ports, namespace: str, name: str | None) -> dict[str, str] | None:
    if not name:
        return None
    try:
        secret = ports.secrets.read(namespace, name)
    except SecretMissing as error:
        raise PollFailure("SecretNotFound", str(error)) from None
    except StoreError as error:
        raise PollFailure("SecretUnreadable", f"Secret {namespace}/{name}: {error}") from None
    redaction.register(*(secret.get(k) for k in kafka_security.SECRET_KEYS))
    return secret


def track_lags(
    spec: PolicySpec, offsets: PolicyOffsets, memory: PolicyMemory, now: float
) -> PolicyLags:
    """Lag state, lag and time lag of every partition; updates the policy's history (resized
    to the partitions read: new ones start empty, gone ones are forgotten)."""
    layout: Layout = offsets.layout
    history = memory.history
    history = PolicyHistory(layout) if history is None else history.resized(layout)
    memory.history = history
    previous, ages = history.carried(now)
    states, lags, ages = classify_all(offsets, spec.offset_reset, previous, ages)
    known = states != UNKNOWN
    history.observe(now, offsets.end, offsets.committed, known, lags)
    time_lags = history.time_lags(offsets.committed, (states == OK) & (offsets.committed >= 0), now)
    return PolicyLags(layout, states, lags, ages, time_lags)
