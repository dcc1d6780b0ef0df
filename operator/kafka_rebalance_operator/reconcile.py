"""One poll of one policy: observe -> plan -> apply -> verify -> report.

Runs in a worker thread (it blocks on Kafka, the Kubernetes client and the planner). It returns
the status fields to patch and the Events to post; kopf writes them from the event loop. The
decisions are in the pure modules (lag, history, members, planning, conditions,
assignment_doc); this module only sequences them with the thin I/O modules.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kafka_rebalance_assignors as assignors
from kafka_rebalance_common import redaction

from kafka_rebalance_operator import (
    assignment_doc,
    conditions,
    handoff,
    kafka_security,
    kube_io,
    metrics,
    planning,
    protocol,
    telemetry,
)
from kafka_rebalance_operator.capacity import CapacityEstimator, confirmed_owners
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.history import PartitionMemory
from kafka_rebalance_operator.kafka_io import KafkaObserver, KafkaUnavailable, Observation
from kafka_rebalance_operator.lag import LagState, PartitionLag, classify
from kafka_rebalance_operator.members import PodSummary, resolve_weights, select_members
from kafka_rebalance_operator.planning import Proposal
from kafka_rebalance_operator.policy import PolicyError, PolicySpec, parse_spec
from kafka_rebalance_operator.settings import OperatorSettings
from kafka_rebalance_operator.verify import actual_assignment, verify

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]
CONVERGENCE_POLLS = 5  # group mode: polls an applied epoch may take before NotConverged


@dataclass
class PolicyRuntime:
    """What the operator remembers about a policy between polls (in memory; lost on restart,
    which costs only rate history: epochs and assignments are re-read from status and
    ConfigMaps, and a proposal on offer from status.proposal)."""

    observer: KafkaObserver | None = None
    observer_key: tuple[str, str] | None = None
    partitions: dict[PartitionKey, PartitionMemory] = field(default_factory=dict)
    lags: dict[PartitionKey, PartitionLag] = field(default_factory=dict)
    proposal: Proposal | None = None
    last_poll: float | None = None
    last_generation: int | None = None
    last_event: float | None = None
    converging_since: float | None = None
    polls: int = 0
    capacity: CapacityEstimator = field(default_factory=CapacityEstimator)  # adaptive weights

    def close(self) -> None:
        if self.observer is not None:
            self.observer.close()
            self.observer = None
            self.observer_key = None


@dataclass(frozen=True)
class PolicyContext:
    namespace: str
    name: str
    uid: str
    generation: int
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    conflict: str | None = None  # an older policy for the same groupId in the namespace


@dataclass
class PollOutcome:
    status: dict[str, Any]  # the status fields to patch (only those that changed)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    action: str = ""
    succeeded: bool = False


def iso(ts: float) -> str:
    return (
        datetime.datetime.fromtimestamp(ts, datetime.UTC)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z")
    )


def parse_iso(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in new.items() if old.get(k) != v}


def _failure(
    ctx: PolicyContext, reason: str, message: str, now: float, stalled: bool = True
) -> PollOutcome:
    """A poll that could not observe or plan: conditions only, nothing else changes (the epoch,
    the plan and the ConfigMaps stay as they are)."""
    message = redaction.redact(message)
    health = Health(
        ready=False, reason=reason, message=message, stalled=stalled, reconciling=not stalled
    )
    new = {
        "observedGeneration": ctx.generation,
        "conditions": conditions.build(
            health, ctx.status.get("conditions"), ctx.generation, iso(now)
        ),
        "lastPollTime": iso(now),
    }
    previous_reason = next(
        (c.get("reason") for c in ctx.status.get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    events = [] if previous_reason == reason else [("Warning", reason, message)]
    metrics.ERRORS.labels(ctx.namespace, ctx.name, reason).inc()
    return PollOutcome(_changed(ctx.status, new), events, action="failed")


def _observer(
    spec: PolicySpec, ctx: PolicyContext, runtime: PolicyRuntime, settings: OperatorSettings
) -> KafkaObserver:
    secret: dict[str, str] | None = None
    if spec.secret_name:
        secret = kube_io.read_secret(ctx.namespace, spec.secret_name)
        redaction.register(*(secret.get(k) for k in kafka_security.SECRET_KEYS))
    key = (spec.bootstrap_servers, kafka_security.fingerprint(secret))
    if runtime.observer is None or runtime.observer_key != key:
        runtime.close()
        security = kafka_security.client_settings(secret)
        timeout = min(
            settings.kafka_timeout_s, max(2.0, spec.poll_interval * settings.interval_scale)
        )
        runtime.observer = KafkaObserver(spec.bootstrap_servers, security, timeout)
        runtime.observer_key = key
    return runtime.observer


def _lags(
    spec: PolicySpec, observation: Observation, runtime: PolicyRuntime, now: float
) -> tuple[dict[PartitionKey, PartitionLag], dict[PartitionKey, float | None]]:
    """Lag state and time lag per partition; updates the per-partition memory."""
    lags: dict[PartitionKey, PartitionLag] = {}
    time_lags: dict[PartitionKey, float | None] = {}
    for key, offsets in observation.offsets.items():
        memory = runtime.partitions.setdefault(key, PartitionMemory())
        age = now - memory.last_lag_t if memory.last_lag_t is not None else 0.0
        state = classify(offsets, spec.offset_reset, runtime.lags.get(key), age)
        known = state.state is not LagState.UNKNOWN
        memory.observe(
            now,
            offsets.log_end,
            offsets.committed if known else None,
            state.lag if known else None,
        )
        lags[key] = state
        time_lags[key] = (
            memory.ends.time_lag(offsets.committed, now)
            if state.state is LagState.OK and offsets.committed is not None
            else None
        )
    for key in list(runtime.partitions):
        if key not in observation.offsets:
            del runtime.partitions[key]  # partition or topic gone
    runtime.lags = lags
    return lags, time_lags


def _ratio(value: Any) -> float | None:
    return round(float(value), 6) if isinstance(value, int | float) else None


def poll(
    ctx: PolicyContext,
    pods: list[PodSummary],
    runtime: PolicyRuntime,
    settings: OperatorSettings,
    now: float | None = None,
) -> PollOutcome:
    now = time.time() if now is None else now
    started = time.monotonic()
    runtime.polls += 1
    try:
        outcome = _poll(ctx, pods, runtime, settings, now)
        current = outcome.status.get("conditions", ctx.status.get("conditions"))
        metrics.record_conditions(ctx.namespace, ctx.name, current or [])  # alerts read them
        return outcome
    finally:
        metrics.POLL_SECONDS.labels(ctx.namespace, ctx.name).observe(time.monotonic() - started)


def _poll(
    ctx: PolicyContext,
    pods: list[PodSummary],
    runtime: PolicyRuntime,
    settings: OperatorSettings,
    now: float,
) -> PollOutcome:
    try:
        spec = parse_spec(ctx.spec)
    except PolicyError as error:
        return _failure(ctx, "InvalidSpec", str(error), now)
    if ctx.conflict:
        return _failure(
            ctx,
            "ConflictingPolicy",
            f"policy {ctx.conflict} (older) already manages group {spec.group_id}; this one "
            "does nothing",
            now,
        )

    # -- observe ---------------------------------------------------------------------------------
    try:
        observer = _observer(spec, ctx, runtime, settings)
    except kube_io.SecretMissing as error:
        return _failure(ctx, "SecretNotFound", str(error), now)
    except kafka_security.SecretError as error:
        return _failure(ctx, "InvalidSecret", f"Secret {spec.secret_name}: {error}", now)
    except KafkaUnavailable as error:
        runtime.close()
        return _failure(ctx, "KafkaUnreachable", str(error), now)
    try:
        observation = observer.observe(
            spec.group_id,
            spec.topics,
            spec.topic_pattern,
            describe=settings.describe_group,
        )
    except KafkaUnavailable as error:
        runtime.close()  # a fresh client next poll: the cluster may have moved
        return _failure(ctx, "KafkaUnreachable", str(error), now)
    if observation.errors:
        metrics.PARTITION_ERRORS.labels(ctx.namespace, ctx.name).inc(len(observation.errors))
    if not observation.topics:
        wanted = ", ".join(spec.topics) if spec.topics else f"pattern {spec.topic_pattern.pattern}"
        return _failure(ctx, "TopicsNotFound", f"no topic found for {wanted}", now)

    lags, time_lags = _lags(spec, observation, runtime, now)
    members = select_members(spec, pods)
    member_names = [m.name for m in members]
    try:
        current = assignment_doc.read_current(kube_io.list_configmaps(ctx.namespace, ctx.name))
    except kube_io.ApiException as error:
        return _failure(
            ctx, "ApplyFailed", f"listing ConfigMaps: HTTP {error.status} {error.reason}", now
        )
    status_epoch = ctx.status.get("epoch") if isinstance(ctx.status.get("epoch"), int) else 0
    epoch = max(status_epoch, current.epoch)
    known_lag = [s.lag for s in lags.values() if s.lag is not None]
    total_lag = int(sum(known_lag))
    unknown = sum(1 for s in lags.values() if s.state is LagState.UNKNOWN)

    if not members:
        health = Health(
            False,
            "NoMembers",
            f"no Running and Ready pod matches spec.members.selector; the applied "
            f"plan (epoch {epoch}) is kept",
            stalled=True,
        )
        new = {
            "observedGeneration": ctx.generation,
            "epoch": epoch,
            "members": 0,
            "totalLag": total_lag,
            "lastPollTime": iso(now),
            "conditions": conditions.build(
                health, ctx.status.get("conditions"), ctx.generation, iso(now)
            ),
        }
        _telemetry(ctx, spec, settings, observation, lags, time_lags, current, epoch, now)
        return PollOutcome(_changed(ctx.status, new), action="no-members", succeeded=True)

    handoff_done = False
    timed_out: dict[str, list[PartitionKey]] = {}  # unacknowledged revokes past the timeout
    if spec.apply_mode == "assign":
        top = {m: d for m, d in current.by_member.items() if d.epoch == current.epoch}
        started_at = min((parse_iso(d.generated_at) or now for d in top.values()), default=None)
        in_flight = handoff.pending(
            top,
            member_names,
            observation.offsets,
            now,
            started_at,
            spec.handoff_timeout * settings.interval_scale,
        )
        if in_flight is not None and not in_flight.done:
            health = Health(
                False,
                "HandingOff",
                f"epoch {epoch}: waiting for old owners to commit revoked partitions "
                f"({handoff.describe_waiting(in_flight.waiting)})",
                reconciling=True,
            )
            new = {
                "observedGeneration": ctx.generation,
                "epoch": epoch,
                "members": len(members),
                "totalLag": total_lag,
                "lastPollTime": iso(now),
                "conditions": conditions.build(
                    health, ctx.status.get("conditions"), ctx.generation, iso(now)
                ),
            }
            _telemetry(ctx, spec, settings, observation, lags, time_lags, current, epoch, now)
            return PollOutcome(_changed(ctx.status, new), action="handoff", succeeded=True)
        if in_flight is not None:
            handoff_done = True
            if in_flight.timed_out:
                timed_out = dict(in_flight.waiting)

    # -- plan -----------------------------------------------------------------------------------
    adaptive: dict[str, float] | None = None
    if spec.weight_from == "adaptive":
        # capacity from committed-offset advances of partitions whose owner did not change,
        # while backlogged (capacity.py); held inside a hysteresis band
        estimator = runtime.capacity
        estimator.settle_s = spec.poll_interval * settings.interval_scale
        ok = {k: s for k, s in lags.items() if s.state is LagState.OK and s.lag is not None}
        group = observation.group if spec.apply_mode == "group" else None
        estimator.observe(
            now,
            confirmed_owners(
                _owners({m: d.partitions for m, d in current.by_member.items()}),
                _owners(actual_assignment(group)) if group is not None else None,
                group is not None and group.get("group_state") == "Stable",
            ),
            {k: c for k in ok if (c := observation.offsets[k].committed) is not None},
            {k: s.lag for k, s in ok.items() if s.lag is not None},
            member_names,
        )
        demand = sum(m.produce.value or 0.0 for m in runtime.partitions.values())
        held = dict(estimator.used)
        adaptive = estimator.weights(member_names, demand)
        if adaptive != held:
            log.info(
                "%s/%s adaptive weights %s from capacity %s records/s",
                ctx.namespace,
                ctx.name,
                {m: round(w, 3) for m, w in adaptive.items()},
                {m: round(c, 1) for m, c in estimator.effective(member_names, demand).items()},
            )
    weights = resolve_weights(spec, members, adaptive)
    rates = {k: m.produce.value for k, m in runtime.partitions.items()}
    lag_values = {k: (float(s.lag) if s.lag is not None else None) for k, s in lags.items()}
    live_docs = {m: d for m, d in current.by_member.items() if m in weights}
    document = planning.build_document(
        spec, observation.topics, weights, live_docs, lag_values, rates
    )
    try:
        result = assignors.plan(document)
    except assignors.PlanInputError as error:
        return _failure(ctx, "PlanFailed", f"the planner refused the input: {error}", now)
    stats = result["stats"]
    assignment: dict[str, dict[str, list[int]]] = result["assignment"]
    new_hash = planning.plan_hash(assignment)
    moves = len(result["moves"])
    before, after = _ratio(stats.get("max_load_ratio_before")), _ratio(stats.get("max_load_ratio"))

    applied_hash = current.applied_hash()
    if timed_out:
        # Never grant a partition its old owner may still consume: back to it, in a new epoch.
        previous = {
            m: {
                t: sorted(set(d.partitions.get(t, [])) | set(d.revoking.get(t, [])))
                for t in set(d.partitions) | set(d.revoking)
            }
            for m, d in live_docs.items()
        }
        assignment = handoff.settle_timed_out(
            {m: d.partitions for m, d in live_docs.items()}, assignment, timed_out
        )
        new_hash = planning.plan_hash(assignment)
        moves = planning.moves_between(previous, assignment)
        after = before
    proposal: Proposal | None = None
    if spec.needs_approval:
        # The proposal on offer stays the same while it still fits the group and is not applied,
        # so the hash a user approves is the plan that gets applied even as lag moves. It is kept
        # in status as well, so an operator restart offers the same plan (and hash) again.
        kept = runtime.proposal or planning.restore_proposal(ctx.status.get("proposal"))
        if (
            kept is not None
            and kept.hash != applied_hash
            and planning.proposal_fits(kept.assignment, observation.topics, member_names)
        ):
            proposal = kept
            assignment, new_hash = kept.assignment, kept.hash
            moves, before, after = kept.moves, kept.before, kept.after
        else:
            runtime.proposal = None

    # A plan the group needs for coverage, or the first plan after the user changed the spec,
    # is not held back by cooldown or minImprovement (approval still applies).
    spec_changed = ctx.status.get("observedGeneration") not in (None, ctx.generation)
    structural = spec_changed or planning.placement_needed(
        observation.topics, member_names, current.by_member
    )
    writes_needed = applied_hash == new_hash and bool(
        assignment_doc.diff(
            ctx.name,
            current,
            assignment_doc.render_documents(spec.group_id, assignment, epoch, new_hash, ""),
        )
    )
    last_applied = parse_iso(ctx.status.get("lastAppliedTime"))
    scaled = _scaled(spec, settings)
    decision = planning.decide(
        scaled,
        now=now,
        new_hash=new_hash,
        applied_hash=applied_hash,
        current_epoch=epoch,
        writes_needed=writes_needed,
        structural=structural,
        last_applied_at=last_applied,
        ratio_before=before,
        ratio_after=after,
        moves=moves,
        force=handoff_done and spec.mode != "observe",
    )
    kind, kind_state = observation.group_type or (None, None)
    mismatch = protocol.mismatch(
        spec.apply_mode, spec.group_id, observation.group, kind, kind_state
    )
    if mismatch and spec.apply_mode == "assign" and decision.action == "apply" and not timed_out:
        # manual commits are refused while members have joined: a revoke could never be
        # acknowledged, so no new epoch until the group is left to the sidecars
        decision = planning.Decision(
            "hold", "ProtocolMismatch", "a new plan is held", decision.epoch - 1
        )
    handoff_message = ""
    if timed_out and decision.action == "apply":
        handoff_message = (
            f"epoch {epoch}: no acknowledgement within apply.handoffTimeout "
            f"({spec.handoff_timeout:g}s) from {handoff.describe_waiting(timed_out)}; those "
            f"partitions stay with their owner (epoch {decision.epoch}) and the move is retried "
            "after rebalance.cooldown. Check that those members' sidecars commit with "
            '{"member", "epoch"} metadata'
        )
        decision = planning.Decision("apply", "HandoffTimedOut", handoff_message, decision.epoch)

    # -- apply ----------------------------------------------------------------------------------
    new_status: dict[str, Any] = {
        "observedGeneration": ctx.generation,
        "members": len(members),
        "totalLag": total_lag,
        "lastPollTime": iso(now),
        "strategy": spec.strategy,
    }
    events: list[tuple[str, str, str]] = []
    if handoff_message:
        events.append(("Warning", "HandoffTimedOut", handoff_message))
    applied_assignment = {m: d.partitions for m, d in live_docs.items()}
    if decision.action in ("apply", "repair"):
        plan_assignment = assignment
        revoking: dict[str, dict[str, list[int]]] = {}
        written_hash = new_hash
        if spec.apply_mode == "assign" and decision.action == "apply" and not timed_out:
            step = handoff.first_step(live_docs, assignment)
            plan_assignment, revoking = step.assignment, step.revoking
            written_hash = planning.plan_hash(plan_assignment)
        documents = assignment_doc.render_documents(
            spec.group_id, plan_assignment, decision.epoch, written_hash, iso(now), revoking
        )
        writes = assignment_doc.diff(ctx.name, current, documents)
        try:
            for item in writes.upserts:
                kube_io.upsert_configmap(
                    assignment_doc.configmap_body(ctx.name, ctx.uid, ctx.namespace, item)
                )
            for name in writes.deletes:
                kube_io.delete_configmap(ctx.namespace, name)
        except kube_io.ApiException as error:
            # Partly written: the next poll re-reads the ConfigMaps and finishes or repairs.
            return _failure(
                ctx, "ApplyFailed", f"writing ConfigMaps: HTTP {error.status} {error.reason}", now
            )
        applied_assignment = plan_assignment
        epoch = decision.epoch
        if decision.action == "apply":
            runtime.proposal = None
            new_status["lastAppliedTime"] = iso(now)
            new_status["appliedPlan"] = written_hash
            metrics.PLANS.labels(ctx.namespace, ctx.name, spec.group_id).inc()
            metrics.MOVES.labels(ctx.namespace, ctx.name, spec.group_id).inc(moves)
            message = (
                f"epoch {epoch}: plan {new_hash}, {moves} partitions moved, maxLoadRatio "
                f"{_fmt(before)} -> {_fmt(after)}, {len(writes.upserts)} ConfigMaps written"
            )
            log.info("%s/%s %s", ctx.namespace, ctx.name, message)
            if (
                runtime.last_event is None
                or now - runtime.last_event >= settings.event_min_interval_s
            ):
                events.append(("Normal", "PlanApplied", message))
                runtime.last_event = now
            settings.telemetry.emit(
                [
                    telemetry.plan_row(
                        ts_ms=int(now * 1000),
                        group=spec.group_id,
                        epoch=epoch,
                        strategy=spec.strategy,
                        moves=moves,
                        before=before,
                        after=after,
                        namespace=ctx.namespace,
                        policy=ctx.name,
                    )
                ]
            )
        new_status["maxLoadRatio"] = after if decision.action == "apply" else before
    else:
        new_status["maxLoadRatio"] = before
    if decision.action == "noop":
        new_status["appliedPlan"] = applied_hash
    new_status["epoch"] = epoch
    if new_status.get("maxLoadRatio") is None:
        new_status.pop("maxLoadRatio")

    if decision.action == "propose":
        if proposal is None or proposal.hash != new_hash:
            proposal = Proposal(new_hash, assignment, moves, before, after, iso(now))
        runtime.proposal = proposal
        new_status["proposal"] = {
            "hash": proposal.hash,
            "moves": proposal.moves,
            "before": proposal.before,
            "after": proposal.after,
            "generatedAt": proposal.generated_at,
            "epoch": epoch + 1,
            "assignment": planning.encode_assignment(proposal.assignment),
        }
        new_status["proposal"] = {k: v for k, v in new_status["proposal"].items() if v is not None}
        if (ctx.status.get("proposal") or {}).get("hash") != proposal.hash:
            events.append(("Normal", "AwaitingApproval", decision.message))
    elif ctx.status.get("proposal") is not None and decision.action != "hold":
        new_status["proposal"] = None

    # -- verify and report ------------------------------------------------------------------------
    message = decision.message
    reconciling = False
    stalled_reason: str | None = None
    if (
        spec.apply_mode == "group"
        and observation.group is not None
        and decision.action in ("noop", "apply", "repair", "hold")
    ):
        verification = verify(observation.group, applied_assignment)
        message = f"{message}; {verification.message}"
        if verification.state == "converging":
            if runtime.converging_since is None or decision.action == "apply":
                runtime.converging_since = now
            limit = CONVERGENCE_POLLS * spec.poll_interval * settings.interval_scale
            if now - runtime.converging_since > limit:
                stalled_reason = "NotConverged"
            else:
                reconciling = True
        else:
            runtime.converging_since = None
    if unknown:
        message = f"{message}; lag unknown for {unknown} partitions"
    if observation.missing_topics:
        message = f"{message}; topics not found: {', '.join(observation.missing_topics)}"
    previous_ready = next(
        (c for c in ctx.status.get("conditions") or [] if c.get("type") == "Ready"), {}
    )
    if mismatch:
        stalled_reason, message = "ProtocolMismatch", f"{mismatch}; {message}"
        if previous_ready.get("reason") != "ProtocolMismatch":
            events.append(("Warning", "ProtocolMismatch", mismatch))
    elif handoff_message:
        stalled_reason, message = "HandoffTimedOut", handoff_message
    elif previous_ready.get("reason") == "HandoffTimedOut" and decision.reason == "CoolingDown":
        # still waiting to retry the move that timed out: keep saying so until it is retried
        stalled_reason, message = "HandoffTimedOut", str(previous_ready.get("message") or "")
    if stalled_reason is not None:
        health = Health(False, stalled_reason, message, stalled=True)
    elif reconciling:
        health = Health(False, "Applying", message, reconciling=True)
    else:
        health = Health(True, decision.reason, message)
    new_status["conditions"] = conditions.build(
        health, ctx.status.get("conditions"), ctx.generation, iso(now)
    )

    _metrics(ctx, spec, lags, time_lags, applied_assignment, epoch, new_status)
    _telemetry(
        ctx, spec, settings, observation, lags, time_lags, current, epoch, now, applied_assignment
    )
    metrics.LAST_SUCCESS.labels(ctx.namespace, ctx.name).set(now)
    return PollOutcome(_changed(ctx.status, new_status), events, decision.action, succeeded=True)


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def _scaled(spec: PolicySpec, settings: OperatorSettings) -> PolicySpec:
    if settings.interval_scale == 1.0:
        return spec
    from dataclasses import replace

    return replace(spec, cooldown=spec.cooldown * settings.interval_scale)


def _owners(assignment: Mapping[str, Mapping[str, list[int]]]) -> dict[PartitionKey, str]:
    return {(t, p): m for m, ts in assignment.items() for t, ps in ts.items() for p in ps}


def _metrics(
    ctx: PolicyContext,
    spec: PolicySpec,
    lags: Mapping[PartitionKey, PartitionLag],
    time_lags: Mapping[PartitionKey, float | None],
    assignment: Mapping[str, Mapping[str, list[int]]],
    epoch: int,
    status: Mapping[str, Any],
) -> None:
    group = spec.group_id
    metrics.record_partitions(
        ctx.namespace,
        ctx.name,
        group,
        ((t, p, s.state.value, s.lag, time_lags.get((t, p))) for (t, p), s in lags.items()),
    )
    per_member = {}
    for member, topics in assignment.items():
        keys = [(t, p) for t, ps in topics.items() for p in ps]
        per_member[member] = (
            len(keys),
            float(sum(lags[k].lag or 0 for k in keys if k in lags)),
        )
    metrics.record_members(ctx.namespace, ctx.name, group, per_member)
    metrics.EPOCH.labels(ctx.namespace, ctx.name, group).set(epoch)
    metrics.TOTAL_LAG.labels(ctx.namespace, ctx.name, group).set(status.get("totalLag", 0))
    if status.get("maxLoadRatio") is not None:
        metrics.MAX_LOAD_RATIO.labels(ctx.namespace, ctx.name, group).set(status["maxLoadRatio"])


def _telemetry(
    ctx: PolicyContext,
    spec: PolicySpec,
    settings: OperatorSettings,
    observation: Observation,
    lags: Mapping[PartitionKey, PartitionLag],
    time_lags: Mapping[PartitionKey, float | None],
    current: assignment_doc.CurrentState,
    epoch: int,
    now: float,
    assignment: Mapping[str, Mapping[str, list[int]]] | None = None,
) -> None:
    if not settings.telemetry.sinks:
        return
    owners = _owners(
        assignment
        if assignment is not None
        else {m: d.partitions for m, d in current.by_member.items()}
    )
    ts_ms = int(now * 1000)
    rows = []
    for key, offsets in sorted(observation.offsets.items()):
        state = lags[key]
        rows.append(
            telemetry.partition_row(
                ts_ms=ts_ms,
                cluster=settings.cluster,
                namespace=ctx.namespace,
                policy=ctx.name,
                group=spec.group_id,
                topic=key[0],
                partition=key[1],
                log_start=offsets.log_start,
                log_end=offsets.log_end,
                committed=offsets.committed,
                lag=state.lag,
                lag_state=state.state.value,
                time_lag_s=time_lags.get(key),
                owner=owners.get(key),
                epoch=epoch,
            )
        )
    settings.telemetry.emit(rows)
