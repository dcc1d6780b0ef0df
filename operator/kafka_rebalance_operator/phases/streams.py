"""One poll of a streams-group policy (`spec.groupType: streams`, KIP-1071; docs/streams.md):
describe the group, read its input offsets and changelog ends, plan its active tasks
(`streams_tasks`, pure), publish the plan record (`kind: "streams"`) and trigger the
coordinator by toggling a reserved tag in the group's assignment configs (`streams_group`),
then report.

Streams members are Kafka Streams clients, not pods, and the brokers apply the plan, so this
path writes no ConfigMaps and has no hand-over: a plan is published whole, and the group
follows it at its next assignment.

Invariants: nothing is published and nothing triggered while the group's task assignor is not
the plug-in's (the policy is Stalled naming the assignor in use); a trigger is sent once per
published plan, and again only when the group still does not follow it a poll interval after
the last one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kafka_rebalance_assignors as assignors
from kafka_rebalance_common.replanning import Action
from kafka_rebalance_common.wire import plan_record

from kafka_rebalance_operator import planning, streams_group, streams_tasks
from kafka_rebalance_operator.capacity import confirmed_owners
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.kafka_io import KafkaUnavailable, TooManyPartitions
from kafka_rebalance_operator.lag import OK, PolicyLags, PolicyOffsets
from kafka_rebalance_operator.members import PodSummary, resolve_weights
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases import report
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, iso
from kafka_rebalance_operator.phases.decide import Stop
from kafka_rebalance_operator.phases.observe import _lags, _observer, admit, identify
from kafka_rebalance_operator.phases.publish import value_headers
from kafka_rebalance_operator.policy import PolicySpec
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.selectors import matches
from kafka_rebalance_operator.settings import OperatorSettings
from kafka_rebalance_operator.streams_group import StreamsGroup

log = logging.getLogger(__name__)

MAX_STATUS_MEMBERS = 50  # status.streams.members lists at most this many (CRD maxItems)
NOT_PLAN_FOLLOWING = "AssignorNotPlanFollowing"
TRIGGER_REFUSED = "TriggerRefused"
READY_REASONS: dict[Action | Stop, str] = {
    Action.APPLY: "PlanPublished",
    Action.NOOP: "Following",
    Action.HOLD: "Holding",
    Action.OBSERVE: "Observing",
    Stop.NO_MEMBERS: "NoMembers",
}


@dataclass(frozen=True)
class StreamsObserved:
    spec: PolicySpec
    group: StreamsGroup
    subtopologies: tuple[streams_tasks.SubtopologyTopics, ...]
    partitions: dict[str, int]  # topic -> partitions (sources and changelogs)
    lag: dict[streams_tasks.Task, float | None]
    rate: dict[streams_tasks.Task, float | None]
    changelog: dict[streams_tasks.Task, int]
    offsets: PolicyOffsets | None = None  # input and changelog partitions, columnar
    lags: PolicyLags | None = None

    @property
    def counts(self) -> dict[str, int]:
        return streams_tasks.task_counts(self.subtopologies, self.partitions)

    @property
    def total_lag(self) -> int:
        return int(sum(v for v in self.lag.values() if v is not None))


def assignor_refusal(group: StreamsGroup) -> str | None:
    """Why the group cannot follow a plan (the message of a Stalled policy), or None. A broker
    that does not say (StreamsGroupDescribe version 0) is not refused here: the trigger's
    config change is then the test."""
    if group.assignor is None or group.assignor in streams_group.PLAN_ASSIGNORS:
        return None
    return (
        f"group {group.group_id} uses the task assignor {group.assignor!r}, not "
        f"{streams_group.PLAN_ASSIGNOR!r}: load the broker plug-in and set the group config "
        f"{streams_group.ASSIGNOR_CONFIG}={streams_group.PLAN_ASSIGNOR} (docs/streams.md)"
    )


def _observe(
    ctx: PolicyContext, memory: PolicyMemory, ports: Ports, settings: OperatorSettings, now: float
) -> StreamsObserved:
    spec = admit(ctx, settings)
    observer = _observer(spec, ctx, memory, ports, settings)
    identify(ctx, spec, observer, memory, ports)
    try:
        group = observer.describe_streams_group(spec.group_id)
    except KafkaUnavailable as error:
        memory.close()
        # no plan without its members: nothing is published this poll, and that is counted
        ports.metrics.plan_publish_skipped(ctx.namespace, ctx.name, "membership_unknown")
        raise PollFailure("KafkaUnreachable", str(error)) from None
    if group is None:
        raise PollFailure(
            "StreamsGroupNotFound",
            f"no streams group {spec.group_id} (not started, or a consumer or classic group)",
            stalled=False,
        )
    refusal = assignor_refusal(group)
    if refusal is not None:
        raise PollFailure(NOT_PLAN_FOLLOWING, refusal)
    if not group.subtopologies:
        raise PollFailure(
            "TopologyNotReady",
            f"streams group {spec.group_id} ({group.state}) has no initialised topology yet",
            stalled=False,
        )
    subtopologies = tuple(
        streams_tasks.SubtopologyTopics(s.subtopology_id, s.source_topics, s.changelog_topics)
        for s in group.subtopologies
    )
    topics = sorted({t for s in subtopologies for t in s.source_topics + s.changelog_topics})
    try:
        observation = observer.observe(
            spec.group_id, topics, None, max_partitions=settings.max_partitions_per_policy
        )
    except TooManyPartitions as error:
        memory.history = None
        raise PollFailure("TooManyPartitions", str(error)) from None
    except KafkaUnavailable as error:
        memory.close()
        raise PollFailure("KafkaUnreachable", str(error)) from None
    offsets = observation.offsets
    if not isinstance(offsets, PolicyOffsets):
        offsets = PolicyOffsets.from_mapping(observation.topics, offsets)
    lags = _lags(spec, offsets, memory, now)
    rates = memory.history.produce_rates() if memory.history is not None else {}
    lag, rate = streams_tasks.task_loads(
        subtopologies, observation.topics, lags.lag_values(), rates
    )
    ends = {key: offsets[key].log_end for key in offsets}
    changelog = streams_tasks.changelog_sizes(subtopologies, observation.topics, ends)
    return StreamsObserved(
        spec, group, subtopologies, dict(observation.topics), lag, rate, changelog, offsets, lags
    )


def member_pods(group: StreamsGroup, pods: Sequence[PodSummary]) -> dict[str, PodSummary]:
    """Streams member id -> its pod, for weights: the pod named by the member's instance id,
    or by its client id (Kafka Streams' `client.id`, which its consumers extend with
    "-StreamThread-N-consumer"). Members without a pod are absent."""
    by_name = {pod.name: pod for pod in pods}
    found: dict[str, PodSummary] = {}
    for m in group.members:
        configured = m.client_id.split("-StreamThread-", 1)[0]
        candidates = [m.instance_id or "", m.client_id, configured]
        pod = next((by_name[c] for c in candidates if c in by_name), None)
        if pod is not None:
            found[m.member_id] = pod
    return found


def member_weights(
    spec: PolicySpec,
    group: StreamsGroup,
    pods: Sequence[PodSummary],
    adaptive: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Capacity weight per streams member: weightFrom adaptive (`adaptive`, by member id) or
    resources, and spec.members.weights rules over them, applied to the member's pod
    (`member_pods`) among the pods the selector matches; a member without one weighs its
    adaptive weight, else 1.0.

    Kafka decides membership here, not the pod's phase or readiness: a streams member is
    planned from the poll it appears in, so its pod's weight applies from that poll too (a
    pod not yet Ready, or restoring state behind a failing probe, is still that member).
    Only a pod being deleted is left out."""
    matched = {
        pod.name
        for pod in pods
        if pod.name and not pod.deleting and matches(spec.selector, pod.labels)
    }
    by_member = {m: pod for m, pod in member_pods(group, pods).items() if pod.name in matched}
    measured = adaptive or {}
    by_pod = {pod.name: measured[m] for m, pod in by_member.items() if m in measured}
    weights = resolve_weights(spec, by_member.values(), by_pod)
    result = {m: weights.get(pod.name, 1.0) for m, pod in by_member.items()}
    for m in group.members:
        if m.member_id not in result and spec.weight_from == "adaptive":
            result[m.member_id] = measured.get(m.member_id, 1.0)
    return result


