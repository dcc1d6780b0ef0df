"""Group kinds: what differs between a consumer group and a streams group, behind one seam.

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

from collections.abc import Mapping
from typing import Any

from kafka_rebalance_operator.groups import consumer, share, streams
from kafka_rebalance_operator.groups.kind import GroupKind

__all__ = ["GroupKind", "kind_for"]


def kind_for(spec: Mapping[str, Any]) -> GroupKind[Any, Any, Any]:
    """The kind a policy's `spec.groupType` names (consumer when absent; parse_spec refuses
    any other value before a kind is used)."""
    kinds: dict[Any, GroupKind[Any, Any, Any]] = {"streams": streams.KIND, "share": share.KIND}
    return kinds.get(spec.get("groupType"), consumer.KIND)
