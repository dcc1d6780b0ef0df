"""Report: what the policy's status, Events, metrics and telemetry say after a poll.

`status` is the one status builder: every poll, failed or not, writes its fields through it,
and only fields that changed are patched. The generation reported on is also remembered
(memory.reported_generation), in case the status write fails. Three entry points, one per
way a poll ends: `failed` (PollFailure), `waited` (stopped before planning), `polled` (decided,
and applied).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kafka_rebalance_common import redaction
from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance_operator import conditions, planning, telemetry
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.kafka.verify import verify
from kafka_rebalance_operator.lag import Layout
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.metrics import PartitionRows
from kafka_rebalance_operator.partition_sets import TopicPartitions
from kafka_rebalance_operator.phases.apply import Applied
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, iso
from kafka_rebalance_operator.phases.decide import Action, Decision, Stop, Wait
from kafka_rebalance_operator.phases.observe import Observed
from kafka_rebalance_operator.phases.plan import Planned
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.settings import OperatorSettings

CONVERGENCE_POLLS = 5  # group mode: polls an applied epoch may take before NotConverged

Event = tuple[str, str, str]  # (type, reason, message)


@dataclass
class PollOutcome:
    status: dict[str, Any]  # the status fields to patch (only those that changed)
    events: list[Event] = field(default_factory=list)
    action: Action | Stop = Stop.FAILED
    succeeded: bool = False


def status(
    ctx: PolicyContext,
    now: float,
    health: Health,
    observed: Observed | None = None,
    epoch: int | None = None,
    **plan_fields: Any,
) -> dict[str, Any]:
    """The status fields of this poll that differ from the policy's status. Conditions always;
    group facts once observed; plan facts (strategy, maxLoadRatio, appliedPlan,
    lastAppliedTime, proposal) once decided. A None value removes the field."""
    new: dict[str, Any] = {
        "observedGeneration": ctx.generation,
        "lastPollTime": iso(now),
        "conditions": conditions.build(
            health, ctx.status.get("conditions"), ctx.generation, iso(now)
        ),
    }
    if observed is not None:
        new["epoch"] = observed.epoch if epoch is None else epoch
        new["members"] = len(observed.members)
        new["totalLag"] = observed.total_lag
    elif epoch is not None:
        new["epoch"] = epoch
    new.update(plan_fields)
    return {k: v for k, v in new.items() if ctx.status.get(k) != v}


def failed(
    ctx: PolicyContext, failure: PollFailure, memory: PolicyMemory, ports: Ports, now: float
) -> PollOutcome:
    """Conditions only, and a Warning Event when the reason is new."""
    memory.reported_generation = ctx.generation
    message = redaction.redact(failure.message)
    health = Health(
        ready=False,
        reason=failure.reason,
        message=message,
        stalled=failure.stalled,
        reconciling=not failure.stalled,
    )
    repeated = ctx.previous_ready().get("reason") == failure.reason
    ports.metrics.poll_failed(ctx.namespace, ctx.name, failure.reason)
    events = [] if repeated else [("Warning", failure.reason, message)]
    return PollOutcome(status(ctx, now, health), events, Stop.FAILED)


def waited(
    ctx: PolicyContext,
    observed: Observed,
    wait: Wait,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> PollOutcome:
    memory.reported_generation = ctx.generation
    _telemetry(ctx, observed, observed.applied(), observed.epoch, memory, ports, settings, now)
    return PollOutcome(status(ctx, now, wait.health, observed), [], wait.stop, succeeded=True)


def polled(
    ctx: PolicyContext,
    observed: Observed,
    planned: Planned,
    decision: Decision,
    applied: Applied,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> PollOutcome:
    spec, action = observed.spec, decision.action
    memory.reported_generation = ctx.generation
    events: list[Event] = []
    handoff_message = decision.message if decision.reason == "HandoffTimedOut" else ""
    if handoff_message:
        events.append(("Warning", "HandoffTimedOut", handoff_message))
    if applied.announcement:
        events.append(("Normal", "PlanApplied", applied.announcement))

    fields: dict[str, Any] = {"strategy": spec.strategy}
    ratio = planned.ratio_after if action is Action.APPLY else planned.ratio_before
    if ratio is not None:
        fields["maxLoadRatio"] = ratio
    if action is Action.APPLY:
        fields["lastAppliedTime"] = iso(now)
        fields["appliedPlan"] = applied.written_hash
    elif action is Action.NOOP:
        fields["appliedPlan"] = observed.current.applied_hash()
    offered, offer_events, note = proposal_fields(
        ctx, applied.proposal, applied.epoch, decision, settings
    )
    fields.update(offered)
    events += offer_events

    health = _health(ctx, observed, decision, applied, memory, now, note)
    if observed.mismatch and ctx.previous_ready().get("reason") != "ProtocolMismatch":
        events.append(("Warning", "ProtocolMismatch", observed.mismatch))
    new_status = status(ctx, now, health, observed, applied.epoch, **fields)

    owners = owner_codes(observed.lags.layout, applied.assignment)  # one pass for both
    _metrics(ctx, observed, applied, ratio, ports, owners)
    _telemetry(
        ctx, observed, applied.assignment, applied.epoch, memory, ports, settings, now, owners
    )
    ports.metrics.poll_succeeded(ctx.namespace, ctx.name, now)
    return PollOutcome(new_status, events, action, succeeded=True)


def _metrics(
    ctx: PolicyContext,
    observed: Observed,
    applied: Applied,
    ratio: float | None,
    ports: Ports,
    owners: tuple[list[str], np.ndarray],
) -> None:
    """Per partition: lag state, lag, time lag; per member of the applied plan: partitions and
    their summed lag; the epoch, total lag and maxLoadRatio the status reports. `owners`:
    `owner_codes` of the applied assignment."""
    lags = observed.lags
    members, owner = owners
    held = owner >= 0
    counts = np.bincount(owner[held], minlength=len(members))
    sums = np.bincount(owner[held], weights=np.maximum(lags.lags, 0)[held], minlength=len(members))
    ports.metrics.policy_state(
        ctx.namespace,
        ctx.name,
        observed.spec.group_id,
        partitions=PartitionRows(lags.layout, lags.states, lags.lags, lags.time_lags),
        members={m: (int(counts[i]), float(sums[i])) for i, m in enumerate(members)},
        epoch=applied.epoch,
        total_lag=observed.total_lag,
        max_load_ratio=ratio,
    )


def owner_codes(layout: Layout, assignment: Assignment) -> tuple[list[str], np.ndarray]:
    """(members in name order, each partition's owner as an index into them; -1: none). A
    partition listed under two members goes to the later one; partitions of topics the policy
    no longer has are left out."""
    members = sorted(assignment)
    rows: list[np.ndarray] = [np.empty(0, np.int64)]
    codes: list[np.ndarray] = [np.empty(0, np.int32)]
    spans = layout.spans
    for code, member in enumerate(members):
        held = assignment[member]
        if isinstance(held, TopicPartitions):  # a document's: its arrays, at once
            found = held.rows(spans)
        else:
            listed: list[int] = []
            for topic, parts in held.items():
                span = spans.get(topic)
                if span is None:
                    continue
                base, count = span
                listed += [base + p for p in parts if 0 <= p < count]
            found = np.array(listed, np.int64)
        rows.append(found)
        codes.append(np.full(len(found), code, np.int32))
    owner = np.full(layout.size, -1, np.int32)
    owner[np.concatenate(rows)] = np.concatenate(codes)
    return members, owner


def _health(
    ctx: PolicyContext,
    observed: Observed,
    decision: Decision,
    applied: Applied,
    memory: PolicyMemory,
    now: float,
    note: str = "",
) -> Health:
    """Ready with the decision's reason, unless the group has not converged on the applied
    plan (group and broker modes), the protocol does not fit, or a hand-over timed out."""
    spec, group = observed.spec, observed.observation.group
    message = f"{decision.message}; {note}" if note else decision.message
    reconciling = False
    stalled_reason: str | None = None
    if (
        spec.apply_mode in ("group", "broker")
        and group is not None
        and decision.action in _VERIFIED
    ):
        verification = verify(group, applied.assignment)
        message = f"{message}; {verification.message}"
        state = convergence(
            memory, now, verification.state == "converging", decision, spec.poll_interval
        )
        stalled_reason = "NotConverged" if state == "stalled" else None
        reconciling = state == "converging"
    if observed.unknown:
        message = f"{message}; lag unknown for {observed.unknown} partitions"
    if observed.observation.missing_topics:
        message = f"{message}; topics not found: {', '.join(observed.observation.missing_topics)}"
    previous = ctx.previous_ready()
    if observed.mismatch:
        stalled_reason, message = "ProtocolMismatch", f"{observed.mismatch}; {message}"
    elif decision.reason == "HandoffTimedOut":
        stalled_reason, message = "HandoffTimedOut", decision.message
    elif previous.get("reason") == "HandoffTimedOut" and decision.reason == "CoolingDown":
        # still waiting to retry the move that timed out: keep saying so until it is retried
        stalled_reason, message = "HandoffTimedOut", str(previous.get("message") or "")
    if stalled_reason is not None:
        return Health(False, stalled_reason, message, stalled=True)
    if reconciling:
        return Health(False, "Applying", message, reconciling=True)
    return Health(True, decision.reason, message)


_VERIFIED = (Action.NOOP, Action.APPLY, Action.REPAIR, Action.HOLD)


def convergence(
    memory: PolicyMemory, now: float, converging: bool, decision: Decision, poll_interval: float
) -> str:
    """ "converged", "converging", or "stalled" once the group has not run the plan in place
    for CONVERGENCE_POLLS poll intervals (the clock restarts with every new epoch)."""
    if not converging:
        memory.converging_since = None
        return "converged"
    if memory.converging_since is None or decision.action is Action.APPLY:
        memory.converging_since = now
    if now - memory.converging_since > CONVERGENCE_POLLS * poll_interval:
        return "stalled"
    return "converging"


def proposal_fields(
    ctx: PolicyContext,
    proposal: planning.Proposal | None,
    epoch: int,
    decision: Decision,
    settings: OperatorSettings,
) -> tuple[dict[str, Any], list[Event], str]:
    """status.proposal (set, kept, or removed once nothing is on offer), the AwaitingApproval
    Event when a new plan goes on offer, and the note a proposal too large for status adds."""
    if proposal is not None:
        fields, note = _proposal(proposal, epoch, settings.proposal_budget_bytes)
        events: list[Event] = []
        if (ctx.status.get("proposal") or {}).get("hash") != proposal.hash:
            events.append(("Normal", "AwaitingApproval", decision.message))
        return {"proposal": fields}, events, note
    if ctx.status.get("proposal") is not None and decision.action is not Action.HOLD:
        return {"proposal": None}, [], ""
    return {}, [], ""


def _proposal(proposal: planning.Proposal, epoch: int, budget: int) -> tuple[dict[str, Any], str]:
    """status.proposal: what is on offer, and the epoch approving it would write; and a note
    when its assignment is left out.

    The assignment is there so a restarted operator offers the same plan (and hash). A status
    that outgrows the API server's limits (about 1.5 MiB per object in etcd) is refused whole,
    and with it every safeguard status carries; so an assignment over `budget` bytes stays in
    the operator's memory only, and the condition says so."""
    text = planning.encode_assignment(proposal.assignment)
    fields = {
        "hash": proposal.hash,
        "moves": proposal.moves,
        "before": proposal.before,
        "after": proposal.after,
        "generatedAt": proposal.generated_at,
        "epoch": epoch + 1,
        "assignment": text,
    }
    note = ""
    if len(text.encode()) > budget:
        fields["assignment"] = None
        note = (
            f"the proposed assignment ({len(text.encode())} bytes) is over the status budget "
            f"({budget} bytes) and is kept in the operator's memory only: after an operator "
            "restart a new plan (and hash) is offered"
        )
    return {k: v for k, v in fields.items() if v is not None}, note


def _telemetry(
    ctx: PolicyContext,
    observed: Observed,
    assignment: Assignment,
    epoch: int,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
    owners: tuple[list[str], np.ndarray] | None = None,
) -> None:
    """A row per partition whose row changed since its last one (offsets, lag, state, time
    lag, owner or epoch), and every partition's at least every `telemetry.REFRESH_S`.
    `owners`: `owner_codes` of `assignment`, when the caller has it already."""
    if not ports.telemetry.enabled:
        return
    offsets, lags, layout = observed.offsets, observed.lags, observed.lags.layout
    members, owner = owners if owners is not None else owner_codes(layout, assignment)
    columns = telemetry.Columns(
        layout=layout,
        log_start=offsets.start,
        log_end=offsets.end,
        committed=offsets.committed,
        lag=lags.lags,
        state=lags.states,
        time_lag=np.round(lags.time_lags, 3),
        owner=owner,
        owners=tuple(members),
        epoch=epoch,
    )
    changed = columns.changed_since(memory.telemetry, now)
    memory.telemetry = columns.emitted(memory.telemetry, changed, now)
    rows = columns.encoded(
        changed,
        ts_ms=int(now * 1000),
        cluster=settings.cluster,
        namespace=ctx.namespace,
        policy=ctx.name,
        group=observed.spec.group_id,
    )
    if rows:
        ports.telemetry.emit(rows)
