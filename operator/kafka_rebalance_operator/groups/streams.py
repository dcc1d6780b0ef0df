"""Streams groups (KIP-1071) as a group kind (`spec.groupType: streams`; docs/streams.md).

Observe describes the group (and its `streams.num.standby.replicas`) and reads its input
offsets and changelog ends; plan places the active tasks and their standbys
(`kafka_rebalance_assignors.streams_tasks`, pure); decide is the common one; a
plan is carried out by publishing its record (`kind: "streams"`) to the plan topic, where the
brokers' plan-following task assignor reads it, and by triggering the coordinator's recompute
(toggling a reserved tag in the group's assignment configs: `streams_group`).

Streams members are Kafka Streams clients, not pods, and the brokers apply the plan, so this
kind writes no ConfigMaps and has no hand-over: a plan is published whole, and the group
follows it at its next assignment.

Invariants:
- nothing is published and nothing triggered while the group's task assignor is not the
  plug-in's (the policy is Stalled naming the assignor in use);
- a trigger is sent once per published plan, and again only while the group still does not
  run it a poll interval after the last one;
- the published plan is the one the group runs or is moving to: a new plan the group already
  runs (the plug-in's fallback placed a changed membership as the plan would) is recorded,
  untriggered, so its record names the members that run it;
- a published record carries the standbys planned for its active tasks
  (`streams_standbys.plan_standbys`), none on a task's active process; when the group's
  standby count could not be read it carries none, and the plug-in places them;
- observe mode publishes nothing; propose mode and approval Manual publish only the approved
  plan (`status.proposal`, `kubectl cgp approve`).

Each poll's report writes a telemetry row per task (`telemetry.streams_rows`), and a published
plan a plan row, for the pipeline's backtest (docs/pipeline.md, "Streams telemetry").
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kafka_rebalance_assignors as assignors
from kafka_rebalance_assignors import streams_standbys, streams_tasks
from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance_operator import planning, telemetry
from kafka_rebalance_operator.capacity import confirmed_owners
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.groups import plan_topic
from kafka_rebalance_operator.kafka import streams_group, trigger_cleanup
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable, TooManyPartitions
from kafka_rebalance_operator.kafka.streams_group import StreamsGroup
from kafka_rebalance_operator.kube.members import PodSummary, resolve_weights
from kafka_rebalance_operator.kube.selectors import matches
from kafka_rebalance_operator.lag import OK, PolicyLags, PolicyOffsets
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

MAX_STATUS_MEMBERS = 50  # status.streams.members lists at most this many (CRD maxItems)
NOT_PLAN_FOLLOWING = "AssignorNotPlanFollowing"
TRIGGER_REFUSED = "TriggerRefused"
# A toggled tag takes effect at a member's next heartbeat (at most the group's heartbeat
# interval; 15 s is the longest the brokers allow by default, group.streams.max.heartbeat.
# interval.ms): until then the trigger is on its way, and toggling again would undo it.
TRIGGER_PENDING_S = 15.0


@dataclass(frozen=True)
class StreamsObserved:
    spec: PolicySpec
    group: StreamsGroup
    subtopologies: tuple[streams_tasks.SubtopologyTopics, ...]
    partitions: dict[str, int]  # topic -> partitions (sources and changelogs)
    lag: dict[streams_tasks.Task, float | None]
    rate: dict[streams_tasks.Task, float | None]
    changelog: dict[streams_tasks.Task, int]
    offsets: PolicyOffsets
    lags: PolicyLags
    epoch: int  # the highest epoch in status or memory
    last_applied_at: float | None  # when the last plan was published (status or memory)
    spec_changed: bool  # the spec changed since the last poll reported on it
    pods: tuple[PodSummary, ...] = ()  # the namespace's pods: weights apply to members' pods
    # the plan this policy last published for the group, and its hash (None: none since the
    # operator started, or it was for another group)
    published_hash: str | None = None
    published_plan: Assignment | None = None

    @property
    def counts(self) -> dict[str, int]:
        return streams_tasks.task_counts(self.subtopologies, self.partitions)

    @property
    def member_ids(self) -> list[str]:
        return [m.member_id for m in self.group.members]

    @property
    def total_lag(self) -> int:
        return int(sum(v for v in self.lag.values() if v is not None))


@dataclass(frozen=True)
class StreamsPlanned:
    assignment: Assignment  # member id -> subtopology -> partitions
    hash: str
    moves: int
    peak_before: float  # the most loaded member's task load over its capacity weight
    peak_after: float
    unowned: bool  # some task has no active owner now: the group needs a plan
    runs_already: bool  # the group runs exactly this plan now, its planned standbys included
    measuring: bool  # weightFrom adaptive, no capacity measured yet
    proposal: Proposal | None = None  # the proposal on offer, when `assignment` is it
    weights: Mapping[str, float] | None = None  # capacity weights it was planned with
    standbys_only: bool = False  # the group runs its actives, not its planned standbys


def observe(
    ctx: PolicyContext,
    pods: Sequence[PodSummary],
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> StreamsObserved:
    spec = admit(ctx, settings)
    observer = kafka_client(spec, ctx, memory, ports, settings)
    identify(ctx, spec, observer, memory, ports)
    keep_heartbeat(spec, observer, memory)
    group = plan_topic.described(
        ctx, memory, ports, lambda: observer.describe_streams_group(spec.group_id)
    )
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
    lags = track_lags(spec, offsets, memory, now)
    rates = memory.history.produce_rates() if memory.history is not None else {}
    lag, rate = streams_tasks.task_loads(
        subtopologies, observation.topics, lags.lag_values(), rates
    )
    ends = {key: offsets[key].log_end for key in offsets}
    changelog = streams_tasks.changelog_sizes(subtopologies, observation.topics, ends)
    observed = StreamsObserved(
        spec,
        group,
        subtopologies,
        dict(observation.topics),
        lag,
        rate,
        changelog,
        offsets,
        lags,
        pods=tuple(pods),
        **dataclasses.asdict(plan_topic.in_place(ctx, memory, spec.group_id)),
    )
    plan_topic.count_bumps(ctx, group, "streams", memory, ports)
    return observed


def wait(observed: StreamsObserved) -> Wait | None:
    if observed.group.members:
        return None
    return Wait(
        Stop.NO_MEMBERS,
        Health(
            False,
            "NoMembers",
            f"streams group {observed.spec.group_id} has no member; the published plan "
            f"(epoch {observed.epoch}) is kept",
            reconciling=True,
        ),
    )


def adaptive_weights(
    observed: StreamsObserved, memory: PolicyMemory, now: float
) -> dict[str, float] | None:
    """weightFrom adaptive: each member's measured capacity (`capacity.CapacityEstimator`),
    from the committed-offset advance of its active tasks' input partitions while
    backlogged; ownership counts only while the group is Stable. None otherwise."""
    spec, group = observed.spec, observed.group
    if spec.weight_from != "adaptive":
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
    members = observed.member_ids
    estimator.observe(
        now, confirmed_owners(owners, owners, group.state == "Stable"), committed, lag, members
    )
    demand = memory.history.demand() if memory.history is not None else 0.0
    held = dict(estimator.used)
    adaptive = estimator.weights(members, demand)
    if adaptive != held:
        log.info(
            "%s adaptive weights %s from capacity %s records/s (demand %.1f)",
            spec.group_id,
            {m: round(w, 3) for m, w in adaptive.items()},
            {m: round(c, 1) for m, c in estimator.effective(members, demand).items()},
            demand,
        )
    return adaptive


def _task_plan(observed: StreamsObserved, weights: Mapping[str, float]) -> streams_tasks.TaskPlan:
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
                members=observed.member_ids,
                # plan from where the group is heading: while members reconcile, their active
                # tasks are a moving part-way state that no plan should chase
                active=group.targets(),
                standby=group.standbys(),
                lag=observed.lag,
                rate=observed.rate,
                changelog=observed.changelog,
                strategy=spec.strategy,
                options=options,
                budget=spec.move_budget(sum(counts.values())),
                drain_seconds=spec.target_drain_seconds,
                weights=weights,
                standby_replicas=group.standby_replicas or 0,
                processes=group.processes(),
            )
        )
    except assignors.PlanInputError as error:
        raise PollFailure(
            "PlanFailed", f"planning the tasks of {group.group_id}: {error}"
        ) from None


def plan(
    ctx: PolicyContext,
    observed: StreamsObserved,
    memory: PolicyMemory,
    settings: OperatorSettings,
    now: float,
) -> StreamsPlanned:
    adaptive = adaptive_weights(observed, memory, now)
    weights = member_weights(observed.spec, observed.group, observed.pods, adaptive)
    tasks = _task_plan(observed, weights)
    owned = {  # a task on its way from one member to another is not unowned
        (s, p)
        for sets in (observed.group.active(), observed.group.targets())
        for held in sets.values()
        for s, parts in held.items()
        for p in parts
    }
    assignment = Assignment(tasks.assignment)
    planned = StreamsPlanned(
        assignment=assignment,
        hash=planning.plan_hash(assignment),
        moves=len(tasks.moves),
        peak_before=tasks.peak_before,
        peak_after=tasks.peak_after,
        unowned=any((s, p) not in owned for s, n in observed.counts.items() for p in range(n)),
        runs_already=runs(observed, assignment, weights),
        measuring=adaptive is not None and not memory.capacity.measured,
        weights=weights,
        standbys_only=not observed.group.members_off_plan(assignment)
        and not runs(observed, assignment, weights),
    )
    if observed.spec.needs_approval:
        planned = _on_offer(ctx, observed, planned, memory)
    return planned


def runs(
    observed: StreamsObserved,
    assignment: Assignment,
    weights: Mapping[str, float] | None,
) -> bool:
    """Whether the group runs `assignment` now: every member its planned active tasks, and,
    when standbys are planned (`planned_standbys`), its planned standby tasks. A group running
    the actives with other standbys does not run the plan: it is published and triggered, or
    the planned standbys would wait for an assignment that nothing brings."""
    group = observed.group
    if group.members_off_plan(assignment):
        return False
    standbys = planned_standbys(observed, assignment, weights)
    if standbys is None:
        return True
    held = group.standbys()
    return all(
        {s: sorted(p) for s, p in standbys.get(m, {}).items() if p}
        == {s: sorted(p) for s, p in held.get(m, {}).items() if p}
        for m in observed.member_ids
    )


def _on_offer(
    ctx: PolicyContext, observed: StreamsObserved, planned: StreamsPlanned, memory: PolicyMemory
) -> StreamsPlanned:
    kept = plan_topic.kept_proposal(
        ctx, memory, observed.published_hash, observed.counts, observed.member_ids
    )
    if kept is None:
        return planned
    return StreamsPlanned(
        assignment=kept.assignment,
        hash=kept.hash,
        moves=kept.moves,
        peak_before=kept.before if kept.before is not None else planned.peak_before,
        peak_after=kept.after if kept.after is not None else planned.peak_after,
        unowned=planned.unowned,
        runs_already=runs(observed, kept.assignment, planned.weights),
        measuring=planned.measuring,
        proposal=kept,
        weights=planned.weights,
        standbys_only=not observed.group.members_off_plan(kept.assignment)
        and not runs(observed, kept.assignment, planned.weights),
    )


def facts(ctx: PolicyContext, observed: StreamsObserved, planned: StreamsPlanned) -> PlanFacts:
    """The plan in place is the published one, or the new plan itself when the group runs it
    already (then there is nothing to decide: it is recorded). Tasks without an owner, or a
    spec change, or a new plan whose actives the group runs but not its planned standbys (no
    load gain to wait for; one trigger brings the standbys), make the plan structural."""
    applied = planned.hash if planned.runs_already else observed.published_hash
    return PlanFacts(
        new_hash=planned.hash,
        applied_hash=applied,
        epoch=observed.epoch,
        last_applied_at=observed.last_applied_at,
        ratio_before=planned.peak_before,
        ratio_after=planned.peak_after,
        moves=planned.moves,
        structural=planned.unowned or observed.spec_changed or planned.standbys_only,
        measuring=planned.measuring,
    )


def carry_out(
    ctx: PolicyContext,
    observed: StreamsObserved,
    planned: StreamsPlanned,
    decision: Decision,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> plan_topic.Delivered:
    """The plan record and the trigger (`plan_topic.carry_out`). A policy switched to observe
    mode takes its reserved tag out of the group's configs (the plug-in ignores it, but it is
    not the application's)."""
    if observed.spec.mode == "observe" and memory.trigger_tag_left:
        removed = trigger_cleanup.clear_trigger(
            memory.observer, observed.spec.group_id, f"{ctx.namespace}/{ctx.name}"
        )
        memory.trigger_tag_left = not removed
    return plan_topic.carry_out(
        ctx,
        _target(ctx, observed, memory, ports, planned.weights),
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


def planned_standbys(
    observed: StreamsObserved,
    assignment: Assignment,
    weights: Mapping[str, float] | None = None,
) -> Assignment | None:
    """The standbys to publish with `assignment` (the plan's active tasks): placed off each
    task's active process, sticky to the members that hold its state now (their standbys, and
    the tasks' owners before the plan). None when the group's standby count is unknown."""
    group = observed.group
    if group.standby_replicas is None:
        return None
    return Assignment(
        streams_standbys.plan_standbys(
            assignment,
            group.standbys(),
            observed.changelog,
            group.standby_replicas,
            observed.member_ids,
            previous_active=group.targets(),
            processes=group.processes(),
            weights=weights,
        ).standby
    )


def _target(
    ctx: PolicyContext,
    observed: StreamsObserved,
    memory: PolicyMemory,
    ports: Ports,
    weights: Mapping[str, float] | None = None,
) -> plan_topic.Target:
    group = observed.group

    def trigger() -> None:
        """Toggle the group's reserved assignment-config tag (`streams_group.trigger`): the
        coordinator bumps the group epoch and recomputes (KAFKA-19765). A refusal is
        Stalled, naming the assignor in use."""
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
        memory.trigger_tag_left = True

    return plan_topic.Target(
        "streams",
        group,
        observed.member_ids,
        observed.published_hash,
        observed.published_plan,
        observed.epoch,
        trigger,
        lambda assignment: planned_standbys(observed, assignment, weights),
        pending_s=TRIGGER_PENDING_S,
    )


def _report_fields(observed: StreamsObserved, memory: PolicyMemory, epoch: int) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "epoch": epoch,
        "members": len(observed.group.members),
        "totalLag": observed.total_lag,
        "streams": streams_status(observed, memory),
    }
    if memory.published_hash is not None and memory.published_group == observed.spec.group_id:
        fields["appliedPlan"] = memory.published_hash
        fields["strategy"] = observed.spec.strategy
        if memory.applied_at is not None:
            fields["lastAppliedTime"] = iso(memory.applied_at)
    return fields


