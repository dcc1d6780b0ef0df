"""Consumer groups (classic and KIP-848) as a group kind: partitions planned per member pod,
delivered through per-member ConfigMaps (assign and group modes) or, in broker mode, through
the plan topic to the brokers' plan-following assignor.

The phases this kind runs are the modules of `phases/` (observe, plan, apply, publish,
report); this module states what it tells decide.
"""

from __future__ import annotations

from kafka_rebalance_operator import handoff, planning
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.kube import assignment_doc
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases import report
from kafka_rebalance_operator.phases.apply import Applied, apply
from kafka_rebalance_operator.phases.context import PolicyContext
from kafka_rebalance_operator.phases.decide import Decision, PlanFacts, Stop, Wait
from kafka_rebalance_operator.phases.observe import Observed, observe
from kafka_rebalance_operator.phases.plan import Planned, plan
from kafka_rebalance_operator.phases.publish import publish, retire
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.settings import OperatorSettings


def wait(observed: Observed) -> Wait | None:
    """No members, or (assign mode) a revoke still waiting for acknowledgements: no plan now."""
    if not observed.members:
        return Wait(
            Stop.NO_MEMBERS,
            Health(
                False,
                "NoMembers",
                "no Running and Ready pod matches spec.members.selector; the applied "
                f"plan (epoch {observed.epoch}) is kept",
                stalled=True,
            ),
        )
    pending = observed.handoff
    if pending is not None and not pending.done:
        return Wait(
            Stop.HANDING_OFF,
            Health(
                False,
                "HandingOff",
                f"epoch {observed.epoch}: waiting for old owners to commit revoked partitions "
                f"({handoff.describe_waiting(pending.waiting)})",
                reconciling=True,
            ),
        )
    return None


def facts(ctx: PolicyContext, observed: Observed, planned: Planned) -> PlanFacts:
    """A plan the group needs for coverage, the first plan after the user changed the spec, or
    one that writes again what a member's ConfigMap no longer shows, is structural. Manual
    commits refused while members have joined (a protocol mismatch) hold a new assign-mode
    epoch: its revoke could never be acknowledged."""
    spec = observed.spec
    applied_hash = observed.current.applied_hash()
    rendered = assignment_doc.render_documents(
        spec.group_id, planned.assignment, observed.epoch, planned.hash, ""
    )
    mismatch = observed.mismatch is not None and spec.apply_mode == "assign"
    return PlanFacts(
        new_hash=planned.hash,
        applied_hash=applied_hash,
        epoch=observed.epoch,
        last_applied_at=observed.last_applied_at,
        ratio_before=planned.ratio_before,
        ratio_after=planned.ratio_after,
        moves=planned.moves,
        structural=(
            observed.spec_changed
            or bool(observed.unwritten)
            or planning.placement_needed(
                observed.observation.topics, observed.member_names, observed.current.by_member
            )
        ),
        writes_needed=applied_hash == planned.hash
        and bool(assignment_doc.diff(ctx.name, observed.current, rendered)),
        handoff_done=planned.handoff_done,
        inherited=observed.inherited,
        timed_out=handoff.describe_waiting(planned.timed_out) if planned.timed_out else None,
        measuring=planned.measuring,
        held=("ProtocolMismatch", "a new plan is held") if mismatch else None,
    )


def carry_out(
    ctx: PolicyContext,
    observed: Observed,
    planned: Planned,
    decision: Decision,
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> Applied:
    """ConfigMaps written (apply), and in broker mode the plan published; a policy that left
    broker mode retires its record."""
    applied = apply(ctx, observed, planned, decision, memory, ports, settings, now)
    if observed.spec.apply_mode == "broker":
        publish(ctx, observed, applied, memory, settings, now, ports.metrics)
    elif memory.published_group is not None:  # left broker mode: the brokers drop its plan
        retire(memory, settings, f"{ctx.namespace}/{ctx.name}")
    return applied


class ConsumerKind:
    """The consumer kind (`GroupKind`): the phases of `phases/`."""

    name = "consumer"
    observe = staticmethod(observe)
    wait = staticmethod(wait)
    plan = staticmethod(plan)
    facts = staticmethod(facts)
    carry_out = staticmethod(carry_out)
    waited = staticmethod(report.waited)
    report = staticmethod(report.polled)


KIND = ConsumerKind()
