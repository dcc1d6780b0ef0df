"""Observe: what is true now. The policy's spec, the group's offsets and lag in Kafka, the
members (Ready pods), the plan in place (the ConfigMaps, corrected by `ownership` where they no
longer show what members act on), pods that linger with partitions, and a hand-over in flight.

Reads only; the state it updates is the policy's columnar history (rates, end-offset histories,
the lags last reported: `history.PolicyHistory`) and the remembered documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafka_rebalance_common import redaction

from kafka_rebalance_operator import (
    admission,
    assignment_doc,
    cluster_identity,
    handoff,
    kafka_security,
    ownership,
    protocol,
)
from kafka_rebalance_operator.assignment_doc import CurrentState, MemberDocument
from kafka_rebalance_operator.handoff import Pending
from kafka_rebalance_operator.history import PolicyHistory
from kafka_rebalance_operator.kafka_io import KafkaUnavailable, Observation, TooManyPartitions
from kafka_rebalance_operator.lag import (
    OK,
    UNKNOWN,
    Layout,
    PolicyLags,
    PolicyOffsets,
    classify_all,
)
from kafka_rebalance_operator.members import PodSummary, select_members
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, parse_iso
from kafka_rebalance_operator.policy import PolicyError, PolicySpec, parse_spec
from kafka_rebalance_operator.ports import Observer, Ports, SecretMissing, StoreError
from kafka_rebalance_operator.settings import OperatorSettings

PLAN_CLUSTER_NOT_CONFIGURED = "PlanClusterNotConfigured"


@dataclass(frozen=True)
class Observed:
    spec: PolicySpec
    observation: Observation  # its offsets are a `PolicyOffsets` (columnar)
    lags: PolicyLags  # lag state, lag and time lag of every partition, columnar
    members: list[PodSummary]  # Running and Ready pods the selector matches
    current: CurrentState  # what members act on: the ConfigMaps, corrected (`ownership`)
    lingering: dict[str, MemberDocument]  # assign mode: running non-members still holding some
    epoch: int  # the highest epoch in status, any document, memory or sidecar commit
    last_applied_at: float | None  # when the last epoch was applied (status or memory)
    spec_changed: bool  # the spec changed since the last poll reported on it
    handoff: Pending | None  # assign mode: the revoke of the applied epoch, if any
    mismatch: str | None  # the group's protocol does not fit spec.apply.mode
    inherited: bool  # documents in place were written by an earlier incarnation of the policy
    unwritten: list[str]  # members whose ConfigMap does not show what they act on
    # group mode: members holding partitions outside the consumer group (sidecars still in
    # assign mode after a switch of apply.mode): their partitions move by revoke and acknowledge
    outside_group: tuple[str, ...] = ()

    @property
    def two_step(self) -> bool:
        """Hand-overs revoke first and grant after an acknowledgement (assign mode, and group
        mode while a member holds partitions outside the group)."""
        return self.spec.apply_mode == "assign" or bool(self.outside_group)

    @property
    def member_names(self) -> list[str]:
        return [m.name for m in self.members]

    @property
    def offsets(self) -> PolicyOffsets:
        return self.observation.offsets  # type: ignore[return-value]

    @property
    def total_lag(self) -> int:
        return self.lags.total

    @property
    def unknown(self) -> int:
        """Partitions whose lag could not be read this poll."""
        return self.lags.count(UNKNOWN)

    def owners(self) -> dict[str, Mapping[str, list[int]]]:
        """The partitions each member's ConfigMap gives it now."""
        return {m: d.partitions for m, d in self.current.by_member.items()}


