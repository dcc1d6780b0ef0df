"""Pure partition planning for Kafka consumer groups: no I/O, deterministic, typed.

`plan(document)` implements the plan contract of docs/architecture.md; strategies live one per
module and are listed in `kafka_rebalance_assignors.registry`.
"""

from kafka_rebalance_assignors.model import (
    Assignment,
    Group,
    Member,
    Options,
    PlanInputError,
    parse_request,
)
from kafka_rebalance_assignors.plan import plan, plan_group
from kafka_rebalance_assignors.registry import STRATEGY_NAMES

__all__ = [
    "STRATEGY_NAMES",
    "Assignment",
    "Group",
    "Member",
    "Options",
    "PlanInputError",
    "parse_request",
    "plan",
    "plan_group",
]
