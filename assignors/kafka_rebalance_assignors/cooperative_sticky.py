"""`cooperative-sticky`: Kafka's CooperativeStickyAssignor (KIP-429 on top of KIP-54/KIP-341).

The cooperative assignor computes the same target as `sticky` (same balance, same stickiness,
same KAFKA-9987 fast path for identical subscriptions), so this module reuses
`assignors.sticky_core`. What differs in Kafka is only how the target is reached: a partition that
changes owner is left out of the first rebalance's assignment (its old owner revokes it), and it is
granted to the new owner in the follow-up rebalance, once nobody owns it. The plan's target is
that converged assignment and its `moves` list is exactly the set of partitions that take the two
rounds (revoke, then grant); partitions nobody owned are granted in the first round.
`tests/unit/assignors/test_sticky_properties.py` simulates the two rounds and checks that they
converge.
"""

from __future__ import annotations

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment
from kafka_rebalance_assignors.sticky_core import sticky_assignment


def assign(context: PlanContext) -> Assignment:
    # no tunables, as in Kafka
    return sticky_assignment(context)
