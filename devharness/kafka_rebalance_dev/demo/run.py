"""The demo's phases, from an empty machine to the summary.

1. **Set-up**: the local environment, the CRD, the operator (honouring a pollInterval down to
   1s; the policy polls every `--poll-interval`, 2s by default), a StatefulSet of N pods under
   KWOK, one sidecar process per pod; the last pod's sidecar is slow (a fixed delay per
   record). The policy exists in `observe` mode, so no ConfigMap is written and the sidecars
   split the partitions by their fallback (cooperative-sticky).
2. **Before** (observe): the partitions the slow member happens to own become the hot ones (the
   worst case the product exists for: a skew the count-based fallback cannot see), and lag
   builds on them. `max_lag_before` is the worst total lag of this phase.
3. **After** (enforce, the chosen strategy): the operator plans and applies; the sidecars rejoin
   on each new epoch. `max_lag_after` is the worst total lag over the final window of this phase
   (by then a good plan has acted; a count-based plan still leaves the hot partitions on the
   slow member).
4. **Drain and prove**: production stops, the group drains, the ledger of processed records is
   reconciled against every offset Kafka acknowledged: `lost` and `duplicates`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kafka_rebalance_dev.demo import table
from kafka_rebalance_dev.demo.cluster import POLL_INTERVAL
from kafka_rebalance_dev.demo.environment import DemoEnvironment, Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.demo.observe import Sample
from kafka_rebalance_dev.demo.summary import Phases, build_summary


@dataclass
class DemoOptions:
    strategy: str = "lag-aware"
    compare: list[str] = field(default_factory=list)  # several strategies, one after another
    duration: float = 100.0  # seconds of production (observe + enforce)
    members: int = 3
    partitions: int = 6
    slow_ms: int = 100  # per record on the slow member: about 10 records/s
    hot_rate: float = 30.0  # records/s on each hot partition
    cold_rate: float = 8.0  # records/s on every other partition
    observe_fraction: float = 0.35
    window_s: float = 20.0  # the final window max_lag_after is taken over
    poll_interval: str = POLL_INTERVAL  # the policy's rebalance.pollInterval
    weight_from: str | None = "adaptive"
    table_every: float = 5.0
    json: bool = False
    keep: bool = False
    state_dir: str | None = None
    reuse: str | None = None
    workdir: Path | None = None
    kubelet: bool = False  # sidecars as real pods on a real node, not processes beside KWOK's
    # hysteresis against flapping (KIP-794): 8 s between plans, two moves per plan
    extra_policy: dict[str, Any] = field(
        default_factory=lambda: {"rebalance": {"cooldown": "8s", "maxMovesPerRound": 2}}
    )


DRAIN_PATIENCE_S = 15.0


class Printer:
    """Progress to stderr; the table to stdout unless --json (then stdout has one object)."""

    def __init__(self, json_mode: bool) -> None:
        self.out: TextIO = sys.stderr if json_mode else sys.stdout

    def progress(self, message: str) -> None:
        print(f"demo: {message}", file=sys.stderr, flush=True)

    def block(self, text: str) -> None:
        print(text + "\n", file=self.out, flush=True)


def run_demo(options: DemoOptions) -> dict[str, Any]:
    """Run the whole demo and return its summary (the caller prints it).

    With several strategies (`compare`), each gets its own namespace, topic and group on the
    one environment, one after another, and the result is `{"duration_s", "runs": [...]}`."""
    printer = Printer(options.json)
    environment = DemoEnvironment.choose(options.state_dir, options.reuse)
    started = time.monotonic()
    strategies = options.compare or [options.strategy]
    try:
        endpoints, seconds = environment.up(log=printer.progress, kubelet=options.kubelet)
        printer.progress(
            f"environment ready in {seconds:.0f}s ({environment.env.state_dir}); "
            f"Kafka {endpoints.bootstrap_servers}"
        )
        workdir = options.workdir or environment.env.state_dir / "demo-runs" / time.strftime(
            "%Y%m%d-%H%M%S"
        )
        summaries = []
        for index, strategy in enumerate(strategies):
            run_options = dataclasses.replace(options, strategy=strategy)
            harness = GroupHarness(
                endpoints,
                workdir / strategy if len(strategies) > 1 else workdir,
                partitions=options.partitions,
                replicas=options.members,
                poll_interval=options.poll_interval,
                real_node=endpoints.real_node,
                log=printer.progress,
            )
            try:
                if len(strategies) > 1:
                    printer.progress(f"run {index + 1} of {len(strategies)}: {strategy}")
                run_started = started if index == 0 else time.monotonic()
                summaries.append(_phases(harness, run_options, printer, endpoints, run_started))
            finally:
                harness.close(delete=not options.keep)
    finally:
        if options.keep:
            printer.progress(
                f"--keep: the environment stays up; stop it with `kafka-rebalance dev down "
                f"--state-dir {environment.env.state_dir}`"
            )
        else:
            environment.down()
    if len(summaries) == 1:
        return summaries[0]
    if not options.json:
        printer.block(render_comparison(summaries))
    return {
        "duration_s": round(time.monotonic() - started, 1),
        "lost": sum(s["lost"] for s in summaries),
        "runs": summaries,
    }


def render_comparison(summaries: list[dict[str, Any]]) -> str:
    """The runs side by side, as a Markdown table."""
    head = (
        "| strategy | max lag before | max lag after | lag trend after (rec/s) | "
        "throughput after (rec/s) | epochs | lost | duplicates |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(
            f"| {s['strategy']} | {s['max_lag_before']} | {s['max_lag_after']} | "
            f"{s['lag_trend_after']:+.1f} | {s['throughput_after']:.1f} | {s['epochs']} | "
            f"{s['lost']} | {s['duplicates']} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class _Skew:
    """The workload's skew: the slow member, the partitions made hot, the rates produced."""

    slow_member: str
    hot: list[int]
    rates: dict[int, float]


