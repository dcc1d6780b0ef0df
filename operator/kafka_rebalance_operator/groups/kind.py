"""The seam between the poll and a group kind: what differs between kinds of group.

`reconcile.poll` runs every policy through the same steps: observe, (wait), plan, decide,
carry out, report. A `GroupKind` supplies the kind-specific ones; decide
(`phases.decide.decide`: mode, approval, cooldown, minImprovement, hysteresis), the proposal
on offer, conditions and status are the same code for every kind. Each kind owns:

- what it observes (a consumer group's offsets, members' ConfigMaps and hand-overs; a
  streams group's topology, tasks and their loads);
- the units it plans (partitions; tasks) and the planner it calls (`kafka_rebalance_assignors`);
- the facts decide reads (`PlanFacts`), including its own holds;
- how a plan reaches the group (ConfigMaps and static membership, or the plan topic and a
  plug-in, with a trigger where the coordinator needs one);
- its status fields beside the common ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.context import PolicyContext
from kafka_rebalance_operator.phases.decide import Decision, PlanFacts, Wait
from kafka_rebalance_operator.phases.report import PollOutcome
from kafka_rebalance_operator.policy import PolicySpec
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.settings import OperatorSettings

ObservedT = TypeVar("ObservedT")
PlannedT = TypeVar("PlannedT")
AppliedT = TypeVar("AppliedT")


class Observation(Protocol):
    """What every kind's observation carries: the parsed spec."""

    @property
    def spec(self) -> PolicySpec: ...


class GroupKind(Protocol[ObservedT, PlannedT, AppliedT]):
    """One kind of group. Every method but `facts` may raise `PollFailure`; none writes status
    (the returned `PollOutcome` carries it)."""

    name: str

    def observe(
        self,
        ctx: PolicyContext,
        pods: Sequence[PodSummary],
        memory: PolicyMemory,
        ports: Ports,
        settings: OperatorSettings,
        now: float,
    ) -> ObservedT: ...

    def wait(self, observed: ObservedT) -> Wait | None:
        """A reason to stop before planning that is not a failure (no members, a hand-over)."""

    def plan(
        self,
        ctx: PolicyContext,
        observed: ObservedT,
        memory: PolicyMemory,
        settings: OperatorSettings,
        now: float,
    ) -> PlannedT: ...

    def facts(self, ctx: PolicyContext, observed: ObservedT, planned: PlannedT) -> PlanFacts:
        """Pure: what decide reads."""

    def carry_out(
        self,
        ctx: PolicyContext,
        observed: ObservedT,
        planned: PlannedT,
        decision: Decision,
        memory: PolicyMemory,
        ports: Ports,
        settings: OperatorSettings,
        now: float,
    ) -> AppliedT: ...

    def waited(
        self,
        ctx: PolicyContext,
        observed: ObservedT,
        wait: Wait,
        memory: PolicyMemory,
        ports: Ports,
        settings: OperatorSettings,
        now: float,
    ) -> PollOutcome: ...

    def report(
        self,
        ctx: PolicyContext,
        observed: ObservedT,
        planned: PlannedT,
        decision: Decision,
        applied: AppliedT,
        memory: PolicyMemory,
        ports: Ports,
        settings: OperatorSettings,
        now: float,
    ) -> PollOutcome: ...
