"""Plan: the assignment this poll would like the group to have, from the real planner (the typed
`kafka_rebalance_assignors.plan_request`, which `kafka-rebalance plan` runs on its document too),
or the proposal already on offer, or the settlement of a hand-over that timed out.

Pure except for the capacity estimator and the proposal kept in memory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import kafka_rebalance_assignors as assignors
from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_common.wire import AssignmentDocument

from kafka_rebalance_operator import handoff, planning
from kafka_rebalance_operator.capacity import confirmed_owners
from kafka_rebalance_operator.kafka.verify import actual_assignment
from kafka_rebalance_operator.kube.members import resolve_weights
from kafka_rebalance_operator.lag import OK
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.partition_key import PartitionKey
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure
from kafka_rebalance_operator.phases.observe import Observed
from kafka_rebalance_operator.planning import Proposal
from kafka_rebalance_operator.settings import OperatorSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Planned:
    assignment: Assignment
    hash: str
    moves: int
    ratio_before: float | None  # maxLoadRatio of the plan in place, for this poll's loads
    ratio_after: float | None  # ... of `assignment`
    live_docs: dict[str, AssignmentDocument]  # the documents of members that are still present
    lingering: dict[str, AssignmentDocument]  # assign mode: running non-members still holding some
    proposal: Proposal | None  # the proposal on offer, when `assignment` is it
    timed_out: dict[str, list[PartitionKey]]  # revokes nobody acknowledged in time (settled)
    handoff_done: bool  # assign mode: the revoke of the applied epoch is over
    weights: Mapping[str, float] = field(default_factory=dict)  # the planner's, per member
    # weightFrom adaptive with no capacity measured yet: the weights are all 1 by default, not
    # by measurement, and decide holds load-following plans
    measuring: bool = False

    @property
    def holders(self) -> dict[str, AssignmentDocument]:
        """Everyone who may consume a partition now: members, and pods that linger."""
        return {**self.lingering, **self.live_docs}

    def with_lingering(self, assignment: Assignment) -> Assignment:
        """`assignment` plus an empty entry for each lingering pod, so its document is written
        (giving everything up) rather than its ConfigMap deleted while it may still consume."""
        return assignment.with_empty(self.lingering)


def plan(
    ctx: PolicyContext,
    observed: Observed,
    memory: PolicyMemory,
    settings: OperatorSettings,
    now: float,
) -> Planned:
    spec = observed.spec
    adaptive = _adaptive(ctx, observed, memory, now)
    weights = resolve_weights(spec, observed.members, adaptive)
    live_docs = {m: d for m, d in observed.current.by_member.items() if m in weights}
    request = planning.build_request(
        spec,
        observed.observation.topics,
        weights,
        live_docs,
        observed.lags.lag_values(),
        memory.history.produce_rates() if memory.history is not None else {},
    )
    try:
        result = assignors.plan_request(request)
    except assignors.PlanInputError as error:
        raise PollFailure("PlanFailed", f"the planner refused the input: {error}") from None
    pending = observed.handoff
    # the planner's assignment as it is (read-only, each member's lists built on first read)
    assignment = Assignment(result.assignment)
    planned = Planned(
        assignment=assignment,
        hash=planning.plan_hash(assignment),
        moves=len(result.moves),
        ratio_before=result.stats.max_load_ratio_before,
        ratio_after=result.stats.max_load_ratio,
        live_docs=live_docs,
        lingering=dict(observed.lingering),
        proposal=None,
        timed_out=dict(pending.waiting) if pending is not None and pending.timed_out else {},
        handoff_done=pending is not None,
        weights=weights,
        measuring=adaptive is not None and not memory.capacity.measured,
    )
    if planned.timed_out:
        planned = _settled(planned)
    if spec.needs_approval:
        planned = _on_offer(ctx, observed, planned, memory)
    return planned


def _settled(planned: Planned) -> Planned:
    """A hand-over that timed out: never grant a partition its old owner may still consume.
    The unacknowledged partitions go back to it, in a new epoch; the rest of the plan stands."""
    holders = planned.holders
    previous = Assignment(
        {
            m: {
                t: sorted(set(d.partitions.get(t, [])) | set(d.revoking.get(t, [])))
                for t in set(d.partitions) | set(d.revoking)
            }
            for m, d in holders.items()
        }
    )
    assignment = handoff.settle_timed_out(
        Assignment({m: d.partitions for m, d in holders.items()}),
        planned.with_lingering(planned.assignment),
        planned.timed_out,
    )
    return replace(
        planned,
        assignment=assignment,
        hash=planning.plan_hash(assignment),
        moves=planning.moves_between(previous, assignment),
        ratio_after=planned.ratio_before,
    )


def _on_offer(
    ctx: PolicyContext, observed: Observed, planned: Planned, memory: PolicyMemory
) -> Planned:
    """Approval: the proposal on offer stays the same while it still fits the group and is not
    applied, so the hash a user approves is the plan that gets applied even as lag moves. It is
    kept in status as well, so an operator restart offers the same plan (and hash) again."""
    kept = memory.proposal or planning.restore_proposal(ctx.status.get("proposal"))
    if (
        kept is None
        or kept.hash == observed.current.applied_hash()
        or not planning.proposal_fits(
            kept.assignment, observed.observation.topics, observed.member_names
        )
    ):
        memory.proposal = None
        return planned
    return replace(
        planned,
        assignment=kept.assignment,
        hash=kept.hash,
        moves=kept.moves,
        ratio_before=kept.before,
        ratio_after=kept.after,
        proposal=kept,
    )


def _adaptive(
    ctx: PolicyContext,
    observed: Observed,
    memory: PolicyMemory,
    now: float,
) -> dict[str, float] | None:
    """weightFrom: adaptive: weights from measured capacity (capacity.py), or None."""
    spec = observed.spec
    if spec.weight_from != "adaptive":
        return None
    # capacity from committed-offset advances of partitions whose owner did not change, while
    # backlogged; held inside a hysteresis band
    estimator = memory.capacity
    estimator.settle_s = spec.poll_interval
    lags, offsets = observed.lags, observed.offsets
    ok = [
        (key, int(offsets.committed[i]), int(lags.lags[i]))
        for i, key in enumerate(lags.layout.keys())
        if lags.states[i] == OK and lags.lags[i] >= 0 and offsets.committed[i] >= 0
    ]
    group = observed.observation.group if spec.apply_mode == "group" else None
    names = observed.member_names
    estimator.observe(
        now,
        confirmed_owners(
            observed.applied().owners(),
            actual_assignment(group).owners() if group is not None else None,
            group is not None and group.get("group_state") == "Stable",
        ),
        {key: committed for key, committed, _lag in ok},
        {key: lag for key, _committed, lag in ok},
        names,
    )
    demand = memory.history.demand() if memory.history is not None else 0.0
    held = dict(estimator.used)
    adaptive = estimator.weights(names, demand)
    if adaptive != held:
        log.info(
            "%s/%s adaptive weights %s from capacity %s records/s",
            ctx.namespace,
            ctx.name,
            {m: round(w, 3) for m, w in adaptive.items()},
            {m: round(c, 1) for m, c in estimator.effective(names, demand).items()},
        )
    return adaptive
