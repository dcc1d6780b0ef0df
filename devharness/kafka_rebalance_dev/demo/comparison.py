"""The KIP-794 lesson as a measurement: one slow consumer under several strategies.

KIP-794 found that an assignor which ignores how fast each consumer really is lets one slow
member fall behind without bound, and that a naive fix can flap. Here every partition gets the
same production rate, one member sleeps a fixed time per record, and the group runs with the
policy enforcing a strategy from the start. A count-based plan gives the slow member its equal
share of partitions, more than it can process, so total throughput stays below production and
its lag grows; `lag-aware` with `weightFrom: adaptive` should move load off it, keep up with
production, and then stop changing the plan.

Each run gets its own namespace, topic, group and operator on a shared broker and API server,
so the strategies are compared in one session under the same conditions; `compare_slow_consumer`
runs them side by side, at the same time, since every run is a minute of production and then a
drain, nearly all of it waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_rebalance_dev.demo.cluster import install_crd
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.demo.summary import (
    Point,
    lag_over_time,
    lag_trend,
    max_lag,
    plan_reversals,
    throughput,
)


@dataclass(frozen=True)
class SlowConsumerSetup:
    members: int = 3
    partitions: int = 12
    rate_per_partition: float = 5.0  # 60 records/s over 12 partitions
    slow_ms: int = 80  # the slow member: about 12 records/s
    duration: float = 60.0  # seconds of production
    window_s: float = 20.0  # the final window throughput and lag trend are measured over
    # the lag-aware policy's knobs (the other strategies ignore them)
    # (KIP-794's lessons against flapping: hysteresis, a cooldown and a move budget per round)
    load_model: str = "drain"
    target_drain_seconds: int = 30
    min_improvement: float = 0.1
    cooldown: str = "8s"
    max_moves_per_round: int | str | None = 2

    @property
    def production(self) -> float:
        return self.partitions * self.rate_per_partition

    @property
    def slow_capacity(self) -> float:
        return 1000.0 / self.slow_ms


def run_slow_consumer(
    endpoints: Endpoints,
    workdir: Path,
    strategy: str,
    setup: SlowConsumerSetup,
    *,
    crd: bool = True,
    log: Any = lambda message: None,
) -> dict[str, Any]:
    """One strategy, start to finish; returns its row (figures, lag over time, ledger verdict)."""
    harness = GroupHarness(
        endpoints,
        workdir,
        prefix=f"kip794-{strategy.split('-')[0]}",
        partitions=setup.partitions,
        replicas=setup.members,
        log=log,
    )
    try:
        slow = _start_enforced_group(harness, strategy, setup, crd=crd)
        harness.produce({p: setup.rate_per_partition for p in range(setup.partitions)})
        t0 = harness.samples[-1].t
        epochs, plans = _watch_plans(harness, setup, t0)
        points = [
            Point(s.t - t0, s.total_lag, s.processed_total) for s in harness.samples if s.t >= t0
        ]
        window = (setup.duration - setup.window_s, setup.duration)
        final_epoch = harness.epoch()
        changes_in_window = len({e for t, e in epochs if t >= window[0]}) - 1
        last = harness.samples[-1]
        # Drain fast: the slow member leaves (SIGTERM: it finishes its batch and commits), the
        # others take its partitions by the fallback; then prove nothing was lost.
        harness.workload.stop()
        harness.fleet.stop(slow)
        harness.drain(timeout=120)
        report = harness.reconcile()
        return {
            "strategy": strategy,
            "throughput": throughput(points, *window),
            "production": setup.production,
            "capacity": setup.slow_capacity,
            "max_lag": max_lag(points, 0, setup.duration),
            "final_lag": last.total_lag,
            "lag_trend": lag_trend(points, *window),
            "epochs": final_epoch,
            "plan_changes_in_final_window": max(0, changes_in_window),
            "plan_reversals": plan_reversals([plans[e] for e in sorted(plans)]),
            "plans": {e: plans[e] for e in sorted(plans)},
            "epoch_seen_at": {e: round(t, 1) for t, e in reversed(epochs)},
            "lag_over_time": lag_over_time(points, 10.0),
            "slow_partitions": sorted(p for p, m in last.owners.items() if m == slow),
            "lost": report.lost,
            "duplicates": report.duplicates,
            "produced": report.produced,
        }
    finally:
        harness.close()


def compare_slow_consumer(
    endpoints: Endpoints,
    workdir: Path,
    strategies: Sequence[str],
    setup: SlowConsumerSetup,
    *,
    log: Any = lambda message: None,
) -> list[dict[str, Any]]:
    """`run_slow_consumer` for each strategy, all at once (one thread each, the CRD installed
    first), in `workdir / strategy`; the rows in the order of `strategies`. The runs share
    nothing but the broker and the API server, and each consumer's speed is set by its sleep
    per record, not by the CPU, so running them together changes what each one measures only
    through load on the machine."""
    install_crd(endpoints.kubectl, endpoints.kubeconfig)
    with ThreadPoolExecutor(max_workers=len(strategies), thread_name_prefix="kip794") as pool:
        runs = [
            pool.submit(
                run_slow_consumer,
                endpoints,
                workdir / strategy,
                strategy,
                setup,
                crd=False,
                log=log,
            )
            for strategy in strategies
        ]
        return [run.result() for run in runs]


def _start_enforced_group(
    harness: GroupHarness, strategy: str, setup: SlowConsumerSetup, *, crd: bool
) -> str:
    """The group's pods, the operator and the policy in enforce mode, the sidecars (the last
    one slow) converged on the first plan; returns the slow member."""
    harness.setup(crd=crd)
    members = harness.pods(setup.members)
    slow = members[-1]
    harness.operator.start()
    harness.apply_policy(
        strategy,
        "enforce",
        weight_from="adaptive" if strategy == "lag-aware" else None,
        load={"model": setup.load_model, "targetDrainSeconds": setup.target_drain_seconds},
        rebalance={
            "minImprovement": setup.min_improvement,
            "cooldown": setup.cooldown,
            **(
                {"maxMovesPerRound": setup.max_moves_per_round}
                if setup.max_moves_per_round is not None
                else {}
            ),
        },
    )
    harness.start_sidecars(members, slow={slow: setup.slow_ms})
    harness.wait_converged(1, members)
    return slow


def _watch_plans(
    harness: GroupHarness, setup: SlowConsumerSetup, t0: float
) -> tuple[list[tuple[float, int]], dict[int, dict[int, str]]]:
    """Sample once a second for `setup.duration` from `t0`: (seconds since t0, epoch) per
    sample, and each epoch's complete plan (partition -> member) as first seen written."""
    epochs: list[tuple[float, int]] = []
    plans: dict[int, dict[int, str]] = {}
    end = t0 + setup.duration
    while harness.samples[-1].t < end:
        harness.watch(1.0)
        epochs.append((harness.samples[-1].t - t0, harness.epoch()))
        written, planned = harness.planned_owners()
        if len(written) == 1 and len(planned) == setup.partitions:
            plans.setdefault(written.pop(), planned)
    return epochs, plans