def _phases(
    harness: GroupHarness,
    options: DemoOptions,
    printer: Printer,
    endpoints: Endpoints,
    started: float,
) -> dict[str, Any]:
    members = _set_up(harness, options, printer.progress)
    skew = _produce_skewed(harness, options, members, printer.progress)
    phases = _observe_then_enforce(harness, options, printer, skew)
    epochs = harness.epoch()
    drained = _drain(harness, skew.slow_member, printer.progress)
    report = harness.reconcile()
    summary = build_summary(
        strategy=options.strategy,
        duration_s=time.monotonic() - started,
        points=harness.points(),
        phases=phases,
        produced=report.produced,
        processed=report.processed,
        lost=report.lost,
        duplicates=report.duplicates,
        epochs=epochs,
        extra={
            "members": options.members,
            "partitions": options.partitions,
            "slow_member": skew.slow_member,
            "slow_ms": options.slow_ms,
            "hot_partitions": skew.hot,
            "production_rate": sum(skew.rates.values()),
            "weight_from": options.weight_from,
            "poll_interval": options.poll_interval,
            "sidecars": sidecars_kind(options.kubelet),
            "window_s": options.window_s,
            "drain_s": round(drained.t - phases.stop_at, 1),
            "per_member": dict(sorted(report.per_member.items())),
            "workdir": str(harness.workdir),
        },
    )
    if not options.json:
        printer.block(render_summary(summary))
    return summary


def _set_up(harness: GroupHarness, options: DemoOptions, say: Callable[[str], None]) -> list[str]:
    """Phase 1: namespace, pods, the operator, the policy in observe mode and one sidecar per
    pod, the last one slow. Returns the members (pod names); the last is the slow one."""
    harness.setup()
    members = harness.pods(options.members)
    slow_member = members[-1]
    say(
        f"namespace {harness.namespace}: StatefulSet {harness.app} with {options.members} pods "
        f"{sidecars_kind(options.kubelet)}, topic {harness.topic} ({options.partitions} "
        f"partitions), group {harness.group}"
    )
    harness.operator.start()
    say(
        f"operator running (--min-poll-interval {harness.operator.min_poll_interval}; the "
        f"policy polls every {options.poll_interval}; log {harness.operator.log})"
    )
    policy_options: dict[str, Any] = {"weight_from": options.weight_from, **options.extra_policy}
    harness.apply_policy(options.strategy, "observe", **policy_options)
    harness.start_sidecars(members, slow={slow_member: options.slow_ms})
    say(
        f"{len(members)} sidecars started ({slow_member} sleeps {options.slow_ms} ms per record); "
        "policy in observe mode: they split the partitions by their fallback"
    )
    return members


