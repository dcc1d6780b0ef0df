"""The operator's own memory and CPU per poll phase at fleet scale, without a broker or API server.

    .venv/bin/python -m benchmarks.operator_poll_memory [--topics 1000] [--partitions 100]
        [--members 1000] [--polls 4] [--trim]

`benchmarks.operator_full_poll` measures the whole poll against a real cluster; at 100,000
partitions that cluster takes 7 brokers and 10-20 minutes to build on a loaded machine. This
runs the same `reconcile.poll` with the real planner, metrics registry and JSON-lines telemetry,
but the offsets come from arrays (as the wire reader returns them: `PolicyOffsets`) and the
ConfigMaps from an in-memory store that keeps their JSON text, as the API server does. The
Kafka and Kubernetes clients' own memory is therefore not in the figures. Every partition lags
(so each poll's time lags change and telemetry writes every row); the offsets stop moving after
the second poll, so the later polls are steady. Prints, per poll, the CPU seconds and the peak
RSS of each phase (the kernel's high-water mark, restarted at each phase), and the RSS after it.
`--trim` also calls glibc's malloc_trim(0) after each poll. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import tempfile
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.measure import load_average
from benchmarks.operator_full_poll import Clocks, TimedPort, instrument


class ArrayKafka:
    """One policy's offsets as arrays: log ends 1-3 (+1 at the second poll), commits 0 or 1."""

    def __init__(self, topics: dict[str, int]) -> None:
        from kafka_rebalance_operator.lag import Layout

        self.topics, self.layout, self.reads = topics, Layout.of(topics), 0

    def __call__(self, *args: Any, **kwargs: Any) -> ArrayKafka:
        return self

    def observe(self, *args: Any, **kwargs: Any) -> Any:
        from kafka_rebalance_operator.kafka.kafka_io import Observation
        from kafka_rebalance_operator.lag import PolicyOffsets

        self.reads = min(self.reads + 1, 2)
        n = self.layout.size
        end = np.arange(n, dtype=np.int64) % 3 + 1 + self.reads
        committed = np.arange(n, dtype=np.int64) % 2
        offsets = PolicyOffsets(self.layout, np.zeros(n, np.int64), end, committed)
        return Observation(dict(self.topics), [], offsets)

    def cluster_id(self) -> str:
        return "benchmark-cluster"

    def close(self) -> None:
        pass


class TextConfigMaps:
    """ConfigMaps kept as JSON text with resourceVersions; a list parses them, as a list call
    parses the API server's answer."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}
        self.version = 0

    def list(self, namespace: str, policy: str) -> list[dict[str, Any]]:
        return [json.loads(text) for text in self.items.values()]

    def upsert(self, body: dict[str, Any]) -> str:
        self.version += 1
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        self.items[body["metadata"]["name"]] = json.dumps(stored)
        return str(self.version)

    def delete(self, namespace: str, name: str, resource_version: str = "") -> None:
        self.items.pop(name, None)


class Nothing:
    def patch(self, *args: Any) -> None:
        pass

    def read(self, *args: Any) -> dict[str, str]:
        return {}


class StepClock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=4)
    parser.add_argument("--trim", action="store_true", help="malloc_trim(0) after each poll")
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="ROWS",
        help="trace allocations from the first poll on (slower) and print the ROWS source lines "
        "holding the most memory after the last poll",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)

    from kafka_rebalance_operator import adapters, ports, reconcile
    from kafka_rebalance_operator.kube.members import PodSummary
    from kafka_rebalance_operator.memory import PolicyMemory
    from kafka_rebalance_operator.metrics import REGISTRY
    from kafka_rebalance_operator.settings import OperatorSettings
    from kafka_rebalance_operator.telemetry import JsonLinesSink, Telemetry
    from prometheus_client import generate_latest

    topics = {f"bench-t{i:04d}": args.partitions for i in range(args.topics)}
    clocks, clock = Clocks(), StepClock()
    instrument(clocks)
    rows = Path(tempfile.mkdtemp(prefix="poll-memory-")) / "rows.jsonl"
    real = ports.Ports(
        configmaps=TextConfigMaps(),
        status=Nothing(),
        secrets=Nothing(),
        kafka=ArrayKafka(topics),
        clock=clock,
        metrics=adapters.PrometheusMetrics(),
        telemetry=Telemetry([JsonLinesSink(str(rows))]),
    )
    timed = replace(
        real,
        configmaps=TimedPort(real.configmaps, "configmaps", clocks),
        metrics=TimedPort(real.metrics, "metrics", clocks),
        telemetry=TimedPort(real.telemetry, "telemetry", clocks),
    )
    spec = {
        "groupId": "bench-group",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topicPattern": "bench-t[0-9]+",
        "members": {"selector": {"matchLabels": {"app": "bench"}}},
        "strategy": "lag-aware",
        "rebalance": {"cooldown": "0s"},
        "apply": {"mode": "assign"},
    }
    pods = [
        PodSummary(f"bench-{i:04d}", {"app": "bench"}, "Running", True) for i in range(args.members)
    ]
    memory, settings, status = PolicyMemory(), OperatorSettings(max_partitions_per_policy=0), {}
    total = args.topics * args.partitions
    print(
        f"# operator poll memory: {total:,} partitions, {args.members} members, "
        f"load average {load_average()}"
    )
    if args.tracemalloc:
        tracemalloc.start(1)
    clocks.enter("start")
    clocks.leave()
    print(f"RSS before the first poll (imports): {clocks.highest:,.0f} MiB")
    for i in range(args.polls):
        clock.t += 30
        ctx = reconcile.PolicyContext("bench", "bench", "uid", 1, spec, status)
        outcome = clocks.timed("poll", reconcile.poll)(ctx, pods, memory, timed, settings)
        status = {**status, **{k: v for k, v in outcome.status.items() if v is not None}}
        if args.trim:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        exposition = clocks.timed("scrape", generate_latest)(REGISTRY)
        clocks.finish()
        peaks, cpus = clocks.peaks[-1], clocks.cpus[-1]
        phases = ", ".join(
            f"{p} {cpus.get(p, 0.0):.2f} s / {peaks.get(p, 0.0):,.0f}"
            for p in ("observe", "plan", "decide", "apply", "report")
        )
        print(
            f"poll {i} ({outcome.action}): CPU {cpus['poll']:.2f} s, peak {peaks['poll']:,.0f} "
            f"MiB, RSS after {clocks.rss[-1]:,.0f} MiB; per phase CPU / peak MiB: {phases}; "
            f"scrape {cpus['scrape']:.2f} s / {peaks['scrape']:,.0f} ({len(exposition):,} bytes)"
        )
        del exposition
        if args.tracemalloc:
            held_mib = tracemalloc.get_traced_memory()[0] / 2**20
            print(f"  traced held after poll {i}: {held_mib:,.1f} MiB")
    history = memory.history
    if history is not None:
        print(f"columnar history: {history.nbytes / total:,.0f} bytes per partition")
    print(f"peak RSS: {clocks.highest:,.0f} MiB; load average at end {load_average()}")
    if args.tracemalloc:
        held, peak = tracemalloc.get_traced_memory()
        print(f"traced: {held / 2**20:,.1f} MiB held after the polls, {peak / 2**20:,.1f} at peak")
        for stat in tracemalloc.take_snapshot().statistics("lineno")[: args.tracemalloc]:
            print(f"  {stat.size / 2**20:8.1f} MiB {stat.count:>9,}  {stat.traceback}")


if __name__ == "__main__":
    main()