def adaptive_weights(
    observed: StreamsObserved, memory: PolicyMemory, settings: OperatorSettings, now: float
) -> dict[str, float] | None:
    """weightFrom adaptive: each member's measured capacity (`capacity.CapacityEstimator`),
    from the committed-offset advance of its active tasks' input partitions while
    backlogged; ownership counts only while the group is Stable. None otherwise."""
    spec, group = observed.spec, observed.group
    if spec.weight_from != "adaptive" or observed.offsets is None or observed.lags is None:
        return None
    inputs = {s.subtopology_id: s.source_topics for s in observed.subtopologies}
    owners = {
        (topic, p): m.member_id
        for m in group.members
        for s, parts in m.active.items()
        for p in parts
        for topic in inputs.get(s, ())
        if p < observed.partitions.get(topic, 0)
    }
    offsets, lags = observed.offsets, observed.lags
    committed: dict[tuple[str, int], int] = {}
    lag: dict[tuple[str, int], int] = {}
    for i, key in enumerate(lags.layout.keys()):
        if key in owners and lags.states[i] == OK and offsets.committed[i] >= 0:
            committed[key], lag[key] = int(offsets.committed[i]), int(lags.lags[i])
    estimator = memory.capacity
    estimator.settle_s = spec.poll_interval
    members = [m.member_id for m in group.members]
    estimator.observe(
        now, confirmed_owners(owners, owners, group.state == "Stable"), committed, lag, members
    )
    demand = memory.history.total_produce() if memory.history is not None else 0.0
    return estimator.weights(members, demand)


