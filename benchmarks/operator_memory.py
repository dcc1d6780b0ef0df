"""What the operator keeps per partition between polls, in bytes: the figure the chart's memory
limit and `--max-partitions-per-policy` are sized from.

    .venv/bin/python -m benchmarks.operator_memory [--partitions 20000] [--points 30 60]

Feeds the observe phase's own per-partition update (`phases.observe._lags`, the code every poll
runs) with `--points` polls of a group whose every partition moves (each poll a new log end, so
the end-offset history keeps a point per poll, the worst case), then measures with tracemalloc
what the policy's memory holds (`PolicyMemory.partitions` and `.lags`) after a garbage
collection, divided by the partition count. The poll's transient peak (the Observation of one
poll and its lag table) is printed too. No Kafka, no API server: the offsets are made up, the
state built from them is the operator's. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

from kafka_rebalance_operator.history import MAX_POINTS
from kafka_rebalance_operator.kafka_io import Observation
from kafka_rebalance_operator.lag import PartitionOffsets
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.observe import _lags
from kafka_rebalance_operator.policy import parse_spec

SPEC = {
    "groupId": "g",
    "kafka": {"bootstrapServers": "kafka:9092"},
    "topicPattern": "t.*",
    "members": {"selector": {"matchLabels": {"app": "c"}}},
    "strategy": "lag-aware",
}


def observation(topics: int, per_topic: int, poll: int) -> Observation:
    offsets = {
        (f"t{t}", p): PartitionOffsets(
            log_start=0,
            log_end=1_000_000 + 100 * poll + p,
            committed=1_000_000 + 90 * poll,
            metadata='{"member":"c-0","epoch":3}',
        )
        for t in range(topics)
        for p in range(per_topic)
    }
    return Observation({f"t{t}": per_topic for t in range(topics)}, [], offsets)


def measure(partitions: int, points: int) -> tuple[float, float]:
    """(retained bytes per partition after `points` polls, one poll's transient peak per
    partition)."""
    spec = parse_spec(SPEC)
    topics = max(1, partitions // 100)
    per_topic = partitions // topics
    total = topics * per_topic
    memory = PolicyMemory()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for poll in range(points):
        _lags(spec, observation(topics, per_topic, poll), memory, 1_000.0 + 30.0 * poll)
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.reset_peak()
    before_peak = tracemalloc.get_traced_memory()[0]
    _lags(spec, observation(topics, per_topic, points), memory, 1_000.0 + 30.0 * points)
    peak = tracemalloc.get_traced_memory()[1] - before_peak
    tracemalloc.stop()
    return retained / total, peak / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--points", type=int, nargs="+", default=[1, 30, MAX_POINTS])
    args = parser.parse_args()
    header = ("partitions", "polls", "retained B/partition", "poll peak B/partition")
    print(f"{header[0]:>10} {header[1]:>5} {header[2]:>21} {header[3]:>22}")
    for points in args.points:
        retained, peak = measure(args.partitions, points)
        print(f"{args.partitions:>10} {points:>5} {retained:>21,.0f} {peak:>22,.0f}")


if __name__ == "__main__":
    main()
