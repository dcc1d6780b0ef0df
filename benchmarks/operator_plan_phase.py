"""The operator's plan phase at a million partitions, without a broker or an API server.

    .venv/bin/python -m benchmarks.operator_plan_phase [--topics 500] [--partitions 2000] \
        [--members 2000] [--rounds 3] [--strategy cooperative-sticky] [--profile]

The steady state of `benchmarks.run`'s large identical case: every member's ConfigMap document
holds one partition of every topic (read back as the operator reads documents, `parse_document`
of their text), and the phase's own steps run on it one after the other, as `phases.plan.plan`
runs them: `planning.build_request`, `assignors.plan_request`, `Assignment(result.assignment)`
(the plan passed on as it is: no copy) and `planning.plan_hash` (which reads every member's
lists, built on that first read and then kept). Prints the CPU ms (median
of `--rounds`) of each step and of the bare assign on the same request (the reference the
planner's targets are measured against), and the load average. Figures only; nothing is
asserted. `--profile` prints a cProfile summary of one round instead.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import kafka_rebalance_assignors as assignors
from kafka_rebalance_assignors.context import prepare
from kafka_rebalance_assignors.registry import strategy_function
from kafka_rebalance_assignors.validation import validate
from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_operator import planning
from kafka_rebalance_operator.kube.assignment_doc import (
    document_text,
    parse_document,
    render_documents,
)
from kafka_rebalance_operator.policy import parse_spec

from benchmarks import cases as casegen
from benchmarks.measure import load_average, table


def _documents(args: argparse.Namespace) -> tuple[dict[str, int], dict[str, Any]]:
    """The case's topics and its members' documents as the operator reads them back."""
    case = casegen.large_case(False, True, args.topics, args.partitions, args.members)
    topics = case.document["topics"]
    owned = {m: case.previous.get(m, {}) for m in case.document["members"]}
    rendered = render_documents("g", owned, 1, "h", "T")
    current = {m: parse_document(document_text(d)) for m, d in rendered.items()}
    return topics, current


def _cpu(step: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    result = step()
    return (time.process_time() - start) * 1000, result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=2000, help="per topic")
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strategy", default="cooperative-sticky")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    print(f"load average before: {load_average()}")
    topics, current = _documents(args)
    spec = parse_spec(
        {
            "groupId": "g",
            "kafka": {"bootstrapServers": "k:9092"},
            "topics": list(topics),
            "members": {"selector": {"matchLabels": {"app": "x"}}},
            "strategy": args.strategy,
        }
    )
    weights = dict.fromkeys(current, 1.0)

    def phase() -> dict[str, float]:
        times: dict[str, float] = {}
        times["build_request"], request = _cpu(
            lambda: planning.build_request(spec, topics, weights, current, {}, {})
        )
        times["plan_request"], result = _cpu(lambda: assignors.plan_request(request))
        times["Assignment(assignment)"], assignment = _cpu(lambda: Assignment(result.assignment))
        times["plan_hash"], _ = _cpu(lambda: planning.plan_hash(assignment))
        times["phase"] = sum(times.values())
        parsed = validate(request)
        assign = strategy_function(parsed.strategy)
        times["bare assign (reference)"], _ = _cpu(
            lambda: assign(prepare(parsed.group, parsed.options))
        )
        return times

    if args.profile:
        profile = cProfile.Profile(time.process_time)
        profile.runcall(phase)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        return
    rounds = [phase() for _ in range(args.rounds)]
    rows = [[step, f"{statistics.median(r[step] for r in rounds):,.0f}"] for step in rounds[0]]
    print(table(["step", "CPU ms (median)"], rows))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