def _plan(observed: StreamsObserved, weights: Mapping[str, float]) -> streams_tasks.TaskPlan:
    spec, group = observed.spec, observed.group
    counts = observed.counts
    options = assignors.PlanOptions(
        count_balance=spec.count_balance,
        min_improvement=spec.min_improvement,
        load_model=spec.load_model or None,
        target_drain_seconds=spec.target_drain_seconds,
    )
    try:
        return streams_tasks.plan_tasks(
            streams_tasks.TaskPlanInput(
                counts=counts,
                members=[m.member_id for m in group.members],
                active=group.active(),
                standby=group.standbys(),
                lag=observed.lag,
                rate=observed.rate,
                changelog=observed.changelog,
                strategy=spec.strategy,
                options=options,
                budget=spec.move_budget(sum(counts.values())),
                drain_seconds=spec.target_drain_seconds,
                weights=weights,
            )
        )
    except assignors.PlanInputError as error:
        raise PollFailure(
            "PlanFailed", f"planning the tasks of {group.group_id}: {error}"
        ) from None


def poll(
    ctx: PolicyContext,
    pods: Sequence[PodSummary],
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> report.PollOutcome:
    """Observe, plan, decide, publish and trigger, report (raises PollFailure)."""
    observed = _observe(ctx, memory, ports, settings, now)
    spec, group = observed.spec, observed.group
    _count_bumps(ctx, observed, memory, ports)
    if not group.members:
        return _report(ctx, observed, None, memory, ports, now, Stop.NO_MEMBERS, "no member yet")
    adaptive = adaptive_weights(observed, memory, settings, now)
    plan = _plan(observed, member_weights(spec, group, pods, adaptive))
    plan_hash = planning.plan_hash(plan.assignment)
    publish, trigger, why = _decide(observed, plan, plan_hash, memory, settings, now)
    if publish and not (spec.mode == "enforce" and not spec.needs_approval):
        publish = trigger = False
        why = (
            f"plan {plan_hash} not published: rebalance mode {spec.mode}, approval {spec.approval}"
        )
    action = Action.HOLD if spec.mode == "enforce" else Action.OBSERVE
    if publish:
        _publish(ctx, observed, plan, plan_hash, memory, ports, settings, now, trigger)
        why = f"plan {plan_hash} published ({len(plan.moves)} task moves)" + (
            "; recompute triggered" if trigger else ""
        )
        action = Action.APPLY
    elif trigger and spec.mode == "enforce":  # the published plan, not yet run: again
        _trigger(ctx, group, memory, ports, now)
        action = Action.NOOP
    elif memory.published_hash == plan_hash:
        action = Action.NOOP
    held = _shape(why) if action in (Action.HOLD, Action.OBSERVE) and plan.moves else None
    if held is not None and held != memory.streams_held:  # once per kind of reason
        log.info(
            "%s/%s: streams plan %s (%d task moves) held: %s",
            ctx.namespace,
            ctx.name,
            plan_hash,
            len(plan.moves),
            why,
        )
    memory.streams_held = held
    return _report(ctx, observed, plan, memory, ports, now, action, why)


def _shape(message: str) -> str:
    """A hold message without its figures and plan hashes: the kind of reason it gives."""
    return re.sub(r"[0-9a-f]{20}|[0-9.]+", "#", message)


def _decide(
    observed: StreamsObserved,
    plan: streams_tasks.TaskPlan,
    plan_hash: str,
    memory: PolicyMemory,
    settings: OperatorSettings,
    now: float,
) -> tuple[bool, bool, str]:
    """(publish, trigger, why).

    - While the group does not run the published plan: trigger again a poll interval after
      the last trigger (the record is in place; the recompute did not take), unless a new plan
      replaces it (past the cooldown).
    - The published plan is republished (no trigger) every settings.plan_refresh_s.
    - A new plan is published and triggered when it differs from what the group runs and
      either places unowned tasks, or lowers the peak task load by spec.minImprovement past
      the cooldown, and (weightFrom adaptive) some member's capacity is measured.
    - A new plan the group runs already is published without a trigger, so the published
      plan is always the one the group runs and its record names the current members."""
    spec, group = observed.spec, observed.group
    mine = memory.published_group == spec.group_id
    published = memory.streams_plan if mine else None
    cooled = memory.published_at is None or now - memory.published_at >= spec.cooldown
    if published is not None and group.converged_to(published):
        if memory.published_hash == plan_hash or not cooled:
            last = memory.streams_triggered_at or memory.published_at or now
            if now - last >= spec.poll_interval:
                return False, True, "the group does not run the published plan yet: triggered again"
            return False, False, "waiting for the group to run the published plan"
    elif mine and memory.published_hash == plan_hash:
        if now - (memory.published_at or now) >= settings.plan_refresh_s:
            return True, False, "refresh"
        return False, False, f"the group runs the published plan {plan_hash}"
    if not group.converged_to(plan.assignment):
        # the group runs this plan already (the plug-in's fallback placed a changed membership
        # as the plan would): record it, untriggered, so the record names the members that run
        # it and the published plan is the one the group runs
        return True, False, "the group runs the plan already; recorded"
    owned = {
        (s, p) for tasks in group.active().values() for s, parts in tasks.items() for p in parts
    }
    unowned = any((s, p) not in owned for s, n in observed.counts.items() for p in range(n))
    if unowned:
        return True, True, "tasks without an owner"
    if spec.weight_from == "adaptive" and not memory.capacity.measured:
        # weights of 1 for want of a measurement: a plan made on them is undone by the first
        # plan made on measured capacity (KIP-794's flapping)
        return False, False, "a load-following plan waits for the first capacity measurement"
    if plan.peak_after > plan.peak_before * (1.0 - spec.min_improvement):
        return (
            False,
            False,
            (
                f"the plan lowers the peak task load per unit of capacity "
                f"{plan.peak_before:.0f} -> {plan.peak_after:.0f}, less than minImprovement "
                f"{spec.min_improvement}"
            ),
        )
    if not cooled:
        return False, False, "cooldown"
    return True, True, "improvement"


def _publish(
    ctx: PolicyContext,
    observed: StreamsObserved,
    plan: streams_tasks.TaskPlan,
    plan_hash: str,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
    trigger: bool,
) -> None:
    group = observed.group
    group_id = observed.spec.group_id
    if memory.published_hash != plan_hash:
        memory.applied_epoch = max(memory.applied_epoch, _status_epoch(ctx)) + 1
        memory.applied_at = now
        memory.streams_trigger_epoch = None  # bumps count per plan: a new plan starts afresh
    member_ids = [m.member_id for m in group.members]
    if not member_ids:  # `poll` reports NoMembers first: a record always names its members
        ports.metrics.plan_publish_skipped(ctx.namespace, ctx.name, "no_members")
        return
    record = plan_record.encode_plan(
        group_id,
        memory.applied_epoch,
        plan_hash,
        iso(now),
        plan.assignment,
        incarnation=ctx.uid,
        member_ids=member_ids,
        kind="streams",
    )
    headers = value_headers(settings, group_id, record)
    observer = memory.observer
    if observer is None:
        raise PollFailure("PublishFailed", "no Kafka client to publish the plan with")
    try:
        observer.publish_plan(settings.plan_topic, group_id, record, headers, settings.plan_client)
    except KafkaUnavailable as error:
        raise PollFailure("PublishFailed", str(error)) from None
    memory.published_hash, memory.published_at = plan_hash, now
    memory.published_group, memory.published_member_ids = group_id, tuple(sorted(member_ids))
    memory.published_incarnation, memory.published_epoch = ctx.uid, memory.applied_epoch
    memory.streams_plan = plan.assignment
    if trigger:
        _trigger(ctx, group, memory, ports, now)
    log.info(
        "%s/%s epoch %d: streams plan %s published to %s (%d bytes, %d task moves)%s",
        ctx.namespace,
        ctx.name,
        memory.applied_epoch,
        plan_hash,
        settings.plan_topic,
        len(record),
        len(plan.moves),
        "; recompute triggered" if trigger else "",
    )


def _trigger(
    ctx: PolicyContext, group: StreamsGroup, memory: PolicyMemory, ports: Ports, now: float
) -> None:
    """Toggle the group's reserved assignment-config tag (`streams_group.trigger`): the
    coordinator bumps the group epoch and recomputes (KAFKA-19765). A refusal is Stalled,
    naming the assignor in use."""
    assert memory.observer is not None
    try:
        memory.observer.trigger_streams_group(group.group_id)
    except streams_group.StreamsGroupError as error:
        in_use = group.assignor or "unknown (the broker does not report it)"
        raise PollFailure(
            TRIGGER_REFUSED,
            f"group {group.group_id} (task assignor {in_use!r}): the brokers refused the "
            f"recompute trigger: {error}",
        ) from None
    except KafkaUnavailable as error:
        raise PollFailure("TriggerFailed", str(error)) from None
    if memory.streams_trigger_epoch is None:
        memory.streams_trigger_epoch = group.group_epoch
    memory.streams_triggers += 1
    memory.streams_triggered_at = now
    ports.metrics.streams_trigger(ctx.namespace, ctx.name, group.group_id)


def _count_bumps(
    ctx: PolicyContext, observed: StreamsObserved, memory: PolicyMemory, ports: Ports
) -> None:
    """When the group is Stable at or past a triggered plan: the epoch bumps it cost (group
    epoch now minus the epoch before the first trigger of the plan)."""
    start = memory.streams_trigger_epoch
    group = observed.group
    if start is None or group.state != "Stable" or group.group_epoch <= start:
        return
    if group.assignment_epoch != group.group_epoch:
        return
    bumps = group.group_epoch - start
    memory.streams_last_bumps, memory.streams_trigger_epoch = bumps, None
    ports.metrics.streams_epoch_bumps(ctx.namespace, ctx.name, group.group_id, bumps)


def _status_epoch(ctx: PolicyContext) -> int:
    shown = ctx.status.get("epoch")
    return shown if isinstance(shown, int) else 0


def _ranges(parts: list[int]) -> str:
    runs: list[list[int]] = []  # [first, last] of each run of consecutive partitions
    for p in sorted(set(parts)):
        if runs and runs[-1][1] == p - 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def encode_tasks(tasks: Mapping[str, list[int]]) -> str:
    """Task sets as short text: `subtopology:partitions` separated by spaces, partitions as
    ranges ("0:0-2,7 1:3")."""
    return " ".join(f"{s}:{_ranges(parts)}" for s, parts in sorted(tasks.items()) if parts)


def streams_status(
    observed: StreamsObserved, plan: streams_tasks.TaskPlan | None, memory: PolicyMemory
) -> dict[str, Any]:
    """status.streams: the group, and tasks per member (the first MAX_STATUS_MEMBERS)."""
    group = observed.group
    counts = observed.counts
    members = []
    for m in group.members[:MAX_STATUS_MEMBERS]:
        lag = sum(observed.lag.get((s, p)) or 0.0 for s, parts in m.active.items() for p in parts)
        entry: dict[str, Any] = {
            "memberId": m.member_id,
            "processId": m.process_id,
            "clientId": m.client_id,
            "host": m.client_host,
            "active": encode_tasks(m.active),
            "standby": encode_tasks(m.standby),
            "warmup": encode_tasks(m.warmup),
            "tasks": sum(len(p) for p in m.active.values()),
            "lag": int(lag),
        }
        if m.instance_id:
            entry["instanceId"] = m.instance_id
        members.append(entry)
    result: dict[str, Any] = {
        "groupEpoch": group.group_epoch,
        "assignmentEpoch": group.assignment_epoch,
        "subtopologies": len(observed.subtopologies),
        "tasks": sum(counts.values()),
        "statefulTasks": len(observed.changelog),
        "triggers": memory.streams_triggers,
        "membersListed": len(members),
        "members": members,
    }
    if group.assignor is not None:
        result["assignor"] = group.assignor
    if memory.streams_last_bumps is not None:
        result["lastPlanEpochBumps"] = memory.streams_last_bumps
    return result


def _report(
    ctx: PolicyContext,
    observed: StreamsObserved,
    plan: streams_tasks.TaskPlan | None,
    memory: PolicyMemory,
    ports: Ports,
    now: float,
    action: Action | Stop,
    message: str,
) -> report.PollOutcome:
    memory.reported_generation = ctx.generation
    health = Health(ready=True, reason=READY_REASONS[action], message=message)
    fields: dict[str, Any] = {
        "epoch": max(memory.applied_epoch, _status_epoch(ctx)),
        "members": len(observed.group.members),
        "totalLag": observed.total_lag,
        "streams": streams_status(observed, plan, memory),
    }
    if memory.published_hash is not None:
        fields["appliedPlan"] = memory.published_hash
        fields["strategy"] = observed.spec.strategy
        if memory.applied_at is not None:
            fields["lastAppliedTime"] = iso(memory.applied_at)
    ports.metrics.poll_succeeded(ctx.namespace, ctx.name, now)
    return report.PollOutcome(report.status(ctx, now, health, **fields), [], action, succeeded=True)
