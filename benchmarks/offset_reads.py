"""The operator's offset reads (log start, log end, the group's commits) through kafka-python's
admin client and through confluent-kafka's (librdkafka), on one broker, in one run.

The full poll at 100k partitions spends most of its time here (docs/benchmarks.md), so the C
client was the obvious candidate to read them instead; this measures that before adopting it.
Each round reads every partition's earliest and latest offsets and the group's committed
offsets (with metadata); the median of `--rounds` is printed, wall and CPU (this process, its
clients' network threads included). `operator` is the operator's own reader (`kafka_offsets`:
one request per leader, decoded by `wire` into arrays), reading log starts every round;
`operator-steady` reads them only when due (every 300 s), as the operator's polls do.

    .venv/bin/python -m benchmarks.offset_reads --topics 100 --partitions 100
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import NewTopic, OffsetSpec
from kafka.structs import OffsetAndMetadata
from kafka_rebalance_common.kafka_retry import RetryingAdmin

from benchmarks.datapath import Broker
from benchmarks.operator_poll import commit_group_offsets

METADATA = '{"member":"m","epoch":1}'


def prepare(bootstrap: str, topics: int, partitions: int) -> tuple[list[tuple[str, int]], str]:
    """Fresh topics `reads-<run>-<i>` with a commit at offset 0 for every partition."""
    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=120_000)
    run = uuid.uuid4().hex[:6]
    names, group = [f"reads-{run}-{i}" for i in range(topics)], f"offset-reads-{run}"
    keys = [(n, p) for n in names for p in range(partitions)]
    try:
        for start in range(0, topics, 50):
            admin.create_topics([NewTopic(n, partitions, 1) for n in names[start : start + 50]])
        # One OffsetCommit is one record batch in __consumer_offsets, which refuses batches over
        # max.message.bytes (1 MB): 2,000 partitions with this metadata per commit stay below.
        for start in range(0, len(keys), 2000):
            chunk = keys[start : start + 2000]
            offsets = {
                KafkaPythonPartition(t, p): OffsetAndMetadata(0, METADATA, -1) for t, p in chunk
            }
            commit_group_offsets(admin, group, offsets)  # waits for the group coordinator
        committed = len(admin.list_group_offsets({group: None})[group])
        if committed != len(keys):
            raise SystemExit(f"{committed} of {len(keys)} commits landed")
    finally:
        admin.close()
    return keys, group


def kafka_python_reads(
    bootstrap: str, keys: list[tuple[str, int]], group: str
) -> Callable[[], int]:
    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=120_000)
    partitions = [KafkaPythonPartition(t, p) for t, p in keys]

    def read() -> int:
        starts = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.EARLIEST))
        ends = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        commits = admin.list_group_offsets({group: None})[group]
        return len(starts) + len(ends) + len(commits)

    return read


def confluent_reads(bootstrap: str, keys: list[tuple[str, int]], group: str) -> Callable[[], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import OffsetSpec as ConfluentSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = [ConfluentPartition(t, p) for t, p in keys]

    def read() -> int:
        read_count = 0
        for spec in (ConfluentSpec.earliest(), ConfluentSpec.latest()):
            futures = admin.list_offsets(dict.fromkeys(partitions, spec), request_timeout=120)
            read_count += sum(1 for f in futures.values() if f.result() is not None)
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=120
        )
        for future in futures.values():
            read_count += len(future.result().topic_partitions)
        return read_count

    return read


def operator_reads(
    bootstrap: str, keys: list[tuple[str, int]], group: str, starts: bool
) -> Callable[[], int]:
    """The operator's own reader (`kafka_offsets`, `wire`): metadata, log ends, commits and,
    with `starts`, log starts every round (else only when due: every 300 s)."""
    from kafka_rebalance_operator.kafka import kafka_offsets
    from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver

    observer = KafkaObserver(bootstrap, {}, timeout_s=120)
    topics = sorted({t for t, _p in keys})

    def read() -> int:
        if starts:
            observer._offsets = None  # a fresh reader holds no log starts
        kafka_offsets.METADATA_MAX_AGE_S = -1.0  # every round asks for metadata
        fast = observer._read_fast(group, topics, None)
        assert fast is not None, "the broker does not speak the wire reader's versions"
        offsets = fast[2]
        return int((offsets.start >= 0).sum() + (offsets.end >= 0).sum()) + int(
            (offsets.committed >= 0).sum()
        )

    return read


def measure(read: Callable[[], int], rounds: int) -> tuple[float, list[float], float, int]:
    read()  # connections and metadata warm
    times, cpus, count = [], [], 0
    for _ in range(rounds):
        started, cpu = time.perf_counter(), time.process_time()
        count = read()
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return statistics.median(times), times, statistics.median(cpus), count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument(
        "--reuse",
        nargs=2,
        metavar=("PREFIX", "GROUP"),
        help="read the existing topics PREFIX-t0000... (--topics of --partitions) and GROUP's "
        "commits (benchmarks.operator_full_poll's) instead of making new ones",
    )
    parser.add_argument(
        "--clients",
        default="operator,operator-steady,kafka-python,confluent-kafka",
        help="comma-separated: operator (log starts every round), operator-steady (log starts "
        "when due), kafka-python, confluent-kafka",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="offset-reads-") as directory:
        broker = None if args.bootstrap else Broker(Path(directory))
        bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
        try:
            if args.reuse:
                prefix, group = args.reuse
                keys = [
                    (f"{prefix}-t{i:04d}", p)
                    for i in range(args.topics)
                    for p in range(args.partitions)
                ]
            else:
                keys, group = prepare(bootstrap, args.topics, args.partitions)
            print(f"{len(keys):,} partitions, {args.rounds} rounds (median ms, all rounds)")
            factories: dict[str, Callable[..., Callable[[], int]]] = {
                "operator": lambda b, k, g: operator_reads(b, k, g, starts=True),
                "operator-steady": lambda b, k, g: operator_reads(b, k, g, starts=False),
                "kafka-python": kafka_python_reads,
                "confluent-kafka": confluent_reads,
            }
            for name in args.clients.split(","):
                median, times, cpu, count = measure(
                    factories[name](bootstrap, keys, group), args.rounds
                )
                rounds = ", ".join(f"{t * 1000:.0f}" for t in times)
                print(
                    f"  {name:16s} {median * 1000:8.0f} ms wall, {cpu * 1000:6.0f} ms CPU  "
                    f"[{rounds}]  ({count:,} offsets read)",
                    flush=True,
                )
        finally:
            if broker is not None:
                broker.stop()


if __name__ == "__main__":
    main()
