"""Benchmarks: speed side by side with Kafka's own assignors, plan quality on skewed lags.

    .venv/bin/python -m benchmarks.run [--quick] [--sections grid,large,quality,lagaware]
                                       [--json results.json] [--no-kafka] [grid selection flags]

Sections:
  grid      Kafka's JMH assignor grid (members x partitions-per-member x topics, homogeneous or
            heterogeneous subscriptions, fresh or incremental), every cell run by Kafka's Java
            assignors and ours on the same document in the same invocation.
  large     the 1M-partition scale test (500 topics x 2,000 partitions, 2,000 members), identical
            subscriptions (Kafka's constrained path) and the general path, fresh and with owned.
  quality   plan quality on Pareto lags with weights 1/2/4: max_load_ratio and moves per strategy,
            then a second round (plan fed back as owned, lags perturbed) to show churn.
  lagaware  `lag-aware` at 100,000 partitions x 1,000 members, bare and with the JSON round trip.

Everything printed is a figure (times, ratios against a reference measured in the same run,
quality ratios); nothing here passes or fails. The summary at the end states each project target
and whether this run met it.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assignors.model import parse_request
from assignors.plan import plan
from assignors.registry import STRATEGY_NAMES, strategy_function
from benchmarks import cases as casegen
from benchmarks import checks, kafka_harness
from benchmarks.measure import fmt_ms, fmt_ratio, load_average, machine, median, table, timed

SPEED_STRATEGIES = ("cooperative-sticky", "sticky", "range", "lag-aware")
KAFKA_ASSIGNORS = ("cooperative-sticky", "sticky", "range", "uniform")
KAFKA_LABEL = {
    "cooperative-sticky": "CooperativeStickyAssignor",
    "sticky": "StickyAssignor",
    "range": "RangeAssignor",
    "uniform": "UniformAssignor (KIP-848)",
}
# Ours -> the Kafka assignor it is compared with. lag-aware has no Kafka twin: its reference is
# CooperativeStickyAssignor, the assignor a group would otherwise run.
REFERENCE = {
    "cooperative-sticky": "cooperative-sticky",
    "sticky": "sticky",
    "range": "range",
    "lag-aware": "cooperative-sticky",
}
QUALITY_CONFIGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("lag-aware relaxed", "lag-aware", {"count_balance": "relaxed"}),
    ("lag-aware strict", "lag-aware", {"count_balance": "strict"}),
    ("kip169", "kip169", {}),
    ("weighted-sticky", "weighted-sticky", {}),
    ("sticky", "sticky", {}),
    ("range", "range", {}),
)
CHURN_CONFIGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("lag-aware relaxed", "lag-aware", {"count_balance": "relaxed", "min_improvement": 0.0}),
    ("lag-aware relaxed", "lag-aware", {"count_balance": "relaxed", "min_improvement": 0.1}),
    ("lag-aware strict", "lag-aware", {"count_balance": "strict", "min_improvement": 0.0}),
    ("lag-aware strict", "lag-aware", {"count_balance": "strict", "min_improvement": 0.1}),
    ("kip169", "kip169", {}),
    ("weighted-sticky", "weighted-sticky", {}),
    ("sticky", "sticky", {}),
)
QUALITY_TARGET = 1.05


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _words(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Assignor benchmarks: speed next to Kafka's Java assignors, plan quality.",
    )
    parser.add_argument("--sections", default="grid,large,quality,lagaware", type=_words)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run in ~2 min")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--no-kafka", action="store_true", help="skip the Java side")
    parser.add_argument("--workdir", type=Path, default=kafka_harness.TARGET / "run")
    parser.add_argument(
        "--strategies", type=_words, default=list(SPEED_STRATEGIES), help="ours, speed sections"
    )
    grid = parser.add_argument_group("grid (Kafka's JMH grid; each flag a comma list)")
    grid.add_argument("--grid-members", type=_ints, default=[100, 1000, 10000])
    grid.add_argument("--grid-ratios", type=_ints, default=[10], help="partitions per member")
    grid.add_argument("--grid-topics", type=_ints, default=[10, 100, 1000])
    grid.add_argument("--grid-subscriptions", type=_words, default=list(casegen.SUBSCRIPTIONS))
    grid.add_argument("--grid-events", type=_words, default=["full", "join"])
    grid.add_argument(
        "--budget-minutes", type=float, default=12.0, help="grid cells after this are skipped"
    )
    large = parser.add_argument_group("large (the 1M-partition scale test)")
    large.add_argument("--large-topics", type=int, default=500)
    large.add_argument("--large-partitions", type=int, default=2000, help="per topic")
    large.add_argument("--large-members", type=int, default=2000)
    quality = parser.add_argument_group("quality")
    quality.add_argument("--seeds", type=_ints, default=[1, 2, 3, 4, 5])
    quality.add_argument("--alpha", type=float, default=1.16, help="Pareto shape of the lags")
    quality.add_argument("--churn", type=float, default=0.03, help="lag perturbation, round 2")
    lag = parser.add_argument_group("lagaware")
    lag.add_argument("--lag-topics", type=int, default=100)
    lag.add_argument("--lag-partitions", type=int, default=1000, help="per topic")
    lag.add_argument("--lag-members", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.quick:
        args.grid_members = [100, 1000]
        args.grid_topics = [10, 100]
        args.large_topics, args.large_partitions, args.large_members = 50, 1000, 200
        args.seeds = args.seeds[:2]
        args.lag_topics, args.lag_partitions, args.lag_members = 10, 1000, 100
    return args


@dataclass
class Sizing:
    """Iterations per measurement: many for small cases, few where one call takes seconds."""

    iterations: int
    warmup: int
    java_warmup: int
    java_iterations: int

    @staticmethod
    def for_partitions(partitions: int) -> Sizing:
        if partitions <= 20_000:
            return Sizing(5, 1, 5, 10)
        if partitions <= 200_000:
            return Sizing(3, 0, 3, 5)
        return Sizing(3, 0, 2, 5)


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.workdir: Path = args.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "java.log"
        self.kafka = kafka_harness.kafka_version()
        self.java = kafka_harness.java_version()
        self.results: dict[str, Any] = {
            "command": " ".join(["python -m benchmarks.run", *sys.argv[1:]]),
            "machine": machine(self.java, self.kafka),
            "strategies": {},
            "sections": {},
        }
        self.available = self._available()
        self.classpath: str | None = None

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def _available(self) -> dict[str, str | None]:
        status: dict[str, str | None] = {}
        for name in STRATEGY_NAMES:
            try:
                strategy_function(name)
                status[name] = None
            except Exception as error:  # a strategy still being written: report, carry on
                status[name] = f"{type(error).__name__}: {error}"
        self.results["strategies"] = {k: v or "ok" for k, v in status.items()}
        return status

    def usable(self, name: str) -> bool:
        return self.available.get(name, "unknown strategy") is None

    def java_classpath(self) -> str | None:
        if self.args.no_kafka:
            return None
        if self.classpath is None:
            try:
                self.classpath = kafka_harness.build(self.kafka, self.log)
            except kafka_harness.HarnessError as error:
                self.say(f"Kafka side unavailable: {error}")
                self.args.no_kafka = True
                return None
        return self.classpath

    # ------------------------------------------------------------------------- speed

    def kafka_side(self, section: str, cases: list[casegen.Case]) -> list[dict[str, Any] | None]:
        """Run Kafka's assignors on every case (one JVM); check each output."""
        classpath = self.java_classpath()
        if classpath is None:
            return [None] * len(cases)
        folder = self.workdir / section
        folder.mkdir(parents=True, exist_ok=True)
        outputs: list[dict[str, Any] | None] = []
        # One JVM per sizing class, so the iteration counts match the Python side's.
        by_sizing: dict[tuple[int, int], list[int]] = {}
        for index, case in enumerate(cases):
            sizing = Sizing.for_partitions(case.partitions)
            by_sizing.setdefault((sizing.java_warmup, sizing.java_iterations), []).append(index)
        raw: dict[int, dict[str, Any]] = {}
        for (warmup, iterations), indexes in by_sizing.items():
            jobs = []
            for index in indexes:
                case_file = folder / f"case-{index}.json"
                with case_file.open("w") as handle:
                    json.dump(cases[index].document, handle)
                jobs.append((case_file, folder / f"result-{index}.json"))
            self.say(f"  Kafka side: {len(jobs)} case(s), warm-up {warmup}, {iterations} timed")
            try:
                results = kafka_harness.run_cases(
                    classpath, jobs, list(KAFKA_ASSIGNORS), warmup, iterations, 30.0, self.log
                )
            except kafka_harness.HarnessError as error:
                self.say(f"  Kafka side failed: {error}")
                results = [{"results": {}} for _ in jobs]
            for index, result in zip(indexes, results, strict=True):
                raw[index] = result
            for case_file, result_file in jobs:
                case_file.unlink(missing_ok=True)
                result_file.unlink(missing_ok=True)
        for index, case in enumerate(cases):
            summary: dict[str, Any] = {}
            for name, result in raw[index].get("results", {}).items():
                if "error" in result:
                    summary[name] = {"error": result["error"]}
                    continue
                final = result.get("converged_assignment", result["assignment"])
                check = checks.check(case.document, final)
                summary[name] = {
                    "median_ms": result["median_ms"],
                    "times_ms": result["times_ms"],
                    "check": check.as_dict(),
                    "check_summary": check.summary(),
                    "moves": checks.moves(case.previous, final) if case.previous else 0,
                }
                if "rounds" in result:
                    summary[name]["cooperative_rounds"] = result["rounds"]
                    summary[name]["withheld_first_round"] = result["withheld_first_round"]
            outputs.append(summary)
        return outputs

    def ours_side(self, case: casegen.Case, name: str) -> dict[str, Any]:
        if not self.usable(name):
            return {"error": f"not available: {self.available.get(name)}"}
        sizing = Sizing.for_partitions(case.partitions)
        try:
            request = parse_request(case.document, name)
            assign = strategy_function(name)
            assign_times, _ = timed(
                lambda: assign(request.group, request.options), sizing.iterations, sizing.warmup, 30
            )
            plan_times, output = timed(lambda: plan(case.document, name), sizing.iterations, 0, 30)
        except Exception as error:  # report the failure in the table, keep benchmarking
            return {"error": f"{type(error).__name__}: {error}"}
        check = checks.check(case.document, output["assignment"])
        return {
            "assign_median_ms": median(assign_times),
            "assign_times_ms": assign_times,
            "plan_median_ms": median(plan_times),
            "plan_times_ms": plan_times,
            "check": check.as_dict(),
            "check_summary": check.summary(),
            "moves": output["stats"]["moves"],
        }

    def side_by_side(self, section: str, cases: list[casegen.Case]) -> list[dict[str, Any]]:
        self.say(f"  load average before: {load_average()}")
        kafka = self.kafka_side(section, cases)
        records = []
        for case, kafka_case in zip(cases, kafka, strict=True):
            ours = {}
            for name in self.args.strategies:
                ours[name] = self.ours_side(case, name)
            record = {
                "case": case.name,
                "meta": case.meta,
                "partitions": case.partitions,
                "members": case.members,
                "kafka": kafka_case,
                "ours": ours,
            }
            records.append(record)
            self.say(
                f"  {case.name}: "
                + ", ".join(f"{n} {fmt_ms(o.get('assign_median_ms'))} ms" for n, o in ours.items())
                + (
                    "; Kafka "
                    + ", ".join(
                        f"{n} {fmt_ms(k.get('median_ms'))} ms" for n, k in kafka_case.items()
                    )
                    if kafka_case
                    else ""
                )
            )
        self.say(f"  load average after: {load_average()}")
        return records

    def speed_table(self, records: list[dict[str, Any]]) -> str:
        rows = []
        for record in records:
            kafka = record["kafka"] or {}
            for name, ours in record["ours"].items():
                reference = REFERENCE.get(name)
                k = kafka.get(reference, {}) if reference else {}
                k_ms = k.get("median_ms")
                a_ms = ours.get("assign_median_ms")
                p_ms = ours.get("plan_median_ms")
                rows.append(
                    [
                        record["case"],
                        f"{record['partitions']:,}",
                        name,
                        KAFKA_LABEL.get(reference, "-") if reference else "-",
                        fmt_ms(k_ms),
                        fmt_ms(a_ms) if "error" not in ours else "ERROR",
                        fmt_ratio(a_ms / k_ms) if a_ms and k_ms else "-",
                        fmt_ms(p_ms),
                        fmt_ratio(p_ms / k_ms) if p_ms and k_ms else "-",
                        f"{k.get('check_summary', k.get('error', '-'))} / "
                        f"{ours.get('check_summary', ours.get('error', '-'))}",
                        f"{k.get('moves', '-')} / {ours.get('moves', '-')}",
                    ]
                )
            uniform = kafka.get("uniform")
            if uniform:
                coop = record["ours"].get("cooperative-sticky", {}).get("assign_median_ms")
                u_ms = uniform.get("median_ms")
                rows.append(
                    [
                        record["case"],
                        f"{record['partitions']:,}",
                        "(cooperative-sticky)",
                        KAFKA_LABEL["uniform"],
                        fmt_ms(u_ms),
                        fmt_ms(coop),
                        fmt_ratio(coop / u_ms) if coop and u_ms else "-",
                        "-",
                        "-",
                        f"{uniform.get('check_summary', uniform.get('error', '-'))} / -",
                        f"{uniform.get('moves', '-')} / -",
                    ]
                )
        return table(
            [
                "case",
                "partitions",
                "ours",
                "Kafka (reference)",
                "Kafka ms",
                "ours assign ms",
                "assign/Kafka",
                "ours plan() ms",
                "plan/Kafka",
                "checks Kafka / ours",
                "moves Kafka / ours",
            ],
            rows,
        )

    def section_grid(self) -> None:
        a = self.args
        self.say("\n## grid: Kafka's JMH assignor grid, side by side")
        cells = [
            (m, r, t, s, e)
            for m in a.grid_members
            for r in a.grid_ratios
            for t in a.grid_topics
            for s in a.grid_subscriptions
            for e in a.grid_events
        ]
        run_cells, skipped_empty, skipped_budget = [], [], []
        budget_end = self.started + a.budget_minutes * 60
        records: list[dict[str, Any]] = []
        # Cells go in ascending size so a budget cut drops the largest ones.
        cells.sort(key=lambda c: (c[0] * c[1], c[2], c[3], c[4]))
        batch: list[casegen.Case] = []
        for cell in cells:
            case = casegen.jmh_case(*cell)
            if case is None:
                skipped_empty.append(cell)
                continue
            batch.append(case)
        # Run in groups of equal member count so a budget cut is visible per size.
        groups: dict[int, list[casegen.Case]] = {}
        for case in batch:
            groups.setdefault(case.meta["members"], []).append(case)
        for members, group in groups.items():
            if time.monotonic() > budget_end:
                skipped_budget.extend(c.name for c in group)
                continue
            self.say(f"- {members} members: {len(group)} cell(s)")
            run_cells.extend(c.name for c in group)
            records.extend(self.side_by_side("grid", group))
        self.say("")
        self.say(self.speed_table(records))
        if skipped_empty:
            self.say(
                f"\nSkipped (no partitions by integer division, as in Kafka's grid): "
                f"{skipped_empty}"
            )
        if skipped_budget:
            self.say(f"\nSkipped for the time budget ({a.budget_minutes} min): {skipped_budget}")
        self.results["sections"]["grid"] = {
            "cells_run": run_cells,
            "skipped_empty": skipped_empty,
            "skipped_budget": skipped_budget,
            "records": records,
        }

    def section_large(self) -> None:
        a = self.args
        total = a.large_topics * a.large_partitions
        self.say(f"\n## large: {total:,} partitions x {a.large_members:,} members")
        records = []
        for general in (False, True):
            for owned in (False, True):
                case = casegen.large_case(
                    general, owned, a.large_topics, a.large_partitions, a.large_members
                )
                self.say(f"- {case.name}")
                records.extend(self.side_by_side("large", [case]))
        self.say("")
        self.say(self.speed_table(records))
        self.results["sections"]["large"] = {"records": records}

    # ------------------------------------------------------------------------- quality

    def quality_sizes(self) -> list[tuple[int, int, int]]:
        """(topics, partitions per topic, members)."""
        sizes = [(1, 16, 4), (2, 32, 6), (4, 50, 12), (10, 100, 30), (20, 200, 100)]
        return sizes[:3] if self.args.quick else sizes

    def section_quality(self) -> None:
        a = self.args
        self.say(f"\n## quality: Pareto lags (alpha {a.alpha}), weights 1/2/4")
        self.say(f"  load average before: {load_average()}")
        rows, churn_rows, records = [], [], []
        for topics, per_topic, members in self.quality_sizes():
            for seed in a.seeds:
                case = casegen.skewed_case(seed, topics, per_topic, members, alpha=a.alpha)
                record: dict[str, Any] = {
                    "case": case.name,
                    "meta": case.meta,
                    "round1": {},
                    "round2": [],
                }
                assignments: dict[str, Any] = {}
                for label, strategy, options in QUALITY_CONFIGS:
                    outcome = self._quality_plan(case.document, strategy, options)
                    record["round1"][label] = {
                        k: v for k, v in outcome.items() if k != "assignment"
                    }
                    assignments[label] = outcome.get("assignment")
                rng = random.Random(seed * 7919)
                perturbed = None
                for label, strategy, options in CHURN_CONFIGS:
                    previous = assignments.get(label)
                    if previous is None:
                        continue
                    document = casegen.with_owned(case.document, previous)
                    if perturbed is None:
                        perturbed = casegen.perturbed_lags(document, rng, a.churn)["lag"]
                    document = {**document, "lag": perturbed}
                    outcome = self._quality_plan(document, strategy, options)
                    outcome.pop("assignment", None)
                    record["round2"].append({"config": label, "options": options, **outcome})
                records.append(record)
                rows.append(self._quality_row(record))
                churn_rows.extend(self._churn_rows(record))
        self.say(
            table(
                [
                    "case",
                    *(label for label, _, _ in QUALITY_CONFIGS),
                    "kip169 > 1.05",
                    "lag-aware beats",
                ],
                rows,
            )
        )
        self.say(
            f"\nRound 2 (plan fed back as owned, lags perturbed by up to "
            f"{a.churn:.0%}): moves and max_load_ratio"
        )
        self.say(
            table(["case", "strategy", "min_improvement", "moves", "max_load_ratio"], churn_rows)
        )
        self.say(f"  load average after: {load_average()}")
        self.results["sections"]["quality"] = {"records": records}

    def _quality_plan(
        self, document: dict[str, Any], strategy: str, options: dict[str, Any]
    ) -> dict[str, Any]:
        if not self.usable(strategy):
            return {"error": "not available"}
        try:
            start = time.perf_counter()
            output = plan({**document, "options": options}, strategy)
            elapsed = (time.perf_counter() - start) * 1000
        except Exception as error:
            return {"error": f"{type(error).__name__}: {error}"}
        check = checks.check(document, output["assignment"])
        stats = output["stats"]
        return {
            "max_load_ratio": stats["max_load_ratio"],
            "moves": stats["moves"],
            "count_spread": stats["count_spread"],
            "valid": check.valid and check.complete,
            "plan_ms": elapsed,
            "assignment": output["assignment"],
        }

    @staticmethod
    def _quality_row(record: dict[str, Any]) -> list[str]:
        cells = [record["case"]]
        for label, _, _ in QUALITY_CONFIGS:
            r = record["round1"][label]
            if "error" in r:
                cells.append("n/a")
            else:
                mark = "" if r["valid"] else " INVALID"
                cells.append(f"{r['max_load_ratio']:.3f} (spread {r['count_spread']}){mark}")
        kip = record["round1"]["kip169"].get("max_load_ratio")
        ours = record["round1"]["lag-aware relaxed"].get("max_load_ratio")
        flagged = kip is not None and kip > QUALITY_TARGET
        cells.append("yes" if flagged else ("no" if kip is not None else "n/a"))
        if kip is None or ours is None:
            cells.append("n/a")
        else:
            cells.append("yes" if ours < kip else ("tie" if ours == kip else "NO"))
        return cells

    @staticmethod
    def _churn_rows(record: dict[str, Any]) -> list[list[str]]:
        rows = []
        for r in record["round2"]:
            if "error" in r:
                continue
            rows.append(
                [
                    record["case"],
                    r["config"],
                    str(r["options"].get("min_improvement", "-")),
                    str(r["moves"]),
                    f"{r['max_load_ratio']:.3f}",
                ]
            )
        return rows

    # ------------------------------------------------------------------------- lag-aware at scale

    def section_lagaware(self) -> None:
        a = self.args
        total = a.lag_topics * a.lag_partitions
        self.say(
            f"\n## lagaware: {total:,} partitions x {a.lag_members:,} members, JSON round trip"
        )
        self.say(f"  load average before: {load_average()}")
        if not self.usable("lag-aware"):
            self.say("  lag-aware not available: skipped")
            self.results["sections"]["lagaware"] = {"skipped": "lag-aware not available"}
            return
        case = casegen.skewed_case(11, a.lag_topics, a.lag_partitions, a.lag_members, a.alpha)
        fresh = case.document
        first = plan(fresh, "lag-aware")
        steady = casegen.perturbed_lags(
            casegen.with_owned(fresh, first["assignment"]), random.Random(5), a.churn
        )
        rows, records = [], []
        assign = strategy_function("lag-aware")
        for label, document in (
            ("fresh (no owned)", fresh),
            ("steady (owned, lags +-3%, min_improvement 0)", {**steady, "options": {}}),
            (
                "steady (owned, lags +-3%, min_improvement 0.1)",
                {**steady, "options": {"min_improvement": 0.1}},
            ),
        ):
            request = parse_request(document, "lag-aware")
            text = json.dumps(document)

            def bare(request: Any = request) -> Any:
                return assign(request.group, request.options)

            def full(document: dict[str, Any] = document) -> dict[str, Any]:
                return plan(document, "lag-aware")

            def round_trip(text: str = text) -> str:
                return json.dumps(plan(json.loads(text), "lag-aware"))

            assign_times, _ = timed(bare, 5, 0, 30)
            plan_times, output = timed(full, 5, 0, 30)
            trip_times, _ = timed(round_trip, 5, 0, 30)
            record = {
                "case": label,
                "input_bytes": len(text),
                "assign_median_ms": median(assign_times),
                "plan_median_ms": median(plan_times),
                "round_trip_median_ms": median(trip_times),
                "round_trip_times_ms": trip_times,
                "max_load_ratio": output["stats"]["max_load_ratio"],
                "moves": output["stats"]["moves"],
            }
            records.append(record)
            rows.append(
                [
                    label,
                    f"{len(text) / 1e6:.1f} MB",
                    fmt_ms(record["assign_median_ms"]),
                    fmt_ms(record["plan_median_ms"]),
                    fmt_ms(record["round_trip_median_ms"]),
                    f"{record['max_load_ratio']:.3f}",
                    str(record["moves"]),
                ]
            )
        self.say(
            table(
                [
                    "case",
                    "input JSON",
                    "assign ms",
                    "plan() ms",
                    "JSON round trip ms",
                    "max_load_ratio",
                    "moves",
                ],
                rows,
            )
        )
        self.say(f"  load average after: {load_average()}")
        self.results["sections"]["lagaware"] = {"records": records}

    # ------------------------------------------------------------------------- targets

    def targets(self) -> None:
        self.say("\n## targets")
        lines: list[tuple[str, str, str]] = []
        large = self.results["sections"].get("large", {}).get("records", [])
        for record in large:
            kind = record["meta"]["kind"]
            ours = record["ours"].get("cooperative-sticky", {})
            kafka = (record["kafka"] or {}).get("cooperative-sticky", {})
            o_ms, k_ms = ours.get("assign_median_ms"), kafka.get("median_ms")
            if kind == "identical":
                target = f"{record['case']}: ours cooperative-sticky no slower than Kafka's"
                met = o_ms is not None and k_ms is not None and o_ms <= k_ms
            else:
                target = f"{record['case']}: ours cooperative-sticky >= 2x faster than Kafka's"
                met = o_ms is not None and k_ms is not None and k_ms >= 2 * o_ms
            figure = (
                f"ours {fmt_ms(o_ms)} ms (plan() {fmt_ms(ours.get('plan_median_ms'))} ms), "
                f"Kafka {fmt_ms(k_ms)} ms"
                if o_ms is not None and k_ms is not None
                else "not measured"
            )
            lines.append((target, figure, "met" if met else "MISSED"))
        lag = self.results["sections"].get("lagaware", {}).get("records", [])
        for record in lag:
            ms = record["round_trip_median_ms"]
            lines.append(
                (
                    f"lag-aware {self.args.lag_topics * self.args.lag_partitions:,} x "
                    f"{self.args.lag_members:,}, {record['case']}: < 1 s with JSON round trip",
                    f"{fmt_ms(ms)} ms",
                    "met" if ms < 1000 else "MISSED",
                )
            )
        quality = self.results["sections"].get("quality", {}).get("records", [])
        if quality:
            ours = [r["round1"]["lag-aware relaxed"].get("max_load_ratio") for r in quality]
            known = [x for x in ours if x is not None]
            worst = max(known) if known else None
            lines.append(
                (
                    f"lag-aware (relaxed) max_load_ratio <= {QUALITY_TARGET} on the skewed suite",
                    f"worst {worst:.3f} over {len(known)} cases" if worst else "not measured",
                    "met"
                    if worst is not None and worst <= QUALITY_TARGET and len(known) == len(ours)
                    else "MISSED",
                )
            )
            flagged = [
                r
                for r in quality
                if (r["round1"]["kip169"].get("max_load_ratio") or 0) > QUALITY_TARGET
            ]
            beaten = [
                r
                for r in flagged
                if r["round1"]["lag-aware relaxed"].get("max_load_ratio") is not None
                and r["round1"]["lag-aware relaxed"]["max_load_ratio"]
                < r["round1"]["kip169"]["max_load_ratio"]
            ]
            lines.append(
                (
                    f"lag-aware strictly better than kip169 wherever kip169 > {QUALITY_TARGET}",
                    f"{len(beaten)} of {len(flagged)} flagged cases",
                    "met"
                    if flagged and len(beaten) == len(flagged)
                    else ("n/a (no flagged case)" if not flagged else "MISSED"),
                )
            )
        self.say(table(["target", "figure", "result"], [list(x) for x in lines]))
        self.results["targets"] = [{"target": t, "figure": f, "result": r} for t, f, r in lines]

    def run(self) -> None:
        self.say("# Assignor benchmarks")
        self.say(f"command: {self.results['command']}")
        for key, value in self.results["machine"].items():
            self.say(f"- {key}: {value}")
        missing = {k: v for k, v in self.available.items() if v}
        if missing:
            self.say(f"- strategies not available: {', '.join(missing)}")
        sections = {
            "grid": self.section_grid,
            "large": self.section_large,
            "quality": self.section_quality,
            "lagaware": self.section_lagaware,
        }
        for name in self.args.sections:
            if name not in sections:
                raise SystemExit(f"unknown section {name!r} (one of {', '.join(sections)})")
            sections[name]()
        self.targets()
        elapsed = time.monotonic() - self.started
        self.results["machine"]["load average at end (1/5/15 min)"] = load_average()
        self.results["elapsed_seconds"] = round(elapsed, 1)
        self.say(f"\nload average at end: {load_average()}; total {elapsed / 60:.1f} min")
        if self.args.json:
            self.args.json.write_text(json.dumps(self.results, indent=1, default=str))
            self.say(f"raw results: {self.args.json}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.no_kafka and shutil.which("java") is None:
        print("java not found: running without the Kafka side", file=sys.stderr)
        args.no_kafka = True
    Runner(args).run()


if __name__ == "__main__":
    main()
