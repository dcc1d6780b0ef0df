"""`sticky`: Kafka's StickyAssignor (KIP-54) with the KIP-341 generation rule.

The target assignment is computed by `assignors.sticky_core` (see its docstring for the two
algorithms: the KAFKA-9987 constrained path for identical subscriptions and the general path).
Kafka's eager sticky protocol revokes everything and hands out the whole target in one rebalance;
the plan's `moves` list is what changes owner between the previous and the target assignment.
"""

from __future__ import annotations

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment
from kafka_rebalance_assignors.sticky_core import sticky_assignment


def assign(context: PlanContext) -> Assignment:
    # balance and stickiness have no tunables in Kafka's sticky assignors
    return sticky_assignment(context)