def _produce_skewed(
    harness: GroupHarness, options: DemoOptions, members: list[str], say: Callable[[str], None]
) -> _Skew:
    """Once the fallback has assigned every partition, make the slow member's partitions the hot
    ones (the skew a count-based assignment cannot see) and start producing."""
    slow_member = members[-1]
    first = harness.wait_assigned(members)
    hot = sorted(p for p, owner in first.owners.items() if owner == slow_member)
    if not hot:  # the fallback gave the slow member nothing: make its neighbours' hot instead
        hot = [min(first.owners)]
    rates = {
        p: (options.hot_rate if p in hot else options.cold_rate) for p in range(options.partitions)
    }
    harness.produce(rates)
    say(
        f"producing {sum(rates.values()):g} records/s: hot partitions {hot} at "
        f"{options.hot_rate:g}/s (owned by the slow member), the others at {options.cold_rate:g}/s"
    )
    return _Skew(slow_member, hot, rates)


def _observe_then_enforce(
    harness: GroupHarness, options: DemoOptions, printer: Printer, skew: _Skew
) -> Phases:
    """Phases 2 and 3: sample once a second for `duration`, switching the policy to enforce
    after its observe fraction, printing the member table every `table_every` seconds. A
    crashed part ends the run with RuntimeError."""
    t0 = harness.samples[-1].t
    phases = Phases(
        enforce_at=t0 + options.duration * options.observe_fraction,
        stop_at=t0 + options.duration,
        window_s=options.window_s,
    )
    phase = "observe"
    last_table = -1e9
    previous = harness.samples[-1]
    while True:
        sample = harness.sample()
        if phase == "observe" and sample.t >= phases.enforce_at:
            harness.set_mode("enforce")
            phase = "enforce"
            printer.progress(f"phase 2: policy set to enforce with strategy {options.strategy}")
        if sample.t - last_table >= options.table_every:
            _print_table(harness, printer, skew, sample, previous, sample.t - t0, phase)
            last_table, previous = sample.t, sample
        report = harness.crashed()
        if report:
            raise RuntimeError(report)
        if sample.t >= phases.stop_at:
            return phases
        time.sleep(max(0.0, 1.0 - (harness.samples[-1].t - sample.t)))


def _print_table(
    harness: GroupHarness,
    printer: Printer,
    skew: _Skew,
    sample: Sample,
    previous: Sample,
    elapsed: float,
    phase: str,
) -> None:
    """The per-member table: owned partitions, lag and rate since the `previous` table."""
    rows = table.member_rows(
        harness.fleet.members(),
        sample.owners,
        sample.lag,
        sample.processed,
        previous.processed,
        sample.t - previous.t,
        {skew.slow_member},
    )
    printer.block(
        table.render(
            rows,
            t=elapsed,
            phase=phase,
            epoch=harness.epoch(),
            group_state=sample.group_state,
            hot=skew.hot,
        )
    )


def _drain(harness: GroupHarness, slow_member: str, say: Callable[[str], None]) -> Sample:
    """Phase 4's first half: stop production and wait until the group has committed it all."""
    say("production stopped; draining the group and reconciling the ledger")
    try:
        return harness.drain(timeout=DRAIN_PATIENCE_S)
    except TimeoutError:
        # A plan that left the slow member a backlog would take minutes to drain at its
        # speed: stop it (SIGTERM: it commits what it processed and leaves) so the others take
        # its partitions by the fallback and finish; the ledger still has to account for all.
        say(
            f"the slow member is still behind after {DRAIN_PATIENCE_S:g}s; stopping it so the "
            "others drain its backlog"
        )
        harness.fleet.stop(slow_member)
        return harness.drain(timeout=120)


def sidecars_kind(kubelet: bool) -> str:
    """Which kind ran, in the words the summary uses."""
    if kubelet:
        return "as real pods on the kubelet node (app and sidecar containers of the image)"
    return "under KWOK (one sidecar process per pod)"


def render_summary(summary: dict[str, Any]) -> str:
    lines = [
        f"summary ({summary['strategy']}, {summary['duration_s']}s):",
        f"  sidecars: {summary['sidecars']}",
        f"  max lag before (observe, fallback assignment): {summary['max_lag_before']}",
        f"  max lag after (final {summary['window_s']:g}s of enforce): {summary['max_lag_after']}",
        f"  throughput over that window: {summary['throughput_after']} records/s "
        f"(production {summary['production_rate']:g}/s)",
        f"  plans applied (epochs): {summary['epochs']}",
        f"  produced {summary['produced']}, processed {summary['processed']}, "
        f"lost {summary['lost']}, duplicates {summary['duplicates']}",
    ]
    return "\n".join(lines)


def print_json(summary: dict[str, Any], out: Callable[[str], None] = print) -> None:
    out(json.dumps(summary, sort_keys=False))