def _telemetry(
    ctx: PolicyContext,
    observed: StreamsObserved,
    epoch: int,
    published: StreamsPlanned | None,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> None:
    """The poll's task rows (`telemetry.streams_rows`), and the plan row of a plan published
    this poll (`published`), as the consumer kind writes one per new epoch."""
    if not ports.telemetry.enabled:
        return
    ts_ms = int(now * 1000)
    group, spec = observed.group, observed.spec
    ends = {key: observed.offsets[key].log_end for key in observed.offsets}
    input_ends, _ = streams_tasks.task_loads(observed.subtopologies, observed.partitions, ends, {})
    rows = telemetry.streams_rows(
        ts_ms=ts_ms,
        cluster=settings.cluster,
        namespace=ctx.namespace,
        policy=ctx.name,
        group=spec.group_id,
        counts=observed.counts,
        lag=observed.lag,
        rate=observed.rate,
        log_end=input_ends,
        active=group.active(),
        standby=group.standbys(),
        processes=group.processes(),
        changelog=observed.changelog,
        epoch=epoch,
    )
    if published is not None:
        rows.append(
            telemetry.plan_row(
                ts_ms=ts_ms,
                group=spec.group_id,
                epoch=epoch,
                strategy=spec.strategy,
                moves=published.moves,
                before=published.peak_before,
                after=published.peak_after,
                namespace=ctx.namespace,
                policy=ctx.name,
            )
        )
    ports.telemetry.emit(rows)


def waited(
    ctx: PolicyContext,
    observed: StreamsObserved,
    wait: Wait,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> report.PollOutcome:
    fields = _report_fields(observed, memory, observed.epoch)
    _telemetry(ctx, observed, observed.epoch, None, ports, settings, now)
    return plan_topic.outcome(ctx, wait.health, fields, [], wait.stop, memory, ports, now)


def polled(
    ctx: PolicyContext,
    observed: StreamsObserved,
    planned: StreamsPlanned,
    decision: Decision,
    applied: plan_topic.Delivered,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> report.PollOutcome:
    """The common conditions: Ready with the decision's reason once the group runs the
    published plan; Reconciling (Applying) while it moves to it; Stalled (NotConverged) when
    it has not after report.CONVERGENCE_POLLS poll intervals."""
    fields = _report_fields(observed, memory, applied.epoch)
    offered, events, note = report.proposal_fields(
        ctx, applied.proposal, applied.epoch, decision, settings
    )
    fields.update(offered)
    published = applied.published and decision.action is Action.APPLY
    _telemetry(ctx, observed, applied.epoch, planned if published else None, ports, settings, now)
    if published:
        events.append(
            (
                "Normal",
                "PlanApplied",
                f"epoch {applied.epoch}: streams plan {planned.hash} published, "
                f"{planned.moves} task moves"
                + ("; recompute triggered" if applied.triggered else ""),
            )
        )
    health = plan_topic.health(
        ctx,
        observed.group,
        len(observed.group.members),
        decision,
        note,
        memory,
        observed.spec.poll_interval,
        now,
    )
    return plan_topic.outcome(ctx, health, fields, events, decision.action, memory, ports, now)


class StreamsKind:
    """The streams kind (`GroupKind`): this module's steps."""

    name = "streams"
    observe = staticmethod(observe)
    wait = staticmethod(wait)
    plan = staticmethod(plan)
    facts = staticmethod(facts)
    carry_out = staticmethod(carry_out)
    waited = staticmethod(waited)
    report = staticmethod(polled)


KIND = StreamsKind()


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


def streams_status(observed: StreamsObserved, memory: PolicyMemory) -> dict[str, Any]:
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
        "triggers": memory.triggers,
        "membersListed": len(members),
        "members": members,
    }
    if group.assignor is not None:
        result["assignor"] = group.assignor
    if memory.last_plan_bumps is not None:
        result["lastPlanEpochBumps"] = memory.last_plan_bumps
    return result
