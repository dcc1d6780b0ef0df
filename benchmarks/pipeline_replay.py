"""What one group's backtest costs, without Spark: planner calls and CPU seconds per group.

`pipeline backtest` is bound by the replays (the planner above all), so groups per minute
depends on each group's history length, its partitions, and how many candidates are
load-driven (replanned every poll). This measures those dependencies directly, on the same
synthetic groups as the Spark benchmark (`benchmarks.pipeline_data`: same spec and seed), in one
process, so the plan cache's effect (`share_plans`) is measured with everything else equal:

    python -m benchmarks.pipeline_replay --groups 0-9 --polls 480 --grid full --compare
    python -m benchmarks.pipeline_replay --groups 0-3 --polls 120,240,480,960 --grid strategies

CPU seconds (process time) are printed next to wall seconds: on a shared machine the CPU time
is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import kafka_rebalance_assignors as assignors
import pandas as pd
from kafka_rebalance_pipeline.generate import FleetSpec, GroupTruth, generate_group
from kafka_rebalance_pipeline.replay import GRIDS, LOAD_DRIVEN, backtest_group, history_from_rows


def _ints(text: str) -> list[int]:
    values: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        values += list(range(int(low), int(high or low) + 1))
    return values


def measure(
    index: int, polls: int, grid: str, share: bool, partitions: tuple[int, int]
) -> dict[str, Any]:
    spec = FleetSpec(groups=index + 1, polls=polls, partitions=partitions)
    truth: list[GroupTruth] = []
    rows = [r for r in generate_group(spec, index, truth) if r.get("kind") != "plan"]
    record = truth[0]
    key = {"cluster": spec.cluster, "namespace": record.namespace, "policy": record.policy}
    key["group"] = record.group
    history = history_from_rows(key, pd.DataFrame(rows), record.capacity, "range")
    real_plan = assignors.plan_request
    calls = 0

    def counting(request: assignors.PlanRequest) -> assignors.Plan:
        nonlocal calls
        calls += 1
        return real_plan(request)

    assignors.plan_request = counting
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        out = backtest_group(history, grid, share_plans=share)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        assignors.plan_request = real_plan
    candidates = GRIDS[grid]("range")
    return {
        "group": record.group,
        "partitions": len(history.partitions),
        "members": len(record.members),
        "polls": polls,
        "grid": grid,
        "candidates": len(candidates),
        "load_driven": sum(c.strategy in LOAD_DRIVEN for c in candidates),
        "shared": share,
        "decisions": sum(r["plans"] for r in out),
        "planner_calls": calls,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="0-4", help="group indexes, e.g. 0-9 or 0,5,7")
    parser.add_argument("--polls", default="480", help="history lengths, e.g. 120,240,480")
    parser.add_argument("--grid", default="full", help="full, strategies, or both: full,strategies")
    parser.add_argument("--partitions", default="12-30")
    parser.add_argument("--compare", action="store_true", help="also without the plan cache")
    args = parser.parse_args()
    low, _, high = args.partitions.partition("-")
    for grid in args.grid.split(","):
        for polls in _ints(args.polls):
            for index in _ints(args.groups):
                for share in (False, True) if args.compare else (True,):
                    result = measure(index, polls, grid, share, (int(low), int(high)))
                    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
