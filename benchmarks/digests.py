"""Output digests of the benchmark inputs: the before/after check for speed-only changes.

    .venv/bin/python -m benchmarks.digests --out before.txt [--no-large]
    .venv/bin/python -m benchmarks.digests --out after.txt [--no-large] --compare before.txt

A speed-up of the planner must not change a single byte of any plan. This runs `plan()` on the
benchmark's inputs (JMH grid cells, the skewed quality suite and its second round, the lag-aware
100k cases, the 1M-partition cases) under every strategy and prints one SHA-256 per plan, taken
over the JSON text in the plan's own key order (so a reordered dict counts as a change too).
`--compare` lists every case whose digest differs from an earlier file and exits 1 if any does.
`--columns` also plans each case's request in columns (every member's claims as `OwnedColumns`
of `array('i')`, as the operator passes them; lag and rate as float arrays, NaN for null)
through `plan_request` and counts the plans whose document differs from `plan()`'s (exit 1 if
any). The test suites' inputs are covered by `benchmarks.output_record` (a pytest plugin).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import accumulate, chain
from pathlib import Path
from typing import Any

from kafka_rebalance_assignors import MemberRequest, OwnedColumns, PlanRequest, plan_request
from kafka_rebalance_assignors.parsing import plan, request_from_document
from kafka_rebalance_assignors.registry import STRATEGY_NAMES

from benchmarks import cases as casegen

Document = dict[str, Any]


def digest(result: Any) -> str:
    return hashlib.sha256(json.dumps(result, separators=(",", ":")).encode()).hexdigest()


def _owned_columns(owned: Mapping[str, Sequence[int]]) -> OwnedColumns:
    """A member's claims as the operator holds them: names, one `array('i')` of every topic's
    partitions, and where each topic's run starts."""
    runs = list(owned.values())
    starts = array("i", accumulate(map(len, runs), initial=0))
    return OwnedColumns(tuple(owned), array("i", chain.from_iterable(runs)), starts)


def _float_column(values: Sequence[float | None]) -> array[float]:
    return array("d", [math.nan if value is None else value for value in values])


def columns_request(document: Document, strategy: str) -> PlanRequest:
    """The document's request with claims, lag and rate as columns."""
    request = request_from_document(document, strategy)
    members: dict[str, MemberRequest] = {
        member_id: replace(member, owned=_owned_columns(member.owned))
        for member_id, member in request.members.items()
    }
    return replace(
        request,
        members=members,
        lag={topic: _float_column(values) for topic, values in request.lag.items()},
        rate={topic: _float_column(values) for topic, values in request.rate.items()},
    )


def _grid() -> Iterator[tuple[str, Document]]:
    for members in (10, 100, 1000):
        for ratio in (5, 10):
            for topics in (10, 100):
                for subscription in casegen.SUBSCRIPTIONS:
                    for event in casegen.EVENTS:
                        case = casegen.jmh_case(members, ratio, topics, subscription, event)
                        if case is not None:
                            yield f"grid {case.name}", case.document


def _quality() -> Iterator[tuple[str, Document]]:
    sizes = ((1, 16, 4), (2, 32, 6), (4, 50, 12), (10, 100, 30), (20, 200, 100))
    for weights in ((1.0, 2.0, 4.0), (1.0,)):
        for topics, per_topic, members in sizes:
            for seed in (1, 2, 3):
                case = casegen.skewed_case(seed, topics, per_topic, members, 1.16, weights)
                yield f"quality {case.name}", case.document
                for options in ({"count_balance": "strict"}, {"max_moves": 3}):
                    yield f"quality {case.name} {options}", {**case.document, "options": options}
                first = plan(case.document, "lag-aware")
                steady = casegen.perturbed_lags(
                    casegen.with_owned(case.document, first["assignment"]),
                    random.Random(seed),
                    0.1,
                )
                yield f"quality {case.name} round 2", steady
                yield (
                    f"quality {case.name} round 2 strict 0.1",
                    {**steady, "options": {"count_balance": "strict", "min_improvement": 0.1}},
                )


def _lagaware() -> Iterator[tuple[str, Document]]:
    case = casegen.skewed_case(11, 100, 1000, 1000, 1.16)
    fresh = case.document
    yield "lagaware 100k fresh", fresh
    first = plan(fresh, "lag-aware")
    steady = casegen.perturbed_lags(
        casegen.with_owned(fresh, first["assignment"]), random.Random(5), 0.03
    )
    yield "lagaware 100k steady", steady
    yield "lagaware 100k steady 0.1", {**steady, "options": {"min_improvement": 0.1}}
    yield "lagaware 100k steady budget", {**steady, "options": {"max_moves": "1%"}}


def _large(full: bool) -> Iterator[tuple[str, Document]]:
    sizes = [(50, 1000, 200)] + ([(500, 2000, 2000)] if full else [])
    for topics, per_topic, members in sizes:
        for general in (False, True):
            for owned in (False, True):
                case = casegen.large_case(general, owned, topics, per_topic, members)
                yield f"large {case.name}", case.document


def runs(full: bool) -> Iterator[tuple[str, str, Document]]:
    """(case, strategy, document) for every plan checked."""
    for name, document in _grid():
        for strategy in STRATEGY_NAMES:
            yield name, strategy, document
    for name, document in _quality():
        for strategy in STRATEGY_NAMES:
            yield name, strategy, document
    for name, document in _lagaware():
        for strategy in ("lag-aware", "cooperative-sticky", "weighted-sticky", "kip169"):
            yield name, strategy, document
    for name, document in _large(full):
        small = sum(document["topics"].values()) <= 100_000
        strategies = STRATEGY_NAMES if small else ("cooperative-sticky", "sticky", "range")
        for strategy in strategies:
            yield name, strategy, document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.digests", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="an earlier --out file")
    parser.add_argument("--no-large", action="store_true", help="skip the 1M-partition cases")
    parser.add_argument(
        "--columns", action="store_true", help="also plan each request as columns, compare"
    )
    args = parser.parse_args(argv)
    lines = []
    columns_differ: list[str] = []
    for name, strategy, document in runs(not args.no_large):
        result = plan(document, strategy)
        lines.append(f"{digest(result)}  {strategy}  {name}")
        if args.columns:
            columnar = plan_request(columns_request(document, strategy)).to_document()
            if digest(columnar) != digest(result):
                columns_differ.append(f"{strategy}  {name}")
        del result
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} plans digested into {args.out}")
    if args.columns:
        for key in columns_differ:
            print(f"COLUMNS DIFFER {key}")
        print(f"{len(lines)} plans of column requests compared, {len(columns_differ)} differ")
        if columns_differ:
            return 1
    if args.compare is None:
        return 0
    before = {line[66:]: line[:64] for line in args.compare.read_text().splitlines()}
    after = {line[66:]: line[:64] for line in lines}
    common = before.keys() & after.keys()
    changed = sorted(key for key in common if before[key] != after[key])
    for key in changed:
        print(f"CHANGED {key}")
    print(f"{len(common)} plans compared, {len(changed)} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
