"""The Python consumers of the data path benchmark, each run as its own process.

    python -m benchmarks.datapath_consumers '<json spec>'

A spec names the consumer (`raw` kafka-python, `confluent` for confluent-kafka, or the `sidecar`
with its apply mode and delivery),
the topic, how many records to expect and whether to keep latencies. The process consumes until it
has seen them all, then prints one JSON line with what the parent tabulates (the Java consumer in
benchmarks/java prints the same fields):

- monotonic seconds at start, after the first batch and after the last one: the rate is taken
  between the first and the last batch, so start-up (imports aside, group join included) is its
  own column and not smeared over the throughput;
- process CPU seconds (all threads) at the first and last batch: CPU per record;
- peak resident memory (VmHWM) of the whole process;
- with `latency`, per record the milliseconds from its timestamp (set by the producer) to the
  moment the handler returned (in-process) or the application answered (HTTP).

`READY` is printed once the consumer owns its partitions; the latency run starts producing then.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


class Tally:
    """Counts batches as they complete; keeps the figures the parent needs."""

    def __init__(self, expected: int, latency: bool) -> None:
        self.expected = expected
        self.latency = latency
        self.started = time.monotonic()
        self.seen = 0
        self.bytes = 0
        self.first_count = 0
        self.first = 0.0
        self.last = 0.0
        self.cpu_first = 0.0
        self.cpu_last = 0.0
        self.latencies: list[int] = []
        self.done = threading.Event()

    def add(self, values: list[bytes | None], timestamps: list[int]) -> None:
        if self.latency:
            now_ms = time.time() * 1000
            self.latencies.extend(int(now_ms - t) for t in timestamps)
        self.seen += len(values)
        self.bytes += sum(len(v) for v in values if v is not None)
        self.last = time.monotonic()
        self.cpu_last = cpu_seconds()
        if not self.first:
            self.first, self.cpu_first, self.first_count = self.last, self.cpu_last, self.seen
        if self.seen >= self.expected:
            self.done.set()

    def result(self) -> dict[str, Any]:
        return {
            "records": self.seen,
            "bytes": self.bytes,
            "first_count": self.first_count,
            "t_start": self.started,
            "t_first": self.first,
            "t_last": self.last,
            "cpu_first": self.cpu_first,
            "cpu_last": self.cpu_last,
            "peak_rss_kb": peak_rss_kb(),
            "latencies_ms": self.latencies,
        }


def ready() -> None:
    print("READY", flush=True)


def run_raw(spec: dict[str, Any], tally: Tally) -> None:
    """kafka-python alone: assign every partition, poll, count (no commits), CRC checks on."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=spec.get("max_poll_records", 500),
    )
    partitions = [TopicPartition(spec["topic"], p) for p in range(spec["partitions"])]
    consumer.assign(partitions)
    for tp in partitions:
        consumer.position(tp)
    ready()
    deadline = time.monotonic() + spec.get("timeout_s", 600)
    while not tally.done.is_set() and time.monotonic() < deadline:
        polled = consumer.poll(timeout_ms=500)
        if not polled:
            continue
        values: list[bytes | None] = []
        timestamps: list[int] = []
        for records in polled.values():
            for r in records:
                values.append(r.value)
                timestamps.append(r.timestamp)
        tally.add(values, timestamps)
    consumer.close(autocommit=False)


def run_confluent(spec: dict[str, Any], tally: Tally) -> None:
    """confluent-kafka (librdkafka) alone, the same work as `run_raw`: assign every partition,
    consume in batches, count (no commits), CRC checks on (librdkafka's default is off). The
    candidate second engine for assign mode, measured before anything is built on it."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from kafka_rebalance_sidecar.librdkafka_engine import FETCH_QUEUE_BACKOFF_MS

    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": spec["group"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "check.crcs": True,
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,  # as the sidecar's engine sets it
        }
    )
    consumer.assign(
        [TopicPartition(spec["topic"], p, OFFSET_BEGINNING) for p in range(spec["partitions"])]
    )
    ready()
    batch = spec.get("max_poll_records", 500)
    deadline = time.monotonic() + spec.get("timeout_s", 600)
    while not tally.done.is_set() and time.monotonic() < deadline:
        messages = [m for m in consumer.consume(num_messages=batch, timeout=0.5) if not m.error()]
        if messages:
            tally.add([m.value() for m in messages], [m.timestamp()[1] for m in messages])
    consumer.close()


def run_sidecar(spec: dict[str, Any], tally: Tally) -> None:
    """The sidecar as `kafka-rebalance sidecar` builds it (PlanFollowingConsumer), following a
    document that gives it every partition, delivering in process or over HTTP."""
    from kafka_rebalance_sidecar.consumer import PlanFollowingConsumer
    from kafka_rebalance_sidecar.delivery import HttpDelivery
    from kafka_rebalance_sidecar.records import Batch
    from kafka_rebalance_sidecar.runner import SidecarConfig

    member = "bench-0"
    directory = Path(tempfile.mkdtemp(prefix="datapath-"))
    document = directory / "assignment.json"
    document.write_text(
        json.dumps(
            {
                "group": spec["group"],
                "member": member,
                "epoch": 1,
                "partitions": {spec["topic"]: list(range(spec["partitions"]))},
                "revoking": {},
                "planHash": "bench",
                "generatedAt": "2026-01-01T00:00:00Z",
            }
        )
    )
    config = SidecarConfig(
        bootstrap_servers=spec["bootstrap"],
        group=spec["group"],
        topics=(spec["topic"],),
        member=member,
        apply_mode=spec["mode"],
        max_poll_records=spec.get("max_poll_records", 500),
        commit_interval_ms=spec.get("commit_interval_ms", 200),
        engine=spec.get("engine", "kafka-python"),
    )
    consumer = PlanFollowingConsumer(config, assignment_file=str(document), on_poison="skip")

    def count(batch: Batch) -> None:
        records = batch.records
        tally.add([r.value for r in records], [r.timestamp_ms for r in records])
        if tally.done.is_set():
            consumer.stop()

    class CountingHttp(HttpDelivery):
        """The sidecar's own HTTP delivery, passed as such (the runner gets what `--deliver-to`
        gives it, not a handler wrapping it), counting each batch once the application answered."""

        def __call__(self, batch: Batch) -> None:
            super().__call__(batch)
            count(batch)

    sink: Any = CountingHttp(spec["url"]) if spec.get("url") else count

    def announce_ready() -> None:
        while not consumer.health.ready()[0] or consumer.tracker.current is None:
            time.sleep(0.05)
        ready()

    threading.Thread(target=announce_ready, daemon=True).start()
    timer = threading.Timer(spec.get("timeout_s", 600), consumer.stop)
    timer.daemon = True
    timer.start()
    consumer.run(sink)
    timer.cancel()


def main() -> None:
    spec = json.loads(sys.argv[1])
    tally = Tally(spec["expected"], spec.get("latency", False))
    runners = {"raw": run_raw, "confluent": run_confluent, "sidecar": run_sidecar}
    runners[spec["kind"]](spec, tally)
    print(json.dumps(tally.result()), flush=True)


if __name__ == "__main__":
    main()