def observe(
    ctx: PolicyContext,
    pods: Sequence[PodSummary],
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> Observed:
    spec = admit(ctx, settings)
    observation, offsets = _read_group(ctx, spec, memory, ports, settings)
    lags = _lags(spec, offsets, memory, now)
    current = _read_documents(ctx, memory, ports)
    members = select_members(spec, pods, admitted=current.by_member)
    present = {m.name for m in members}
    committers = ownership.last_committers(offsets)
    lingering: dict[str, MemberDocument] = {}
    if spec.apply_mode == "assign":
        current = ownership.with_commits(current, spec.group_id, present, committers)
        lingering = ownership.lingering(current, present, pods)
    applied_at = [parse_iso(ctx.status.get("lastAppliedTime")), memory.applied_at]
    reported = memory.reported_generation
    if reported is None:
        reported = ctx.status.get("observedGeneration")
    kind, kind_state = observation.group_type or (None, None)
    outside = ownership.outside_group(
        spec.apply_mode, observation.group, current, present, committers
    )
    return Observed(
        spec=spec,
        observation=observation,
        lags=lags,
        members=members,
        current=current,
        lingering=lingering,
        epoch=max(
            _status_epoch(ctx),
            current.epoch,
            memory.applied_epoch,
            max((c.epoch for c in committers.values()), default=0),
        ),
        last_applied_at=max((t for t in applied_at if t is not None), default=None),
        spec_changed=reported is not None and reported != ctx.generation,
        handoff=_handoff(
            spec, current, sorted(present | set(lingering)), observation, now, outside
        ),
        mismatch=protocol.mismatch(
            spec.apply_mode,
            spec.group_id,
            observation.group,
            kind,
            kind_state,
            server_assignor=observation.assignor,
        ),
        unwritten=ownership.unwritten(current, ctx.name),
        inherited=any(d.policy_uid and d.policy_uid != ctx.uid for d in current.by_member.values()),
        outside_group=outside,
    )


def _read_group(
    ctx: PolicyContext,
    spec: PolicySpec,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
) -> tuple[Observation, PolicyOffsets]:
    """The group's topics, offsets and membership from Kafka, or the PollFailure that names why
    not. A policy over the partition cap keeps nothing per partition; an unreachable cluster
    gets a fresh client next poll (the cluster may have moved)."""
    observer = _observer(spec, ctx, memory, ports, settings)
    identify(ctx, spec, observer, memory, ports)
    try:
        observation = observer.observe(
            spec.group_id,
            spec.topics,
            spec.topic_pattern,
            describe=settings.describe_group,
            kip848_group=spec.apply_mode == "broker",
            max_partitions=settings.max_partitions_per_policy,
        )
    except TooManyPartitions as error:
        memory.history = None  # nothing per partition is kept for a policy over the cap
        memory.telemetry = None
        raise PollFailure("TooManyPartitions", str(error)) from None
    except KafkaUnavailable as error:
        memory.close()  # a fresh client next poll: the cluster may have moved
        raise PollFailure("KafkaUnreachable", str(error)) from None
    if observation.errors:
        ports.metrics.partitions_unread(ctx.namespace, ctx.name, len(observation.errors))
    if not observation.topics:
        pattern = spec.topic_pattern.pattern if spec.topic_pattern is not None else ""
        wanted = ", ".join(spec.topics) if spec.topics else f"pattern {pattern}"
        raise PollFailure("TopicsNotFound", f"no topic found for {wanted}")
    if not isinstance(observation.offsets, PolicyOffsets):
        observation.offsets = PolicyOffsets.from_mapping(observation.topics, observation.offsets)
    return observation, observation.offsets


def _read_documents(ctx: PolicyContext, memory: PolicyMemory, ports: Ports) -> CurrentState:
    """The members' documents as the ConfigMaps hold them, merged with what this process wrote
    and has not read back yet."""
    try:
        current = assignment_doc.read_current(ports.configmaps.list(ctx.namespace, ctx.name))
    except StoreError as error:
        raise PollFailure("ApplyFailed", f"listing ConfigMaps: {error}") from None
    current = ownership.with_memory(current, memory.documents)
    ownership.remember_read(memory.documents, current)
    return current


def _status_epoch(ctx: PolicyContext) -> int:
    shown = ctx.status.get("epoch")
    return shown if isinstance(shown, int) else 0


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


def _observer(
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


def _lags(spec: PolicySpec, offsets: PolicyOffsets, memory: PolicyMemory, now: float) -> PolicyLags:
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


def _handoff(
    spec: PolicySpec,
    current: CurrentState,
    holders: list[str],
    observation: Observation,
    now: float,
    outside: tuple[str, ...] = (),
) -> Pending | None:
    """Assign mode: who has not yet acknowledged the revoke of the applied epoch (members, and
    running pods that left with partitions). Group mode likewise while members hold partitions
    outside the consumer group or a revoke written for them is in flight; a member that has
    joined the group needs no acknowledgement (`ownership.outside_group`)."""
    top = {m: d for m, d in current.by_member.items() if d.epoch == current.epoch}
    fenced: frozenset[str] = frozenset()
    if spec.apply_mode == "group":
        if not outside and not any(d.revoking for d in top.values()):
            return None
        fenced = ownership.in_group(observation.group)
    elif spec.apply_mode != "assign":
        return None
    started_at = min((parse_iso(d.generated_at) or now for d in top.values()), default=None)
    return handoff.pending(
        top,
        holders,
        observation.offsets,
        now,
        started_at,
        spec.handoff_timeout,
        fenced,
    )
