"""Strategy names (shared by the CLI, the CRD and the benchmarks) and their implementations.

Every strategy module exposes `assign(context: PlanContext) -> Assignment`: a pure function
returning the target assignment for `context.group` under `context.options`, reading the
prepared loads, ownership and subscribers from the context (see `assignors.context`). It may
omit members that get nothing, may list partitions in any order, and may share one immutable
sequence (a tuple) between entries or give a member's entry as the read-only mapping it was
given (`model.PartitionClaims`), so the result is read-only; `assignors.planner` normalises it
into fresh sorted lists and checks its validity.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment

StrategyFunction = Callable[[PlanContext], Assignment]

STRATEGY_MODULES: dict[str, str] = {
    "range": "kafka_rebalance_assignors.range_assignor",
    "roundrobin": "kafka_rebalance_assignors.roundrobin",
    "sticky": "kafka_rebalance_assignors.sticky",
    "cooperative-sticky": "kafka_rebalance_assignors.cooperative_sticky",
    "kip169": "kafka_rebalance_assignors.kip169",
    "weighted-sticky": "kafka_rebalance_assignors.weighted_sticky",
    "lag-aware": "kafka_rebalance_assignors.lag_aware",
}

STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGY_MODULES)


def strategy_function(name: str) -> StrategyFunction:
    """The `assign` function of a strategy; KeyError for an unknown name."""
    assign: StrategyFunction = importlib.import_module(STRATEGY_MODULES[name]).assign
    return assign
