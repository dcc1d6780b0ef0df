"""Observe: what is true now. The policy's spec, the group's offsets and lag in Kafka, the
members (Ready pods), the plan in place (the ConfigMaps, corrected by `ownership` where they no
longer show what members act on), pods that linger with partitions, and a hand-over in flight.

Reads only; the state it updates is the policy's columnar history (rates, end-offset histories,
the lags last reported: `history.PolicyHistory`) and the remembered documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafka_rebalance_operator import handoff, ownership, protocol
from kafka_rebalance_operator.handoff import Pending
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable, Observation, TooManyPartitions
from kafka_rebalance_operator.kube import assignment_doc
from kafka_rebalance_operator.kube.assignment_doc import CurrentState, MemberDocument
from kafka_rebalance_operator.kube.members import PodSummary, select_members
from kafka_rebalance_operator.lag import UNKNOWN, PolicyLags, PolicyOffsets
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.connect import admit, identify, kafka_client, track_lags
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, parse_iso
from kafka_rebalance_operator.phases.group_config import keep_heartbeat
from kafka_rebalance_operator.policy import PolicySpec
from kafka_rebalance_operator.ports import Ports, StoreError
from kafka_rebalance_operator.settings import OperatorSettings


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
    lags = track_lags(spec, offsets, memory, now)
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
    observer = kafka_client(spec, ctx, memory, ports, settings)
    identify(ctx, spec, observer, memory, ports)
    keep_heartbeat(spec, observer, memory)
    try:
        observation = observer.observe(
            spec.group_id,
            spec.topics,
            spec.topic_pattern,
            describe=True,  # group mode: the actual assignment, for verify
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
