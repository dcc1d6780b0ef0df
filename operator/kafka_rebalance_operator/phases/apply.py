"""Apply: carry out the decision. Write the ConfigMaps of a new epoch (assign mode: the first
step of a hand-over, revokes before grants) or repair the applied one, and put a proposal on
offer. Every write goes through `ports.configmaps`, conditioned on the version the poll read
and on this process still leading (`_write`); a refused write is a PollFailure, and the next
poll re-reads the ConfigMaps and finishes or repairs what was partly written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_common.wire import AssignmentDocument

from kafka_rebalance_operator import handoff, names, ownership, planning, telemetry
from kafka_rebalance_operator.kube import assignment_doc
from kafka_rebalance_operator.kube.assignment_doc import CurrentState, Writes
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, iso
from kafka_rebalance_operator.phases.decide import Action, Decision
from kafka_rebalance_operator.phases.observe import Observed
from kafka_rebalance_operator.phases.plan import Planned
from kafka_rebalance_operator.planning import Proposal
from kafka_rebalance_operator.ports import ForeignConfigMap, Ports, StoreError, WriteConflict
from kafka_rebalance_operator.settings import OperatorSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Applied:
    # what the members' ConfigMaps give them after this poll
    assignment: Assignment
    epoch: int
    written_hash: str | None = None  # APPLY: the hash of what was written (status.appliedPlan)
    announcement: str | None = None  # APPLY: the PlanApplied event, unless one was posted lately
    proposal: Proposal | None = None  # PROPOSE: the plan on offer


def apply(
    ctx: PolicyContext,
    observed: Observed,
    planned: Planned,
    decision: Decision,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> Applied:
    if decision.action is Action.PROPOSE:
        return Applied(_in_place(planned), observed.epoch, proposal=_offer(planned, memory, now))
    if decision.action not in (Action.APPLY, Action.REPAIR):
        return Applied(_in_place(planned), observed.epoch)
    spec = observed.spec
    assignment, revoking, written_hash = planned.assignment, Assignment(), planned.hash
    if observed.two_step and decision.action is Action.APPLY and not planned.timed_out:
        # assign mode: every move; group mode: moves away from members outside the group
        holders = planned.holders
        if spec.apply_mode != "assign":
            holders = {m: d for m, d in holders.items() if m in observed.outside_group}
        step = handoff.first_step(holders, planned.with_lingering(planned.assignment))
        assignment, revoking = step.assignment, step.revoking
        written_hash = planning.plan_hash(assignment)
    documents = assignment_doc.render_documents(
        spec.group_id,
        assignment,
        decision.epoch,
        written_hash,
        iso(now),
        revoking,
        ctx.uid,
        ports.leadership.term,
    )
    writes = assignment_doc.diff(ctx.name, observed.current, documents)
    _write(ctx, observed.current, writes, ports)
    ownership.remember_written(memory.documents, documents)
    if decision.action is Action.REPAIR:
        return Applied(assignment, decision.epoch)
    memory.proposal = None
    memory.applied_epoch, memory.applied_at = decision.epoch, now
    announcement = _applied(ctx, observed, planned, decision, len(writes.upserts), ports, now)
    return Applied(
        assignment,
        decision.epoch,
        written_hash=written_hash,
        announcement=announcement
        if _may_announce(memory, now, settings.event_min_interval_s)
        else None,
    )


def _write(ctx: PolicyContext, current: CurrentState, writes: Writes, ports: Ports) -> None:
    """Carry out `writes`, fenced against any other writer.

    Every write is conditioned on the resourceVersion this poll read (or returned by this
    poll's own previous write): a ConfigMap that changed since is never overwritten, the poll
    stops (WriteConflict) and the next one reads again. A leader of a new term first stamps its
    term on every ConfigMap an older term wrote, before it grants anything: from then on no
    write of the deposed leader, conditioned on a version it read, can land, so no partition is
    granted by both. And no write starts once this process may no longer write (its own clock
    says its lease may have passed to a standby)."""
    leadership = ports.leadership
    versions = {name: shown.resource_version for name, shown in current.configmaps.items()}
    for name in [*(names.configmap_name(ctx.name, d.member) for d in writes.upserts)]:
        shown = current.configmaps.get(name)
        if shown is not None and not shown.owned_by(ctx.name):
            owners = ", ".join(shown.owners or ()) or "no owner"
            raise PollFailure(
                "ConfigMapConflict",
                str(ForeignConfigMap(ctx.namespace, name, f"owned by {owners}")),
            )
    fence = assignment_doc.older_terms(current, leadership.term) if writes else []
    try:
        for name in fence:
            fenced = current.configmaps[name].document
            assert fenced is not None  # older_terms lists readable documents only
            stamped = replace(fenced, leader_term=leadership.term)
            versions[name] = _upsert(ctx, stamped, versions[name], ports)
        for item in writes.upserts:
            name = names.configmap_name(ctx.name, item.member)
            versions[name] = _upsert(ctx, item, versions.get(name, ""), ports)
        for name in writes.deletes:
            _may_write(ports)
            ports.configmaps.delete(ctx.namespace, name, versions.get(name, ""))
    except StoreError as error:
        raise PollFailure("ApplyFailed", f"writing ConfigMaps: {error}") from None
    except ForeignConfigMap as error:
        raise PollFailure("ConfigMapConflict", str(error)) from None
    except WriteConflict as error:
        raise PollFailure("WriteConflict", str(error), stalled=False) from None


def _upsert(ctx: PolicyContext, document: AssignmentDocument, version: str, ports: Ports) -> str:
    _may_write(ports)
    return ports.configmaps.upsert(
        assignment_doc.configmap_body(ctx.name, ctx.uid, ctx.namespace, document, version)
    )


def _may_write(ports: Ports) -> None:
    if not ports.leadership.may_write():
        raise PollFailure(
            "LeadershipLost",
            "this replica could not renew its leader Lease in time and writes nothing more "
            "(a standby takes over)",
            stalled=False,
        )


def _offer(planned: Planned, memory: PolicyMemory, now: float) -> Proposal:
    memory.proposal = planning.offer(
        planned.proposal,
        planned.hash,
        planned.assignment,
        planned.moves,
        planned.ratio_before,
        planned.ratio_after,
        iso(now),
    )
    return memory.proposal


def _applied(
    ctx: PolicyContext,
    observed: Observed,
    planned: Planned,
    decision: Decision,
    written: int,
    ports: Ports,
    now: float,
) -> str:
    """A new epoch is written: count it, log it, emit its telemetry row; the Event text."""
    spec = observed.spec
    ports.metrics.plan_applied(ctx.namespace, ctx.name, spec.group_id, planned.moves)
    message = (
        f"epoch {decision.epoch}: plan {planned.hash}, {planned.moves} partitions moved, "
        f"maxLoadRatio {_fmt(planned.ratio_before)} -> {_fmt(planned.ratio_after)}, "
        f"{written} ConfigMaps written"
    )
    log.info(
        "%s/%s %s; weights %s",
        ctx.namespace,
        ctx.name,
        message,
        {m: round(w, 3) for m, w in sorted(planned.weights.items())} or "none",
    )
    ports.telemetry.emit(
        [
            telemetry.plan_row(
                ts_ms=int(now * 1000),
                group=spec.group_id,
                epoch=decision.epoch,
                strategy=spec.strategy,
                moves=planned.moves,
                before=planned.ratio_before,
                after=planned.ratio_after,
                namespace=ctx.namespace,
                policy=ctx.name,
            )
        ]
    )
    return message


def _may_announce(memory: PolicyMemory, now: float, min_interval_s: float) -> bool:
    """At most one PlanApplied Event per policy per `min_interval_s`."""
    if memory.last_event is not None and now - memory.last_event < min_interval_s:
        return False
    memory.last_event = now
    return True


def _in_place(planned: Planned) -> Assignment:
    """What the present members' ConfigMaps give them now (nothing is written)."""
    return Assignment({m: d.partitions for m, d in planned.live_docs.items()})


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"
