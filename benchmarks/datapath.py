"""The sidecar's data path against a raw kafka-python consumer and Kafka's Java consumer.

    .venv/bin/python -m benchmarks.datapath [--full] [--bootstrap HOST:PORT] [...]

One broker (started here with the project's harness in a temporary directory, on free loopback
ports, unless --bootstrap names one), one run, every consumer in its own process on the same
topics, one after another:

- `raw`: kafka-python's KafkaConsumer, assign, poll, count (no commits), CRC checks on; the floor
  for any Python consumer;
- `java`: Kafka's own KafkaConsumer doing the same (benchmarks/java, the broker's version); the
  ceiling on this machine;
- `confluent`: confluent-kafka (librdkafka) doing the same, when installed (the dev extra): the
  candidate second engine for assign mode;
- `sidecar`: the PlanFollowingConsumer behind `kafka-rebalance sidecar`, following a document that
  gives it every partition, in either apply mode, delivering to a no-op handler in process or over
  HTTP to a trivial local application (its own process), committing after every delivery.

Throughput is taken between the first and the last batch of records already in the topic (start-up
is its own column); CPU per record over the same span, all threads of the consumer's process (the
HTTP application's CPU is not counted); memory is the process's peak resident set. Latency is
produce -> handler (in process) or -> the application's answer (HTTP) at a fixed rate on a fresh
topic. The default run (assign mode, 100-byte and 1 KiB records on 6 partitions, two rounds with
the best of each kept, latency for raw, Java and the sidecar's two deliveries) takes about six
minutes on two shared cores; --full adds 1 partition, group mode, latency for every path and a
third round. Prints tables with the load average: on a shared machine only the ratios within one
run mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin

from benchmarks import kafka_harness

ROOT = Path(__file__).resolve().parent.parent
JAVA_MAIN = "dev.kafkarebalance.bench.DataPathBench"
JAVA_OPTIONS = ["-Xmx384m", "-XX:+UseSerialGC"]


@dataclass(frozen=True)
class Path_:
    """One consumer under test."""

    name: str  # raw, confluent, java, sidecar
    mode: str = "assign"  # the sidecar's apply mode
    http: bool = False
    engine: str = "kafka-python"  # the sidecar's --engine

    @property
    def label(self) -> str:
        if self.name != "sidecar":
            return self.name
        engine = " librdkafka" if self.engine == "librdkafka" else ""
        return f"sidecar {'http' if self.http else 'in-process'} {self.mode}{engine}"


RAW = Path_("raw")
JAVA = Path_("java")
CONFLUENT = Path_("confluent")  # librdkafka through confluent-kafka (the dev extra), if installed


def engine_paths() -> list[Path_]:
    """The Python client engines measured: kafka-python, and confluent-kafka where installed."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return [RAW]
    return [RAW, CONFLUENT]


def sidecar_paths(modes: list[str]) -> list[Path_]:
    """Both deliveries in each mode, and in assign mode on librdkafka too where installed."""
    engines = ["kafka-python"] + (["librdkafka"] if CONFLUENT in engine_paths() else [])
    return [
        Path_("sidecar", mode, http, engine)
        for mode in modes
        for engine in (engines if mode == "assign" else ["kafka-python"])
        for http in (False, True)
    ]


# ---- the broker ----------------------------------------------------------------------------------


class Broker:
    """One KRaft broker from the project's dev harness, in its own temporary directory."""

    def __init__(self, directory: Path) -> None:
        from kafka_rebalance_dev.devenv import kafka_broker
        from kafka_rebalance_dev.devenv.processes import StateFile
        from kafka_rebalance_dev.devenv.supervisor import Supervisor
        from kafka_rebalance_dev.devenv.toolchain import toolchain

        tools = toolchain()
        missing = [m for m in tools.missing() if m.startswith("kafka ")]
        if missing:
            raise SystemExit(f"not provisioned: {', '.join(missing)}; run scripts/bootstrap")
        self.supervisor = Supervisor(StateFile(directory / "state.json"), die_with_parent=True)
        cluster = kafka_broker.start_cluster(
            "datapath", directory / "kafka", tools, self.supervisor, nodes=1, heap="512m"
        )
        self.bootstrap = cluster.bootstrap_servers

    def stop(self) -> None:
        self.supervisor.stop(grace=10)


# ---- topics and producers ------------------------------------------------------------------------


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"datapath-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    return topic


