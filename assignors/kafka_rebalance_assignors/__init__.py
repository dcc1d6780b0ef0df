"""Pure partition planning for Kafka consumer groups: no I/O, deterministic, typed.

In-process callers build a typed `PlanRequest` and call `plan_request`, which returns a `Plan`;
`plan(document)` is the plan contract's JSON adapter over it (docs/planning.md).
Strategies live one per module and are listed in `kafka_rebalance_assignors.registry`.
"""

from kafka_rebalance_assignors.model import Assignment, Group, Member, Options, PlanInputError
from kafka_rebalance_assignors.parsing import parse_request, plan
from kafka_rebalance_assignors.planner import moves_between, plan_group, plan_request
from kafka_rebalance_assignors.registry import STRATEGY_NAMES
from kafka_rebalance_assignors.request import (
    MemberRequest,
    Move,
    OwnedColumns,
    Plan,
    PlanAssignment,
    PlanColumns,
    PlanOptions,
    PlanRequest,
    PlanStats,
    group_request,
)

__all__ = [
    "STRATEGY_NAMES",
    "Assignment",
    "Group",
    "Member",
    "MemberRequest",
    "Move",
    "Options",
    "OwnedColumns",
    "Plan",
    "PlanAssignment",
    "PlanColumns",
    "PlanInputError",
    "PlanOptions",
    "PlanRequest",
    "PlanStats",
    "group_request",
    "moves_between",
    "parse_request",
    "plan",
    "plan_group",
    "plan_request",
]
