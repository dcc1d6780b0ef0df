"""Real Kafka Streams 4.4 applications for the streams-group tests (`-m streams`).

`StreamsApps` runs tests/integration/java/StreamsTestApp.java, one JVM per instance
(`group.protocol=streams`, one stream thread), with the broker's libs/ plus the provisioned
kafka-streams lib/ on the classpath. The source is compiled once (`compile_app`, cached across
runs), not per JVM as a single-file launch would: on two shared cores that compile costs each
start seconds. Each
instance prints its active and standby tasks on every change, stamped with the wall clock;
`tasks()` reads the latest line of the instance's current run. Everything the tests measure about
progress comes from the broker (end offsets, the group's committed offsets, the output topic),
never from the applications' own claims.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.devenv import java_classes
from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.processes import dies_with_parent
from kafka_rebalance_dev.devenv.toolchain import Toolchain

APP = Path(__file__).parent / "java" / "StreamsTestApp.java"
# Small JVMs: the machine has 2 cores shared with the broker, the API server and the operator.
JVM = ["-Xmx128m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
TASKS = re.compile(
    r"^(?P<ms>\d+) tasks active=\[(?P<active>[^\]]*)\] standby=\[(?P<standby>[^\]]*)\]$"
)
STATE = re.compile(r"^(?P<ms>\d+) state (?P<state>[A-Z_]+)$")


def compile_app(tools: Toolchain) -> Path:
    """StreamsTestApp.java's classes compiled against the streams classpath (once per machine:
    devenv/java_classes.py keeps them under the cache, keyed by source and classpath)."""
    return java_classes.compiled(APP, tools.kafka_streams_classpath(), tools.java_classes_cache)


def missing_streams_jars(tools: Toolchain) -> str | None:
    """Why the applications cannot run here (kafka-streams not provisioned), or None."""
    lib = tools.kafka_streams_dir / "lib"
    if not any(lib.glob("kafka-streams-*.jar")):
        return (
            f"kafka-streams {tools.kafka_version} is not provisioned ({lib} has no jar): run "
            "`kafka-rebalance dev provision --only kafka-streams`"
        )
    return None


@dataclass(frozen=True)
class Tasks:
    active: frozenset[str]
    standby: frozenset[str]
    at: float = 0.0  # wall-clock seconds the instance printed it (0: nothing printed yet)


def _task_set(text: str) -> frozenset[str]:
    return frozenset(t.strip() for t in text.split(",") if t.strip())


class StreamsApps:
    """The instances of one application (one streams group), each its own process group."""

    def __init__(
        self,
        tools: Toolchain,
        bootstrap: str,
        application_id: str,
        mode: str,
        input_topic: str,
        output_topic: str,
        workdir: Path,
        classes: Path,
    ) -> None:
        self.tools, self.bootstrap, self.application_id = tools, bootstrap, application_id
        self.mode, self.input_topic, self.output_topic = mode, input_topic, output_topic
        self.workdir = workdir
        self.classpath = f"{classes}:{tools.kafka_streams_classpath()}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.run_start: dict[str, int] = {}  # instance -> its log's size when its run started

    def log(self, instance: str) -> Path:
        return self.workdir / f"streams-{instance}.log"

    def start(self, instance: str, delay_ms: int = 0) -> None:
        """Start `instance`; `delay_ms` > 0 makes it sleep that long per record (stateless)."""
        state_dir = self.workdir / f"state-{instance}"
        state_dir.mkdir(parents=True, exist_ok=True)
        log = self.log(instance)
        self.run_start[instance] = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            self.processes[instance] = subprocess.Popen(
                [
                    java_binary(),
                    *JVM,
                    *self.tools.kafka_jvm_flags(tool=True),
                    "-cp",
                    self.classpath,
                    "StreamsTestApp",
                    self.mode,
                    self.bootstrap,
                    self.application_id,
                    self.input_topic,
                    self.output_topic,
                    instance,
                    str(state_dir),
                    str(delay_ms),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=dies_with_parent,  # not orphaned by an interrupted run
            )

    def stop(self, instance: str, *, crash: bool = False) -> None:
        """SIGTERM (KafkaStreams.close(): the member leaves the group at once) or, with
        `crash`, SIGKILL (the member stays until its session times out)."""
        process = self.processes.pop(instance)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL if crash else signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def stop_all(self) -> None:
        for instance in list(self.processes):
            self.stop(instance)

    def _lines(self, instance: str) -> list[str]:
        """The log lines of the instance's current (or last) run."""
        try:
            with open(self.log(instance), "rb") as f:
                f.seek(self.run_start.get(instance, 0))
                return f.read().decode(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def tasks(self, instance: str) -> Tasks:
        """The instance's tasks as its current run last printed them (none before that)."""
        found = Tasks(frozenset(), frozenset())
        for line in self._lines(instance):
            if match := TASKS.match(line.strip()):
                found = Tasks(
                    _task_set(match["active"]), _task_set(match["standby"]), int(match["ms"]) / 1e3
                )
        return found

    def state(self, instance: str) -> str:
        """The KafkaStreams state the current run last printed ("" before the first)."""
        found = ""
        for line in self._lines(instance):
            if match := STATE.match(line.strip()):
                found = match["state"]
        return found

    def crashed(self) -> str | None:
        """Why an instance is gone or broken (exited, or its stream thread died), or None."""
        problems = []
        for instance, process in self.processes.items():
            text = (
                self.log(instance).read_text(errors="replace")
                if self.log(instance).exists()
                else ""
            )
            if process.poll() is not None or "state ERROR" in text or "uncaught " in text:
                problems.append(f"{instance}: {text[-2000:]}")
        return "; ".join(problems) or None

    def evidence(self) -> str:
        return "\n".join(
            f"--- {i} ---\n{self.log(i).read_text(errors='replace')[-1500:]}"
            for i in sorted(self.processes)
            if self.log(i).exists()
        )


def set_group_configs(admin: RetryingAdmin, group: str, configs: Mapping[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource (e.g. streams.num.standby.replicas)."""
    admin.alter_configs(
        [ConfigResource(ConfigResourceType.GROUP, group, configs=dict(configs))],
        incremental=True,
    )


def end_offsets(admin: RetryingAdmin, topic: str, partitions: int) -> dict[int, int]:
    specs = {TopicPartition(topic, p): OffsetSpec.LATEST for p in range(partitions)}
    found = admin.list_partition_offsets(specs)
    return {tp.partition: info.offset for tp, info in found.items()}


def committed(admin: RetryingAdmin, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets on `topic` (0 where nothing is committed yet)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    found = admin.list_group_offsets({group: tps}).get(group, {})
    out = dict.fromkeys(range(partitions), 0)
    for tp, meta in found.items():
        if meta is not None and meta.offset is not None and meta.offset >= 0:
            out[tp.partition] = meta.offset
    return out


def lag(admin: RetryingAdmin, group: str, topic: str, partitions: int) -> dict[int, int]:
    ends = end_offsets(admin, topic, partitions)
    done = committed(admin, group, topic, partitions)
    return {p: max(0, ends[p] - done[p]) for p in range(partitions)}


class PacedProducer:
    """Produces to chosen partitions at fixed rates (records/s) on a thread until stopped.

    Values are "v-<partition>-<n>"; every `noise_every`-th record of a partition (if > 0) is
    "noise-..." (the stateless topology filters those out). Keys come from `key_of(p, n)`.
    Counts of what was acknowledged are kept per (partition) and per key.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        rates: Mapping[int, float],
        *,
        keys: int = 0,
        noise_every: int = 0,
    ) -> None:
        self.topic, self.rates, self.keys, self.noise_every = topic, dict(rates), keys, noise_every
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
        self.sent: dict[int, int] = dict.fromkeys(self.rates, 0)
        self.per_key: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            elapsed = time.monotonic() - started
            for partition, rate in self.rates.items():
                while self.sent[partition] < int(rate * elapsed):
                    n = self.sent[partition]
                    key = f"k{partition}-{n % self.keys}" if self.keys else f"p{partition}"
                    noise = self.noise_every and n % self.noise_every == self.noise_every - 1
                    value = f"{'noise' if noise else 'v'}-{partition}-{n}"
                    self.producer.send(
                        self.topic, key=key.encode(), value=value.encode(), partition=partition
                    )
                    self.sent[partition] = n + 1
                    self.per_key[key] = self.per_key.get(key, 0) + 1
            self._stop.wait(0.02)
        self.producer.flush(30)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.producer.close(10)


def read_committed_output(
    bootstrap: str, topic: str, timeout: float = 5.0
) -> list[tuple[str, str]]:
    """Every committed (key, value) of `topic` in partition order (read_committed), reading
    until `timeout` passes with nothing new after reaching the end offsets."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=int(timeout * 1000),
    )
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        return [(r.key.decode(), r.value.decode()) for r in consumer]
    finally:
        consumer.close()