def fill(
    classpath: str, bootstrap: str, topic: str, partitions: int, count: int, size: int
) -> None:
    """Write `count` records of `size` random bytes with Kafka's Java producer (fast, and off
    Python's CPU budget)."""
    command = ["java", *JAVA_OPTIONS, "-cp", classpath, JAVA_MAIN, "produce"]
    args = [bootstrap, topic, str(partitions), str(count), str(size)]
    subprocess.run([*command, *args], check=True, stdout=subprocess.DEVNULL)


def produce_at_rate(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> int:
    """kafka-python producer at a fixed rate; each record's timestamp is its send time."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    value = os.urandom(size)
    total = int(rate * seconds)
    started = time.monotonic()
    for i in range(total):
        delay = started + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.send(topic, value=value, timestamp_ms=int(time.time() * 1000))
    producer.flush(60)
    producer.close()
    return total


# ---- running one consumer ------------------------------------------------------------------------


@dataclass
class Result:
    path: Path_
    size: int
    partitions: int
    raw: dict[str, Any]

    @property
    def steady_records(self) -> int:
        return self.raw["records"] - self.raw["first_count"]

    @property
    def span(self) -> float:
        return self.raw["t_last"] - self.raw["t_first"]

    @property
    def rate(self) -> float:
        return self.steady_records / self.span if self.span > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.rate * self.size / 1e6

    @property
    def startup(self) -> float:
        return self.raw["t_first"] - self.raw["t_start"]

    @property
    def cpu_us(self) -> float:
        cpu = self.raw["cpu_last"] - self.raw["cpu_first"]
        return cpu / self.steady_records * 1e6 if self.steady_records else 0.0

    @property
    def rss_mb(self) -> float:
        return self.raw["peak_rss_kb"] / 1024

    def latency(self, q: float) -> float:
        values = sorted(self.raw["latencies_ms"])
        return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


class Consumers:
    """Starts the consumer processes; knows the Java classpath and the HTTP application."""

    def __init__(self, bootstrap: str, classpath: str, app_url: str, sidecar: dict[str, Any]):
        self.bootstrap = bootstrap
        self.classpath = classpath
        self.app_url = app_url
        self.sidecar = sidecar

    def command(self, path: Path_, topic: str, partitions: int, expected: int, latency: bool):
        group = f"datapath-{uuid.uuid4().hex[:8]}"
        if path.name == "java":
            args = [self.bootstrap, topic, str(partitions), str(expected), group]
            return [
                "java",
                *JAVA_OPTIONS,
                "-cp",
                self.classpath,
                JAVA_MAIN,
                "consume",
                *args,
                *(["latency"] if latency else []),
            ]
        spec: dict[str, Any] = {
            "kind": path.name,
            "bootstrap": self.bootstrap,
            "topic": topic,
            "partitions": partitions,
            "expected": expected,
            "group": group,
            "latency": latency,
        }
        if path.name == "sidecar":
            spec.update(
                self.sidecar,
                mode=path.mode,
                url=self.app_url if path.http else None,
                engine=path.engine,
            )
        return [sys.executable, "-m", "benchmarks.datapath_consumers", json.dumps(spec)]

    def start(
        self, path: Path_, topic: str, partitions: int, expected: int, latency: bool = False
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(path, topic, partitions, expected, latency),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )


def wait_ready(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip() == "READY":
            return
    raise RuntimeError(f"consumer exited before it was ready (exit {process.wait()})")


def collect(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    out, _ = process.communicate(timeout=900)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"consumer failed (exit {process.returncode})")
    return json.loads(lines[-1])


def throughput(
    consumers: Consumers, path: Path_, topic: str, partitions: int, count: int, size: int
) -> Result:
    process = consumers.start(path, topic, partitions, count)
    wait_ready(process)
    return Result(path, size, partitions, collect(process))


def latency(
    consumers: Consumers, path: Path_, partitions: int, rate: int, seconds: float, size: int
) -> Result:
    topic = create_topic(consumers.bootstrap, partitions)
    expected = int(rate * seconds)
    process = consumers.start(path, topic, partitions, expected, latency=True)
    wait_ready(process)
    produce_at_rate(consumers.bootstrap, topic, rate, seconds, size)
    return Result(path, size, partitions, collect(process))


# ---- the HTTP application ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_app() -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.datapath_app", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.readline()
    return process, f"http://127.0.0.1:{port}/records"


# ---- tables --------------------------------------------------------------------------------------


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def throughput_table(results: list[Result]) -> None:
    print(
        f"{'path':<38}{'size':>6}{'parts':>6}{'rec/s':>10}{'MB/s':>8}{'% raw':>8}"
        f"{'Java/x':>8}{'start s':>9}{'CPU us/rec':>11}{'peak RSS MB':>12}"
    )
    cells: dict[tuple[int, int], dict[str, list[Result]]] = {}
    for r in results:
        cells.setdefault((r.size, r.partitions), {}).setdefault(r.path.label, []).append(r)
    for (size, partitions), by_path in cells.items():
        best = {label: max(rs, key=lambda r: r.rate) for label, rs in by_path.items()}
        raw = best.get(RAW.label)
        java = best.get(JAVA.label)
        for label, r in best.items():
            of_raw = f"{100 * r.rate / raw.rate:.0f}%" if raw and raw.rate else "-"
            of_java = f"{java.rate / r.rate:.2f}" if java and r.rate else "-"
            print(
                f"{label:<38}{size:>6}{partitions:>6}{r.rate:>10,.0f}{r.mb_per_s:>8.1f}"
                f"{of_raw:>8}{of_java:>8}{r.startup:>9.1f}{r.cpu_us:>11.1f}{r.rss_mb:>12.0f}"
            )
        print()


def latency_table(results: list[Result], rate: int) -> None:
    print(
        f"{'path (' + str(rate) + ' rec/s)':<38}{'parts':>6}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'max ms':>8}{'records':>9}{'CPU us/rec':>11}"
    )
    for r in results:
        print(
            f"{r.path.label:<38}{r.partitions:>6}{r.latency(0.5):>8.0f}{r.latency(0.99):>8.0f}"
            f"{max(r.raw['latencies_ms'] or [0]):>8.0f}{r.raw['records']:>9}{r.cpu_us:>11.1f}"
        )
    print()


# ---- main ----------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--full", action="store_true", help="the whole grid, three rounds")
    parser.add_argument("--sizes", default="100,1024", help="record sizes in bytes")
    parser.add_argument("--partitions", help="partitions per topic (default 6; --full: 1,6)")
    parser.add_argument("--modes", help="sidecar apply modes (default assign; --full: both)")
    parser.add_argument("--rounds", type=int, help="rounds over all paths (best kept)")
    parser.add_argument("--records-small", type=int, default=200_000, help="100-byte records")
    parser.add_argument("--megabytes", type=int, default=100, help="data for larger records")
    parser.add_argument("--rate", type=int, default=1000, help="latency run: records per second")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--commit-interval-ms", type=int, default=200, help="the sidecar's")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    partition_counts = [
        int(p) for p in (args.partitions or ("1,6" if args.full else "6")).split(",")
    ]
    modes = (args.modes or ("assign,group" if args.full else "assign")).split(",")
    rounds = args.rounds or (3 if args.full else 2)
    paths = [*engine_paths(), JAVA, *sidecar_paths(modes)]
    latency_paths = [RAW, JAVA, *sidecar_paths(modes if args.full else ["assign"])]

    from kafka.record import util as record_util

    crc = getattr(record_util._crc32c, "__module__", None) or "builtin"
    print(f"{load()}; python {sys.version.split()[0]}; kafka-python crc32c from {crc!r}")
    log = Path(tempfile.gettempdir()) / "datapath-java-build.log"
    classpath = kafka_harness.build(kafka_harness.kafka_version(), log)
    directory = Path(tempfile.mkdtemp(prefix="datapath-broker-"))
    broker = None if args.bootstrap else Broker(directory)
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    app, url = start_app()
    sidecar_options = {
        "max_poll_records": args.max_poll_records,
        "commit_interval_ms": args.commit_interval_ms,
    }
    consumers = Consumers(bootstrap, classpath, url, sidecar_options)
    results: list[Result] = []
    started = time.monotonic()
    try:
        for size in sizes:
            count = args.records_small if size <= 100 else args.megabytes * 1_000_000 // size
            for partitions in partition_counts:
                topic = create_topic(bootstrap, partitions)
                fill(classpath, bootstrap, topic, partitions, count, size)
                for _ in range(rounds):
                    for path in paths:
                        result = throughput(consumers, path, topic, partitions, count, size)
                        print(
                            f"  {path.label} {size} B x {partitions}: {result.rate:,.0f} rec/s",
                            file=sys.stderr,
                        )
                        results.append(result)
        latencies = []
        if not args.no_latency:
            for path in latency_paths:
                latencies.append(latency(consumers, path, 6, args.rate, args.latency_seconds, 100))
    finally:
        app.terminate()
        app.wait()
        if broker is not None:
            broker.stop()
    print()
    print(f"Throughput ({rounds} round(s), best kept); {load()}")
    throughput_table(results)
    if latencies:
        print(f"Latency, 100-byte records, 6 partitions; {load()}")
        latency_table(latencies, args.rate)
    print(f"wall time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
