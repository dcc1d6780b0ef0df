"""Share groups (KIP-932) as a group kind (`spec.groupType: share`; docs/share-groups.md).

Observe describes the group (ShareGroupDescribe: its consumers, their subscriptions and the
partitions each holds; the operator's own trigger member left out), reads the log ends of the
subscribed topics (rates, as for every kind) and each share-partition's backlog
(DescribeShareGroupOffsets: the broker's lag, else log end minus the start offset). Plan gives
every partition members in proportion to its load (rate plus backlog over the drain time)
against their capacity (`kafka_rebalance_assignors.share`, pure). Decide is the common one; a
plan reaches the group through the plan topic (`plan_topic`, record kind "share") and a trigger
(a member joins and leaves: two group epoch bumps, `share_group.trigger`). Each poll's report
writes a telemetry row per share-partition (`telemetry.share_rows`) for the pipeline.

Invariants: nothing is published and nothing triggered while the brokers' share assignor is not
the plug-in's (the policy is Stalled naming the assignor in use); a partition whose backlog is
unknown counts as having none; members weigh 1 (share consumers are not matched to pods).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_assignors.model import PlanInputError
from kafka_rebalance_assignors.share import plan_share

from kafka_rebalance_operator import planning, share_planning, telemetry
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.groups import plan_topic
from kafka_rebalance_operator.kafka import share_group
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable, TooManyPartitions
from kafka_rebalance_operator.kafka.share_group import ShareGroup, TopicPartition
from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.lag import PolicyOffsets
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases import report
from kafka_rebalance_operator.phases.connect import admit, identify, kafka_client, track_lags
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, iso
from kafka_rebalance_operator.phases.decide import Action, Decision, PlanFacts, Stop, Wait
from kafka_rebalance_operator.phases.group_config import keep_heartbeat
from kafka_rebalance_operator.planning import Proposal
from kafka_rebalance_operator.policy import PolicySpec
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

NOT_PLAN_FOLLOWING = "AssignorNotPlanFollowing"
TRIGGER_REFUSED = "TriggerRefused"
# The share trigger's join recomputes in its own heartbeat, and the share assignor cannot tell
# a record is on its way: the write is given this long to reach the brokers' readers first.
PLAN_SETTLE_S = 1.0
MAX_PER_PARTITION_TEXT = 1000  # status.share.consumersPerPartition is cut to this many characters


@dataclass(frozen=True)
class ShareObserved:
    spec: PolicySpec
    group: ShareGroup
    partitions: dict[str, int]  # topic -> partitions, the topics the group reads
    rates: dict[TopicPartition, float]  # records/s produced
    backlog: dict[TopicPartition, int]  # records not yet finished with (known ones only)
    epoch: int  # the highest epoch in status or memory
    last_applied_at: float | None
    spec_changed: bool
    published_hash: str | None = None  # the plan this policy last published for the group
    published_plan: dict[str, dict[str, list[int]]] | None = None
    log_ends: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def rates_known(self) -> bool:
        """Some partition's production rate is measured (it takes two polls' log ends)."""
        return bool(self.rates)

    @property
    def member_ids(self) -> list[str]:
        return self.group.member_ids()

    @property
    def total_backlog(self) -> int:
        return int(sum(self.backlog.values()))


@dataclass(frozen=True)
class SharePlanned:
    assignment: dict[str, dict[str, list[int]]]  # member id -> topic -> partitions
    hash: str
    moves: int
    peak_before: float | None  # None: some partition has no member now
    peak_after: float | None
    runs_already: bool  # the group runs exactly this plan now
    members_per_partition: dict[TopicPartition, int] = field(default_factory=dict)
    proposal: Proposal | None = None


def observe(
    ctx: PolicyContext,
    pods: Sequence[PodSummary],
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> ShareObserved:
    spec = admit(ctx, settings)
    observer = kafka_client(spec, ctx, memory, ports, settings)
    identify(ctx, spec, observer, memory, ports)
    keep_heartbeat(spec, observer, memory)
    group = plan_topic.described(
        ctx, memory, ports, lambda: observer.describe_share_group(spec.group_id)
    )
    if group is None:
        raise PollFailure(
            "ShareGroupNotFound",
            f"no share group {spec.group_id} (not started, or a consumer or streams group)",
            stalled=False,
        )
    refusal = share_group.plugin_missing(group)
    if refusal is not None:
        raise PollFailure(NOT_PLAN_FOLLOWING, refusal)
    topics = list(spec.topics or group.subscribed_topics())
    if not topics:
        raise PollFailure(
            "TopicsNotFound",
            f"share group {spec.group_id} has no member subscribed to a topic yet",
            stalled=False,
        )
    try:
        observation = observer.observe(
            spec.group_id, topics, None, max_partitions=settings.max_partitions_per_policy
        )
        counts = dict(observation.topics)
        offsets = observation.offsets
        if not isinstance(offsets, PolicyOffsets):
            offsets = PolicyOffsets.from_mapping(observation.topics, offsets)
        starts = observer.share_offsets(
            spec.group_id, {t: list(range(n)) for t, n in counts.items()}
        )
    except TooManyPartitions as error:
        memory.history = None
        raise PollFailure("TooManyPartitions", str(error)) from None
    except KafkaUnavailable as error:
        memory.close()
        raise PollFailure("KafkaUnreachable", str(error)) from None
    track_lags(spec, offsets, memory, now)  # keeps the end-offset history the rates come from
    rates = memory.history.produce_rates() if memory.history is not None else {}
    ends = {key: end for key in offsets if (end := offsets[key].log_end) is not None}
    observed = ShareObserved(
        spec,
        group,
        counts,
        {key: float(rate) for key, rate in rates.items() if rate is not None},
        share_group.share_backlog(starts, ends),
        **dataclasses.asdict(plan_topic.in_place(ctx, memory, spec.group_id)),
        log_ends=ends,
    )
    plan_topic.count_bumps(ctx, group, "share", memory, ports)
    return observed


def wait(observed: ShareObserved) -> Wait | None:
    if observed.group.consumers():
        return None
    return Wait(
        Stop.NO_MEMBERS,
        Health(
            False,
            "NoMembers",
            f"share group {observed.spec.group_id} has no consumer; the published plan "
            f"(epoch {observed.epoch}) is kept",
            reconciling=True,
        ),
    )


def plan(
    ctx: PolicyContext,
    observed: ShareObserved,
    memory: PolicyMemory,
    settings: OperatorSettings,
    now: float,
) -> SharePlanned:
    spec = observed.spec
    request = share_planning.share_request(
        observed.group,
        observed.partitions,
        observed.rates,
        observed.backlog,
        drain_seconds=spec.target_drain_seconds,
        max_moves=spec.move_budget(sum(observed.partitions.values())),
    )
    try:
        result = plan_share(request)
    except PlanInputError as error:
        raise PollFailure("PlanFailed", f"planning share group {spec.group_id}: {error}") from None
    assignment = share_planning.record_assignment(result)
    planned = SharePlanned(
        assignment=assignment,
        hash=planning.plan_hash(assignment),
        moves=result.moves,
        peak_before=result.peak_before,
        peak_after=result.peak_after,
        runs_already=not observed.group.members_off_plan(assignment),
        members_per_partition=dict(result.members_per_partition),
    )
    if not spec.needs_approval:
        return planned
    kept = plan_topic.kept_proposal(
        ctx, memory, observed.published_hash, observed.partitions, observed.member_ids
    )
    if kept is None:
        return planned
    return SharePlanned(
        assignment=kept.assignment,
        hash=kept.hash,
        moves=kept.moves,
        peak_before=kept.before,
        peak_after=kept.after,
        runs_already=not observed.group.members_off_plan(kept.assignment),
        members_per_partition=_per_partition(kept.assignment),
        proposal=kept,
    )


def _per_partition(assignment: dict[str, dict[str, list[int]]]) -> dict[TopicPartition, int]:
    counts: dict[TopicPartition, int] = {}
    for topics in assignment.values():
        for topic, parts in topics.items():
            for p in parts:
                counts[(topic, p)] = counts.get((topic, p), 0) + 1
    return counts


def facts(ctx: PolicyContext, observed: ShareObserved, planned: SharePlanned) -> PlanFacts:
    """The plan in place is the published one, or the new plan itself when the group runs it
    already. A partition without a member now (no peak before), or a spec change, makes the
    plan structural. Until a production rate is measured, a plan sees backlog only and is
    undone by the first plan that sees the rates: it is held (MeasuringLoad)."""
    applied = planned.hash if planned.runs_already else observed.published_hash
    structural = planned.peak_before is None or observed.spec_changed
    held = None
    if not observed.rates_known and not structural:
        held = (
            "MeasuringLoad",
            "a share plan waits for the partitions' production rates (a second poll)",
        )
    return PlanFacts(
        new_hash=planned.hash,
        applied_hash=applied,
        epoch=observed.epoch,
        last_applied_at=observed.last_applied_at,
        ratio_before=planned.peak_before,
        ratio_after=planned.peak_after,
        moves=planned.moves,
        structural=structural,
        held=held,
    )


def carry_out(
    ctx: PolicyContext,
    observed: ShareObserved,
    planned: SharePlanned,
    decision: Decision,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> plan_topic.Delivered:
    group = observed.group
    topics = sorted(observed.partitions)

    def trigger() -> None:
        """A member joins and leaves (`share_group.trigger`); a refusal is Stalled."""
        assert memory.observer is not None
        try:
            memory.observer.trigger_share_group(group.group_id, topics)
        except share_group.ShareGroupError as error:
            raise PollFailure(
                TRIGGER_REFUSED,
                f"share group {group.group_id}: the coordinator refused the recompute "
                f"trigger: {error}",
            ) from None
        except KafkaUnavailable as error:
            raise PollFailure("TriggerFailed", str(error)) from None

    target = plan_topic.Target(
        "share",
        group,
        observed.member_ids,
        observed.published_hash,
        observed.published_plan,
        observed.epoch,
        trigger,
        settle_s=PLAN_SETTLE_S,
    )
    return plan_topic.carry_out(
        ctx,
        target,
        planned,
        lambda: plan_topic.offer(
            planned.proposal,
            planned.hash,
            planned.assignment,
            planned.moves,
            planned.peak_before,
            planned.peak_after,
            memory,
            now,
        ),
        decision,
        observed.spec.mode,
        observed.spec.poll_interval,
        memory,
        ports,
        settings,
        now,
    )


def consumers_per_partition(counts: dict[TopicPartition, int], partitions: dict[str, int]) -> str:
    """Members per partition as `topic:3,1,1,1` (first partition first), topics by name."""
    text = " ".join(
        f"{topic}:" + ",".join(str(counts.get((topic, p), 0)) for p in range(n))
        for topic, n in sorted(partitions.items())
    )
    return (
        text if len(text) <= MAX_PER_PARTITION_TEXT else text[: MAX_PER_PARTITION_TEXT - 3] + "..."
    )


def share_status(
    observed: ShareObserved, per_partition: dict[TopicPartition, int], memory: PolicyMemory
) -> dict[str, Any]:
    group = observed.group
    result: dict[str, Any] = {
        "groupEpoch": group.group_epoch,
        "assignmentEpoch": group.assignment_epoch,
        "assignor": group.assignor,
        "partitions": sum(observed.partitions.values()),
        "backlog": observed.total_backlog,
        "consumersPerPartition": consumers_per_partition(per_partition, observed.partitions),
        "triggers": memory.triggers,
    }
    if memory.last_plan_bumps is not None:
        result["lastPlanEpochBumps"] = memory.last_plan_bumps
    return result


def _report_fields(
    observed: ShareObserved,
    per_partition: dict[TopicPartition, int],
    memory: PolicyMemory,
    epoch: int,
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "epoch": epoch,
        "members": len(observed.group.consumers()),
        "totalLag": observed.total_backlog,
        "share": share_status(observed, per_partition, memory),
    }
    if memory.published_hash is not None and memory.published_group == observed.spec.group_id:
        fields["appliedPlan"] = memory.published_hash
        if memory.applied_at is not None:
            fields["lastAppliedTime"] = iso(memory.applied_at)
    return fields


def _telemetry(
    ctx: PolicyContext,
    observed: ShareObserved,
    epoch: int,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> None:
    """The poll's share rows (`telemetry.share_rows`): every share-partition's backlog, rate
    and members, for the pipeline's backtest. Share consumers report no throughput to any
    admin API, so no `share-member` row is written."""
    if not ports.telemetry.enabled:
        return
    ports.telemetry.emit(
        telemetry.share_rows(
            ts_ms=int(now * 1000),
            cluster=settings.cluster,
            namespace=ctx.namespace,
            policy=ctx.name,
            group=observed.spec.group_id,
            partitions=observed.partitions,
            log_ends=observed.log_ends,
            backlog=observed.backlog,
            rates=observed.rates,
            holders=observed.group.holders(),
            epoch=epoch,
        )
    )


def waited(
    ctx: PolicyContext,
    observed: ShareObserved,
    wait: Wait,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> report.PollOutcome:
    fields = _report_fields(observed, {}, memory, observed.epoch)
    _telemetry(ctx, observed, observed.epoch, ports, settings, now)
    return plan_topic.outcome(ctx, wait.health, fields, [], wait.stop, memory, ports, now)


def polled(
    ctx: PolicyContext,
    observed: ShareObserved,
    planned: SharePlanned,
    decision: Decision,
    applied: plan_topic.Delivered,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> report.PollOutcome:
    fields = _report_fields(
        observed, _per_partition(observed.group.assignment()), memory, applied.epoch
    )
    _telemetry(ctx, observed, applied.epoch, ports, settings, now)
    offered, events, note = report.proposal_fields(
        ctx, applied.proposal, applied.epoch, decision, settings
    )
    fields.update(offered)
    if applied.published and decision.action is Action.APPLY:
        events.append(
            (
                "Normal",
                "PlanApplied",
                f"epoch {applied.epoch}: share plan {planned.hash} published, {planned.moves} "
                "member-partition moves" + ("; recompute triggered" if applied.triggered else ""),
            )
        )
    health = plan_topic.health(
        ctx,
        observed.group,
        len(observed.group.consumers()),
        decision,
        note,
        memory,
        observed.spec.poll_interval,
        now,
    )
    return plan_topic.outcome(ctx, health, fields, events, decision.action, memory, ports, now)


class ShareKind:
    """The share kind (`GroupKind`): this module's steps."""

    name = "share"
    observe = staticmethod(observe)
    wait = staticmethod(wait)
    plan = staticmethod(plan)
    facts = staticmethod(facts)
    carry_out = staticmethod(carry_out)
    waited = staticmethod(waited)
    report = staticmethod(polled)


KIND = ShareKind()
