"""The operator's whole poll of one big group, phase by phase, on the real broker and API server.

    .venv/bin/python -m benchmarks.operator_full_poll --topics 100 --partitions 100 \
        --members 1000 [--brokers 1] [--polls 5] [--strategy lag-aware] [--mode assign]

Starts its own Kafka cluster (`--brokers` KRaft nodes) and control plane (etcd, kube-apiserver,
KWOK) in a temporary directory, or uses running ones (`--bootstrap` and `--kubeconfig`, e.g. from
`kafka-rebalance dev up --print-env`). It then builds what a user with a big group has:
`--topics` topics of `--partitions` partitions, records in every partition and the group's
committed offsets behind them (so every partition has a lag), `--members` consumer pods running
on KWOK nodes, and one ConsumerGroupPolicy over the topics (by `topicPattern`) with telemetry on.

The poll is the operator's own `reconcile.poll` with its real ports (kafka-python against the
broker, the kubernetes client against the API server, the Prometheus registry, a JSON-lines
telemetry sink), each port and each phase wrapped in a timer; the status write the kopf handler
does after the poll is timed as its own phase. The first poll applies epoch 1 (it writes every
member's ConfigMap); the steady polls that follow find nothing to change, which is what a poll
costs every `pollInterval` (default 30 s) in a settled group. Prints the phase table, the port
calls inside it, and the process's peak RSS. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import resource
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kafka_rebalance_common.kafka_retry import RetryingAdmin

from benchmarks.measure import load_average, table
from benchmarks.operator_poll import commit_group_offsets

PHASES = ("observe", "plan", "decide", "apply", "report")
FLEET_MEMBERS = 5  # pods per `slot` label: the fleet's policies select one slot each


@dataclass
class Clocks:
    """Wall seconds per label for the current poll, and every finished poll's totals."""

    current: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    polls: list[dict[str, float]] = field(default_factory=list)
    cpus: list[dict[str, float]] = field(default_factory=list)
    counts: list[dict[str, int]] = field(default_factory=list)
    sockets: list[int] = field(default_factory=list)
    peak: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # MiB
    peaks: list[dict[str, float]] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)  # MiB after each poll
    _open: list[str] = field(default_factory=list)  # labels being timed now, outermost first
    highest: float = 0.0  # MiB: the process's peak RSS over every reading (the resets hide it)

    def add(self, label: str, seconds: float, cpu: float = 0.0) -> None:
        self.current[label] += seconds
        self.cpu[label] += cpu
        self.calls[label] += 1

    def finish(self) -> None:
        self.polls.append(dict(self.current))
        self.cpus.append(dict(self.cpu))
        self.counts.append(dict(self.calls))
        self.peaks.append(dict(self.peak))
        self.sockets.append(open_sockets())
        self.rss.append(rss_mib()[0])
        self.current, self.calls = defaultdict(float), defaultdict(int)
        self.cpu, self.peak = defaultdict(float), defaultdict(float)

    def enter(self, label: str) -> None:
        """Start `label`'s peak RSS: the peak so far counts for the labels already open, then
        the kernel's high-water mark restarts from the current RSS."""
        self._note_peak()
        self._open.append(label)
        reset_peak_rss()

    def leave(self) -> None:
        self._note_peak()
        self._open.pop()

    def _note_peak(self) -> None:
        _rss, hwm = rss_mib()
        self.highest = max(self.highest, hwm)
        for label in self._open:
            self.peak[label] = max(self.peak[label], hwm)

    def timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` timed under `label`: wall seconds, CPU seconds of the whole process (the
        Kafka client's network thread included) and the process's peak RSS while it ran."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.enter(label)
            started, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(label, time.perf_counter() - started, time.process_time() - cpu)
                self.leave()

        return wrapper


def rss_mib() -> tuple[float, float]:
    """(RSS now, peak RSS since the last `reset_peak_rss`) of this process, MiB (Linux)."""
    fields = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def reset_peak_rss() -> None:
    """Restart the kernel's peak-RSS mark (VmHWM) from the current RSS (Linux 4.0+)."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def count_lines(path: Path) -> int:
    """Lines in a file, read a block at a time: the fleet's telemetry file is hundreds of MiB,
    and reading it whole made the process's peak RSS (918 MiB) rather than the polls."""
    with open(path, "rb") as lines:
        return sum(1 for _line in lines)


def open_sockets() -> int:
    """Sockets this process holds open now (Linux: /proc/self/fd)."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir() if fds.exists() else []:
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


class TimedPort:
    """Any port object with each public method timed under `<name>.<method>`."""

    def __init__(self, inner: Any, name: str, clocks: Clocks) -> None:
        self._inner, self._name, self._clocks = inner, name, clocks

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._inner, attribute)
        if callable(value) and not attribute.startswith("_"):
            return self._clocks.timed(f"{self._name}.{attribute}", value)
        return value


# ------------------------------------------------------------------------------------- the world


@contextlib.contextmanager
def environment(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(bootstrap servers, kubeconfig path): the given ones, or a cluster and control plane of
    the benchmark's own, stopped on exit."""
    if args.bootstrap and args.kubeconfig:
        yield args.bootstrap, args.kubeconfig
        return
    from kafka_rebalance_dev.devenv import control_plane, kafka_broker
    from kafka_rebalance_dev.devenv.processes import StateFile
    from kafka_rebalance_dev.devenv.supervisor import Supervisor
    from kafka_rebalance_dev.devenv.toolchain import toolchain

    tools = toolchain()
    missing = [m for m in tools.missing() if m.split(" ", 1)[0] in ("kafka", "etcd", "kubernetes")]
    if missing:
        sys.exit(f"not provisioned: {', '.join(missing)}; run scripts/bootstrap")
    with tempfile.TemporaryDirectory(prefix="full-poll-") as root:
        supervisor = Supervisor(StateFile(Path(root) / "state.json"), die_with_parent=True)
        try:
            started = time.perf_counter()
            cluster = kafka_broker.start_cluster(
                "bench-kafka",
                Path(root) / "kafka",
                tools,
                supervisor,
                nodes=args.brokers,
                heap=args.broker_heap,
                timeout=300,
            )
            plane = control_plane.start(Path(root) / "kubernetes", tools, supervisor)
            print(
                f"started {args.brokers} broker(s) and the control plane in "
                f"{time.perf_counter() - started:.1f} s"
            )
            yield cluster.bootstrap_servers, str(plane.kubeconfig)
        finally:
            supervisor.stop(grace=10)


def create_topics(bootstrap: str, prefix: str, topics: int, partitions: int) -> list[str]:
    from kafka.admin import NewTopic

    names = [f"{prefix}-t{i:04d}" for i in range(topics)]
    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=300_000)
    try:
        for start in range(0, topics, 50):
            batch = [NewTopic(n, partitions, 1) for n in names[start : start + 50]]
            admin.create_topics(batch, timeout_ms=300_000)
        deadline = time.monotonic() + 600
        while True:  # every partition has a leader before anything is written
            described = admin.describe_topics(names)
            ready = sum(
                1
                for topic in described
                for p in topic.get("partitions", [])
                if p.get("leader_id", p.get("leader", -1)) >= 0
            )
            if ready == topics * partitions:
                return names
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ready} of {topics * partitions} partitions have a leader")
            time.sleep(2)
    finally:
        admin.close()


def write_records_and_offsets(bootstrap: str, names: list[str], partitions: int, group: str) -> int:
    """1-3 records in every partition; the group committed at offset 0 or 1, so lags are 1-3."""
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    written = 0
    # One producer per 50 topics: a producer refreshes the metadata of every topic it has sent
    # to whenever it meets a new one, so one producer for 1,000 topics decodes ~50M partition
    # entries before its last send.
    for start in range(0, len(names), 50):
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=100, batch_size=65536)
        for topic in names[start : start + 50]:
            for p in range(partitions):
                for _ in range(1 + p % 3):
                    producer.send(topic, value=b"x", partition=p)
                    written += 1
        producer.flush(600)
        producer.close()
    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=300_000)
    try:
        offsets = {
            TopicPartition(t, p): OffsetAndMetadata(p % 2, "", -1)
            for t in names
            for p in range(partitions)
        }
        commit_all(admin, group, offsets)
    finally:
        admin.close()
    return written


def commit_all(admin: Any, group: str, offsets: dict[Any, Any], rounds: int = 5) -> None:
    """Commit `offsets` for `group`, committing again whatever did not land. One OffsetCommit
    is one record batch in __consumer_offsets, which refuses batches over max.message.bytes
    (1 MB) partition by partition, without failing the call: 2,000 partitions per commit stay
    below it (20,000 did not, and nothing was committed). On a loaded machine a batch can also
    time out partition by partition (96,000 of 100,000 landed once): those are sent again."""
    missing = dict(offsets)
    for _ in range(rounds):
        items = list(missing.items())
        for start in range(0, len(items), 2_000):
            commit_group_offsets(admin, group, dict(items[start : start + 2_000]), 120)
        landed = admin.list_group_offsets({group: None}).get(group) or {}
        missing = {
            tp: meta
            for tp, meta in offsets.items()
            if tp not in landed or landed[tp].offset != meta.offset
        }
        if not missing:
            return
        print(f"{len(missing):,} of {len(offsets):,} commits did not land; committing again")
    raise RuntimeError(f"{len(offsets) - len(missing)} of {len(offsets)} commits landed")


def create_pods(api: Any, namespace: str, label: str, members: int) -> None:
    """`members` pods on KWOK nodes of the benchmark's own (250 pods fit on the environment's)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    with contextlib.suppress(client.ApiException):
        core.create_namespace({"metadata": {"name": namespace}})
    per_node = 500
    nodes = []
    for n in range((members + per_node - 1) // per_node):
        name = f"{label}-node-{n}"
        capacity = {"cpu": "512", "memory": "2Ti", "pods": str(per_node + 10)}
        core.create_node(
            {
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": name},
                },
                "status": {"allocatable": capacity, "capacity": capacity},
            }
        )
        nodes.append(name)
    for i in range(members):
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {
                    "name": f"{label}-{i:04d}",
                    "labels": {"app": label, "slot": str(i // FLEET_MEMBERS)},
                },
                "spec": {
                    "nodeName": nodes[i // per_node],
                    "containers": [
                        {
                            "name": "consumer",
                            "image": "consumer:bench",
                            "resources": {"requests": {"cpu": "500m"}},
                        }
                    ],
                    "tolerations": [{"operator": "Exists"}],
                },
            },
        )
    deadline = time.monotonic() + 600
    while True:
        pods = core.list_namespaced_pod(namespace, label_selector=f"app={label}").items
        ready = sum(1 for p in pods if _ready(p))
        if ready == members:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{ready} of {members} pods Ready after 600 s")
        time.sleep(2)


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def pod_index(api: Any, namespace: str, label: str, slot: int | None = None) -> list[Any]:
    """What kopf's pod index holds for the namespace, built the way the operator builds it."""
    from kafka_rebalance_operator.kube.members import summarise_pod
    from kubernetes import client

    core = client.CoreV1Api(api)
    selector = f"app={label}" + (f",slot={slot}" if slot is not None else "")
    raw = core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
    import json

    return [summarise_pod(item) for item in json.loads(raw.data)["items"]]


# ----------------------------------------------------------------------------------- measurement


def instrument(clocks: Clocks) -> None:
    """Time each phase where `reconcile` calls it."""
    from kafka_rebalance_operator import reconcile
    from kafka_rebalance_operator.phases import report

    for phase in ("observe", "plan", "decide", "apply"):
        setattr(reconcile, phase, clocks.timed(phase, getattr(reconcile, phase)))
    for outcome in ("polled", "waited", "failed"):
        setattr(report, outcome, clocks.timed("report", getattr(report, outcome)))


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=5, help="steady polls after the first")
    parser.add_argument("--strategy", default="lag-aware")
    parser.add_argument("--mode", default="assign", choices=["assign", "group"])
    parser.add_argument("--brokers", type=int, default=1, help="KRaft nodes to start")
    parser.add_argument("--broker-heap", default="1g")
    parser.add_argument(
        "--profile", type=int, default=0, help="then profile one more poll: print this many rows"
    )
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="ROWS",
        help="trace allocations from the first poll on (the timings are then inflated) and "
        "print this many source lines by memory held, and by growth over one more poll",
    )
    parser.add_argument("--bootstrap")
    parser.add_argument("--kubeconfig")
    parser.add_argument(
        "--reuse",
        metavar="RUN",
        help="use the topics, records, commits and pods an earlier run (id RUN) made with the "
        "same --topics/--partitions/--members against --bootstrap/--kubeconfig",
    )
    parser.add_argument(
        "--reads",
        choices=["wire", "admin"],
        default="wire",
        help="offsets through the operator's wire reader (default) or kafka-python's admin API",
    )
    parser.add_argument(
        "--fleet",
        type=int,
        default=0,
        metavar="POLICIES",
        help="instead: POLICIES policies over --topics/POLICIES topics and 5 pods each, polled "
        "every --interval seconds for --duration seconds as the operator's timers do",
    )
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--workers", type=int, default=6, help="poll threads (asyncio's default)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)

    from kafka_rebalance_dev.demo.cluster import install_crd
    from kafka_rebalance_dev.devenv.toolchain import toolchain
    from kubernetes import config

    total = args.topics * args.partitions
    run = args.reuse or uuid.uuid4().hex[:5]
    prefix, label, namespace = f"fp{run}", f"fp{run}", f"full-poll-{run}"
    group = f"{prefix}-group"
    print(
        f"# operator full poll: {total:,} partitions ({args.topics} topics x {args.partitions}), "
        f"{args.members} members, {args.strategy}, apply.mode {args.mode}, run {run}, "
        f"reads {args.reads}, commit {_commit()}"
    )
    print(f"load average at start: {load_average()}")
    with environment(args) as (bootstrap, kubeconfig):
        names = [f"{prefix}-t{i:04d}" for i in range(args.topics)]
        api = config.new_client_from_config(config_file=kubeconfig)
        if not args.reuse:
            started = time.perf_counter()
            names = create_topics(bootstrap, prefix, args.topics, args.partitions)
            print(f"topics created in {time.perf_counter() - started:.1f} s")
            started = time.perf_counter()
            written = write_records_and_offsets(bootstrap, names, args.partitions, group)
            print(
                f"{written:,} records and {total:,} committed offsets in "
                f"{time.perf_counter() - started:.1f} s"
            )
            install_crd(toolchain().kubectl, Path(kubeconfig))
            started = time.perf_counter()
            create_pods(api, namespace, label, args.members)
            print(f"{args.members} pods Ready in {time.perf_counter() - started:.1f} s")
        if args.reads == "admin":
            with contextlib.suppress(ImportError):
                from kafka_rebalance_operator.kafka import kafka_offsets

                kafka_offsets.OffsetReader.supported = property(lambda self: False)  # type: ignore[method-assign,assignment]
        if args.fleet:
            fleet(args, bootstrap, api, names, namespace, label, prefix)
        else:
            one_policy(args, bootstrap, api, namespace, label, prefix, group, total)


def _commit() -> str:
    with contextlib.suppress(Exception):
        import subprocess

        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    return "?"


def _create_policy(api: Any, namespace: str, name: str, spec: dict[str, Any]) -> str:
    from kubernetes import client

    created = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "kafka-rebalance.io",
        "v1alpha1",
        namespace,
        "consumergrouppolicies",
        {
            "apiVersion": "kafka-rebalance.io/v1alpha1",
            "kind": "ConsumerGroupPolicy",
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    return created["metadata"]["uid"]


def _real_ports(api: Any) -> tuple[Any, Path]:
    from kafka_rebalance_operator import adapters
    from kafka_rebalance_operator.telemetry import JsonLinesSink, Telemetry

    telemetry_file = Path(tempfile.mkdtemp(prefix="full-poll-telemetry-")) / "rows.jsonl"
    return adapters.real_ports(api, Telemetry([JsonLinesSink(str(telemetry_file))])), telemetry_file


def _counting_kafka_clients(real: Any) -> tuple[Any, list[Any]]:
    """`real` with its shared Kafka clients made through a factory that lists each one it makes
    (the fleet report's client count)."""
    from kafka_rebalance_operator.kafka.clients import SharedObservers
    from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver

    made: list[Any] = []

    def connect(servers: str, security: Any, timeout_s: float) -> Any:
        made.append(KafkaObserver(servers, security, timeout_s))
        return made[-1]

    return replace(real, kafka=SharedObservers(connect)), made


def _no_metadata_cache() -> None:
    """One policy polled every 30 s never finds its client's cached whole-cluster metadata
    (kept 5 s): the steady polls here, back to back, must not either."""
    with contextlib.suppress(ImportError):
        from kafka_rebalance_operator.kafka import kafka_offsets

        kafka_offsets.METADATA_MAX_AGE_S = -1.0


def one_policy(
    args: argparse.Namespace,
    bootstrap: str,
    api: Any,
    namespace: str,
    label: str,
    prefix: str,
    group: str,
    total: int,
) -> None:
    from kafka_rebalance_operator import metrics, reconcile
    from kafka_rebalance_operator.memory import PolicyMemory
    from kafka_rebalance_operator.settings import OperatorSettings

    _no_metadata_cache()
    started = time.perf_counter()
    pods = pod_index(api, namespace, label)
    print(
        f"pod list -> index entries (once per watch, not per poll): "
        f"{(time.perf_counter() - started) * 1000:.0f} ms"
    )
    spec = _policy_spec(args, bootstrap, prefix, label, group)
    name = f"bench-{uuid.uuid4().hex[:4]}"
    uid = _create_policy(api, namespace, name, spec)

    clocks = Clocks()
    instrument(clocks)
    real, telemetry_file = _real_ports(api)
    timed_ports = _timed_ports(real, clocks)
    # the one policy is over the default --max-partitions-per-policy (20,000): lifted, as the
    # chart's maxPartitionsPerPolicy would be for it
    memory, settings = PolicyMemory(), OperatorSettings(max_partitions_per_policy=0)
    status: dict[str, Any] = {}
    actions = []
    if args.tracemalloc:  # from here on: what the polls keep is traced (and runs slower)
        import tracemalloc

        tracemalloc.start(1)
    clocks.enter("before the first poll")
    clocks.leave()
    before = clocks.highest
    for _ in range(1 + args.polls):
        ctx = reconcile.PolicyContext(namespace, name, uid, 1, spec, status)
        outcome = clocks.timed("poll", reconcile.poll)(ctx, pods, memory, timed_ports, settings)
        if outcome.status:
            clocks.timed("status write", timed_ports.status.patch)(namespace, name, outcome.status)
        status = {**status, **{k: v for k, v in outcome.status.items() if v is not None}}
        actions.append(outcome.action)
        clocks.finish()
        stalled = [c for c in status.get("conditions") or [] if c.get("type") == "Stalled"]
        if stalled and stalled[0].get("status") == "True":
            sys.exit(f"the poll failed: {stalled[0].get('reason')}: {stalled[0].get('message')}")
    if args.profile:
        ctx = reconcile.PolicyContext(namespace, name, uid, 1, spec, status)
        _profile_poll(args.profile, ctx, pods, memory, real, settings)
    history = getattr(memory, "history", None)
    if args.tracemalloc:
        _tracemalloc_poll(args.tracemalloc, namespace, name, uid, spec, status, pods, memory, real)
    memory.close()
    clocks.enter("end")
    clocks.leave()
    peak = clocks.highest
    series = sum(len(family.samples) for family in metrics.REGISTRY.collect())
    print(
        f"actions: {actions}; epoch {status.get('epoch')}, "
        f"maxLoadRatio {status.get('maxLoadRatio')}"
    )
    print(f"telemetry rows written: {count_lines(telemetry_file):,}")
    if history is not None:
        print(
            f"columnar history: {history.nbytes / total:,.0f} bytes per partition "
            f"({history.nbytes / 2**20:,.1f} MiB)"
        )
    print(f"load average at end: {load_average()}")
    print(
        f"RSS, MiB: before the first poll (imports, clients, pod index) {before:,.0f}; "
        f"after each poll {', '.join(f'{r:,.0f}' for r in clocks.rss)}"
    )
    report_table(clocks, total, args, peak, series)


def _policy_spec(
    args: argparse.Namespace, bootstrap: str, prefix: str, label: str, group: str
) -> dict[str, Any]:
    """The benchmarked policy: every topic of the run by pattern, no cooldown."""
    return {
        "groupId": group,
        "kafka": {"bootstrapServers": bootstrap},
        "topicPattern": f"{prefix}-t[0-9]+",
        "members": {"selector": {"matchLabels": {"app": label}}},
        "strategy": args.strategy,
        "rebalance": {"cooldown": "0s"},
        "apply": {"mode": args.mode},
    }


def _profile_poll(rows: int, ctx: Any, pods: Any, memory: Any, ports: Any, settings: Any) -> None:
    """One more poll under cProfile: the `rows` functions with the most time of their own."""
    import cProfile
    import pstats

    from kafka_rebalance_operator import reconcile

    profiler = cProfile.Profile()
    profiler.runcall(reconcile.poll, ctx, pods, memory, ports, settings)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(rows)


def _tracemalloc_poll(
    rows: int,
    namespace: str,
    name: str,
    uid: str,
    spec: dict[str, Any],
    status: dict[str, Any],
    pods: list[Any],
    memory: Any,
    ports: Any,
) -> None:
    """With tracemalloc on since before the first poll: what the polls keep (held before one
    more steady poll) and what that poll adds, by source line (Python allocations and numpy's
    buffers; not the C libraries' own)."""
    import tracemalloc

    from kafka_rebalance_operator import reconcile
    from kafka_rebalance_operator.settings import OperatorSettings

    kept = tracemalloc.take_snapshot()
    tracemalloc.reset_peak()
    ctx = reconcile.PolicyContext(namespace, name, uid, 1, spec, status)
    reconcile.poll(ctx, pods, memory, ports, OperatorSettings(max_partitions_per_policy=0))
    _current, peak = tracemalloc.get_traced_memory()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    print(f"\n## tracemalloc: one steady poll; traced peak {peak / 2**20:,.1f} MiB")
    print(f"held before the poll (memory kept between polls), top {rows} lines:")
    for stat in kept.statistics("lineno")[:rows]:
        print(f"  {stat.size / 2**20:8.1f} MiB {stat.count:>9,}  {stat.traceback}")
    print(f"grown by the poll, top {rows} lines:")
    for stat in after.compare_to(kept, "lineno")[:rows]:
        print(f"  {stat.size_diff / 2**20:+8.1f} MiB {stat.count_diff:>+9,}  {stat.traceback}")


def _timed_ports(real: Any, clocks: Clocks) -> Any:
    """The real ports, each call timed into `clocks` under the port's name."""
    return replace(
        real,
        configmaps=TimedPort(real.configmaps, "configmaps", clocks),
        status=TimedPort(real.status, "status", clocks),
        metrics=TimedPort(real.metrics, "metrics", clocks),
        telemetry=TimedPort(real.telemetry, "telemetry", clocks),
        kafka=_timed_factory(real.kafka, clocks),
    )


def fleet(
    args: argparse.Namespace,
    bootstrap: str,
    api: Any,
    names: list[str],
    namespace: str,
    label: str,
    prefix: str,
) -> None:
    """(b): `--fleet` policies on one cluster and one (empty) Secret, each over its share of
    the topics and one slot of 5 pods, polled as the operator's timers poll them: a tick every
    second, a poll when `PolicyMemory.poll_due` says so, at most `--workers` at a time."""
    import concurrent.futures
    import threading

    from kafka_rebalance_operator import reconcile
    from kafka_rebalance_operator.memory import PolicyMemory
    from kafka_rebalance_operator.settings import OperatorSettings

    per = len(names) // args.fleet
    run = uuid.uuid4().hex[:4]
    groups = [f"{prefix}-fleet{run}-{i}" for i in range(args.fleet)]
    _commit_lagging(args, bootstrap, names, groups)
    policies = _fleet_policies(args, bootstrap, api, names, namespace, label, groups, run)
    real, telemetry_file = _real_ports(api)
    real, made = _counting_kafka_clients(real)
    # an --interval below the operator's default --min-poll-interval (5s) is polled too, not
    # Stalled: down to the CRD's 1s floor
    settings = OperatorSettings(min_poll_interval_s=1.0)
    memories = [PolicyMemory() for _ in policies]
    statuses: list[dict[str, Any]] = [{} for _ in policies]
    polled: list[list[float]] = [[] for _ in policies]
    durations: list[float] = []
    running: set[int] = set()
    lock = threading.Lock()

    def poll_one(i: int) -> None:
        name, uid, spec, pods = policies[i]
        began = time.perf_counter()
        ctx = reconcile.PolicyContext(namespace, name, uid, 1, spec, statuses[i])
        outcome = reconcile.poll(ctx, pods, memories[i], real, settings)
        if outcome.status:
            real.status.patch(namespace, name, outcome.status)
        statuses[i] = {
            **statuses[i],
            **{k: v for k, v in outcome.status.items() if v is not None},
        }
        with lock:
            durations.append(time.perf_counter() - began)
            running.discard(i)

    print(f"load average before the fleet runs: {load_average()}")
    pool = concurrent.futures.ThreadPoolExecutor(args.workers)
    wall, cpu, sockets, backlog = _tick(
        args,
        [
            (uid, memory)
            for (_name, uid, _spec, _pods), memory in zip(policies, memories, strict=True)
        ],
        polled,
        (running, lock),
        lambda i: pool.submit(poll_one, i),
    )
    pool.shutdown(wait=True)
    clients = len(made)
    for memory in memories:
        memory.close()
    print(f"load average at end: {load_average()}")
    print()
    _fleet_report(
        args,
        per,
        (wall, cpu),
        FleetFigures(durations, polled, sockets, backlog),
        clients,
        count_lines(telemetry_file),
    )


def _tick(
    args: argparse.Namespace,
    timers: list[tuple[str, Any]],
    polled: list[list[float]],
    running_lock: tuple[set[int], Any],
    submit: Callable[[int], Any],
) -> tuple[float, float, list[int], list[int]]:
    """The operator's timers for --duration seconds: a tick every second submits each policy
    (uid, PolicyMemory) whose poll is due and not running. Returns wall and CPU seconds, and the
    open sockets and running polls at each tick."""
    running, lock = running_lock
    begin, cpu_begin = time.monotonic(), time.process_time()
    sockets, backlog = [], []
    while time.monotonic() - begin < args.duration:
        now = time.monotonic()
        for i, (uid, memory) in enumerate(timers):
            with lock:
                if i in running:
                    continue
            if memory.poll_due(now, 1, args.interval, uid):
                polled[i].append(now)
                with lock:
                    running.add(i)
                submit(i)
        with lock:
            backlog.append(len(running))
        sockets.append(open_sockets())
        time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
    return time.monotonic() - begin, time.process_time() - cpu_begin, sockets, backlog


def _fleet_policies(
    args: argparse.Namespace,
    bootstrap: str,
    api: Any,
    names: list[str],
    namespace: str,
    label: str,
    groups: list[str],
    run: str,
) -> list[tuple[str, str, dict[str, Any], Any]]:
    """One policy per group over its share of the topics and its slot of pods: (name, uid,
    spec, pod index) each."""
    per = len(names) // args.fleet
    policies = []
    for i, group in enumerate(groups):
        spec = {
            "groupId": group,
            "kafka": {"bootstrapServers": bootstrap},
            "topics": names[i * per : (i + 1) * per],
            "members": {"selector": {"matchLabels": {"app": label, "slot": str(i)}}},
            "strategy": args.strategy,
            "rebalance": {"cooldown": "0s", "pollInterval": f"{int(args.interval)}s"},
            "apply": {"mode": args.mode},
        }
        name = f"fleet{run}-{i:03d}"
        uid = _create_policy(api, namespace, name, spec)
        policies.append((name, uid, spec, pod_index(api, namespace, label, slot=i)))
    return policies


@dataclass
class FleetFigures:
    """What a fleet run records: each poll's duration, each policy's poll times, and the open
    sockets and running polls at each tick."""

    durations: list[float]
    polled: list[list[float]]
    sockets: list[int]
    backlog: list[int]


def _commit_lagging(
    args: argparse.Namespace, bootstrap: str, names: list[str], groups: list[str]
) -> None:
    """Each group commits behind the log end on its share of the topics: every partition
    lags."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    per = len(names) // args.fleet
    started = time.perf_counter()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=300_000)
    try:
        for i, group in enumerate(groups):
            offsets = {
                TopicPartition(t, p): OffsetAndMetadata(p % 2, "", -1)
                for t in names[i * per : (i + 1) * per]
                for p in range(args.partitions)
            }
            commit_group_offsets(admin, group, offsets, 120)
    finally:
        admin.close()
    print(f"{args.fleet} groups committed in {time.perf_counter() - started:.1f} s")


def _fleet_report(
    args: argparse.Namespace,
    per: int,
    run_time: tuple[float, float],
    figures: FleetFigures,
    clients: Any,
    telemetry_rows: int,
) -> None:
    """The fleet table: poll durations, poll intervals (late ones), CPU, clients, sockets."""
    wall, cpu = run_time
    durations, polled = figures.durations, figures.polled
    sockets, backlog = figures.sockets, figures.backlog
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    every = [b - a for times in polled for a, b in itertools.pairwise(times)]
    gaps = [b - a for times in polled for a, b in itertools.pairwise(times[1:])]
    late = [g for g in every if g > args.interval * 1.1]
    print(
        f"## fleet: {args.fleet} policies x {per * args.partitions} partitions, "
        f"{FLEET_MEMBERS} members each, pollInterval {args.interval:.0f} s, "
        f"{wall:.0f} s run, reads {args.reads}"
    )
    rows = [
        ["polls", f"{len(durations):,}"],
        [
            "poll + status write, wall s (median / p95 / max)",
            f"{statistics.median(durations):.2f} / "
            f"{sorted(durations)[int(len(durations) * 0.95)]:.2f} / {max(durations):.2f}",
        ],
        [
            "interval between a policy's polls, s (median / max), after the spreading one",
            f"{statistics.median(gaps):.1f} / {max(gaps):.1f}" if gaps else "-",
        ],
        [f"intervals over {args.interval * 1.1:.0f} s (10 % late)", f"{len(late)} of {len(every)}"],
        ["operator CPU, % of one core (average)", f"{100 * cpu / wall:.1f}"],
        ["Kafka clients made", str(clients)],
        ["open sockets (median / max)", f"{statistics.median(sockets):.0f} / {max(sockets)}"],
        ["polls running at a tick (max)", str(max(backlog))],
        ["peak RSS, MiB", f"{peak:,.0f}"],
        ["telemetry rows", f"{telemetry_rows:,}"],
    ]
    print(table(["", "figure"], rows))


def _timed_factory(factory: Callable[..., Any], clocks: Clocks) -> Callable[..., Any]:
    def connect(*args: Any, **kwargs: Any) -> Any:
        return TimedPort(clocks.timed("kafka.connect", factory)(*args, **kwargs), "kafka", clocks)

    return connect


def report_table(
    clocks: Clocks, total: int, args: argparse.Namespace, peak_mib: float, series: int | None
) -> None:
    first, steady = clocks.polls[0], clocks.polls[1:]
    steady_cpu = clocks.cpus[1:]
    labels = ["poll", *PHASES, "status write"]
    labels += sorted({k for p in clocks.polls for k in p} - set(labels))
    rows = []
    for label in labels:
        values = [p.get(label, 0.0) for p in steady]
        cpu = [p.get(label, 0.0) for p in steady_cpu]
        rows.append(
            [
                label,
                f"{first.get(label, 0.0) * 1000:,.0f}",
                f"{statistics.median(values) * 1000:,.0f}" if values else "-",
                f"{max(values) * 1000:,.0f}" if values else "-",
                f"{statistics.median(cpu) * 1000:,.0f}" if cpu else "-",
                f"{clocks.peaks[0].get(label, 0.0):,.0f}",
                f"{max(p.get(label, 0.0) for p in clocks.peaks[1:]):,.0f}" if steady else "-",
                str(clocks.counts[-1].get(label, 0)),
            ]
        )
    print()
    print(f"## {total:,} partitions, {args.members} members: wall ms per poll")
    print(
        table(
            [
                "phase / port call",
                "first poll (epoch 1)",
                "steady median",
                "steady max",
                "steady CPU ms (median)",
                "peak RSS MiB, first",
                "peak RSS MiB, steady (max)",
                "calls (last poll)",
            ],
            rows,
        )
    )
    whole = [p.get("poll", 0.0) + p.get("status write", 0.0) for p in steady]
    if whole:
        verdict = "met" if statistics.median(whole) < 3.0 else "NOT met"
        print(
            f"steady poll + status write, median {statistics.median(whole):.2f} s: "
            f"3 s target {verdict}"
        )
    print(f"peak RSS of this process (the operator's poll code, no kopf): {peak_mib:,.0f} MiB")
    print(f"open sockets after each poll: {clocks.sockets}")
    if series is not None:
        print(f"samples in the operator's Prometheus registry: {series:,}")


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds `environment`, which stops what it started


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    main()
