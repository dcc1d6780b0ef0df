"""Kafka in KRaft mode from the provisioned jars: one node, or a small quorum of three.

Each node runs combined (`process.roles=broker,controller`) with a static
`controller.quorum.voters` list, which both 3.9 and 4.x accept and which needs no bootstrap
dance: format each node's storage with a shared cluster id, then start `kafka.Kafka`. Settings
are tuned for a 2-core laptop or CI runner: few threads, small heap and dedupe buffer, no initial
rebalance delay, fewer offsets-topic partitions (the first consumer group creates that topic).

Besides PLAINTEXT (the inter-broker, readiness and everyday listener) each node serves
SASL_PLAINTEXT, SSL and SASL_SSL listeners on ports of their own (`kafka_secured` has the
details and the fixed dev credentials), so secured clients are tested against a real broker.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafka_rebalance_dev.devenv import kafka_protocol, kafka_secured, port_retry
from kafka_rebalance_dev.devenv.kafka_secured import ClusterTls
from kafka_rebalance_dev.devenv.ports import LOOPBACK, free_ports, is_listening
from kafka_rebalance_dev.devenv.supervisor import StartupError, Supervisor
from kafka_rebalance_dev.devenv.toolchain import (
    KAFKA_MAIN_CLASS,
    KAFKA_STORAGE_TOOL_CLASS,
    Toolchain,
)

logger = logging.getLogger(__name__)

FORMAT_TIMEOUT = 120.0


@dataclass(frozen=True)
class KafkaNode:
    """One KRaft node's identity, ports and files."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    sasl_port: int
    ssl_port: int
    sasl_ssl_port: int
    # With a real node: the host's address on the pod bridge and a PLAINTEXT listener there.
    pod_host: str | None = None
    pod_port: int | None = None

    @property
    def secured_ports(self) -> dict[str, int]:
        """Listener name (= security protocol) -> port, for the secured listeners."""
        return {
            "SASL_PLAINTEXT": self.sasl_port,
            "SSL": self.ssl_port,
            "SASL_SSL": self.sasl_ssl_port,
        }

    @property
    def config(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log(self) -> Path:
        return self.directory / "broker.log"


@dataclass
class KafkaCluster:
    """A started (or about to be started) cluster: `name` prefixes its process names."""

    name: str
    version: str
    nodes: list[KafkaNode]
    cluster_id: str
    tls: ClusterTls
    process_names: list[str] = field(default_factory=list)
    plugins: tuple[Path, ...] = ()  # jars the brokers load beside Kafka's own (broker plug-ins)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{LOOPBACK}:{n.port}" for n in self.nodes)

    def secured_bootstrap_servers(self, listener: str) -> str:
        """Bootstrap string of one secured listener: SASL_PLAINTEXT, SSL or SASL_SSL."""
        return ",".join(f"{LOOPBACK}:{n.secured_ports[listener]}" for n in self.nodes)

    @property
    def pod_bootstrap_servers(self) -> str | None:
        """The bootstrap string as pods on the real node see it (None without one)."""
        if not all(n.pod_host for n in self.nodes):
            return None
        return ",".join(f"{n.pod_host}:{n.pod_port}" for n in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str:
        return self.secured_bootstrap_servers("SASL_PLAINTEXT")

    @property
    def ssl_bootstrap_servers(self) -> str:
        return self.secured_bootstrap_servers("SSL")

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        return self.secured_bootstrap_servers("SASL_SSL")


def new_cluster_id() -> str:
    """A Kafka Uuid in its base64url form (22 chars), never starting with '-' (CLI-safe)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise StartupError("kafka", "no `java` on PATH and JAVA_HOME unset (Java 17+ needed)")
    return found


def broker_properties(
    node: KafkaNode,
    voters: str,
    cluster_size: int,
    tls: ClusterTls,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """server.properties for one combined broker+controller node."""
    replicas = str(min(3, cluster_size))
    min_isr = str(min(2, cluster_size))
    secured = node.secured_ports
    listeners = [
        f"PLAINTEXT://{LOOPBACK}:{node.port}",
        f"CONTROLLER://{LOOPBACK}:{node.controller_port}",
        *kafka_secured.listener_addresses(LOOPBACK, secured),
    ]
    advertised = [f"PLAINTEXT://{LOOPBACK}:{node.port}"]
    advertised += kafka_secured.listener_addresses(LOOPBACK, secured)
    protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
    protocols += kafka_secured.protocol_map_entries(secured)
    if node.pod_host:  # pods get metadata naming the address they can reach
        listeners.append(f"POD://{node.pod_host}:{node.pod_port}")
        advertised.append(f"POD://{node.pod_host}:{node.pod_port}")
        protocols.append("POD:PLAINTEXT")
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(protocols),
        "log.dirs": str(node.data_dir),
        "num.partitions": "1",
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "num.replica.fetchers": "1",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        "auto.create.topics.enable": "true",
    }
    props.update(kafka_secured.listener_properties(secured, tls))
    own = f"{LOOPBACK}:{node.port}"  # `{self}` in an override: this node's PLAINTEXT address
    props.update({k: v.replace("{self}", own) for k, v in (overrides or {}).items()})
    return props


# The lowest heartbeat interval a group may set on the plug-in brokers (Kafka's minimum: 5 s).
MIN_GROUP_HEARTBEAT_MS = 1000


def plan_plugin_overrides(topic: str = "kafka-rebalance-plans") -> dict[str, str]:
    """Broker configs that load the plan-following assignors (broker-plugin/, on the classpath
    through `start_cluster(plugins=...)`), reading plans from `topic` on the broker's own listener
    (docs/kip848.md): the KIP-848 one as the brokers' default server-side assignor, and the
    streams task assignor under both its names (KIP-1357: a comma-separated list of class names
    or built-in names, the first the default for streams groups; a group picks one with its
    `streams.assignor.name` config, and the operator switches between the two plan-following
    names to trigger a streams group's recompute), and the share assignor (KIP-932: exactly one
    for the whole cluster, `group.share.assignors`; groups without a plan get `simple`'s
    assignment from it, docs/share-groups.md). A KIP-848 or streams group may set its own
    heartbeat interval (`consumer.heartbeat.interval.ms` / `streams.heartbeat.interval.ms`)
    down to 1 s rather than Kafka's 5 s minimum, so it can follow a plan within seconds
    (docs/kip848.md, "How fast a plan is followed"); the default interval stays Kafka's 5 s.
    The minimums are static broker configs, read at start."""
    return {
        "group.consumer.assignors": "dev.kafkarebalance.broker.PlanFollowingAssignor,uniform,range",
        "group.streams.assignors": (
            "dev.kafkarebalance.broker.PlanFollowingTaskAssignor,"
            "dev.kafkarebalance.broker.PlanFollowingTaskAssignorAlternate,sticky"
        ),
        "group.share.assignors": "dev.kafkarebalance.broker.PlanFollowingShareAssignor",
        "kafka.rebalance.plans.bootstrap.servers": "{self}",
        "kafka.rebalance.plans.topic": topic,
        "group.consumer.min.heartbeat.interval.ms": str(MIN_GROUP_HEARTBEAT_MS),
        "group.streams.min.heartbeat.interval.ms": str(MIN_GROUP_HEARTBEAT_MS),
    }


def jvm_options(heap: str) -> list[str]:
    """Small heap, serial GC and C1 only: fast start and little CPU on a 2-core machine."""
    return [
        f"-Xmx{heap}",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
    ]


def prepare(
    name: str,
    directory: Path,
    *,
    version: str,
    nodes: int = 1,
    overrides: Mapping[str, str] | None = None,
    pod_host: str | None = None,
) -> KafkaCluster:
    """Allocate ports and write fresh configs (wiping old data) for a cluster of `nodes`."""
    if directory.exists():
        shutil.rmtree(directory)
    per_node = 5  # PLAINTEXT, CONTROLLER, SASL_PLAINTEXT, SSL, SASL_SSL
    ports = free_ports(per_node * nodes)
    pod_ports = free_ports(nodes) if pod_host else [None] * nodes
    members = [
        KafkaNode(
            i + 1,
            ports[per_node * i],
            ports[per_node * i + 1],
            directory / f"node-{i + 1}",
            sasl_port=ports[per_node * i + 2],
            ssl_port=ports[per_node * i + 3],
            sasl_ssl_port=ports[per_node * i + 4],
            pod_host=pod_host,
            pod_port=pod_ports[i],
        )
        for i in range(nodes)
    ]
    tls = kafka_secured.issue_tls(directory / "tls")
    voters = ",".join(f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in members)
    for node in members:
        node.data_dir.mkdir(parents=True)
        props = broker_properties(node, voters, nodes, tls, overrides)
        node.config.write_text(
            "".join(f"{k}={kafka_secured.escape_property(v)}\n" for k, v in props.items())
        )
    return KafkaCluster(
        name=name, version=version, nodes=members, cluster_id=new_cluster_id(), tls=tls
    )


def broker_classpath(cluster: KafkaCluster, tools: Toolchain) -> str:
    """Kafka's own jars, then the cluster's plug-ins."""
    return ":".join([tools.kafka_classpath(cluster.version), *map(str, cluster.plugins)])


def format_storage(cluster: KafkaCluster, tools: Toolchain) -> None:
    """Run StorageTool format on every node (in parallel: each is a JVM start). It validates
    the broker config, so it loads the cluster's plug-ins too."""
    classpath = broker_classpath(cluster, tools)
    java = java_binary()
    running = []
    for node in cluster.nodes:
        argv = [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            *tools.kafka_jvm_flags(cluster.version, tool=True),
            "-cp",
            classpath,
            KAFKA_STORAGE_TOOL_CLASS,
            "format",
            "-t",
            cluster.cluster_id,
            "-c",
            str(node.config),
            *kafka_secured.scram_format_args(),
        ]
        log = node.directory / "format.log"
        with log.open("wb") as out:
            running.append(
                (node, log, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))
            )
    for node, log, popen in running:
        try:
            code = popen.wait(timeout=FORMAT_TIMEOUT)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
            code = None
        if code != 0:
            raise StartupError(
                f"{cluster.name}-{node.node_id}",
                f"storage format failed (exit {code})",
                str(log),
            )


def process_name(cluster: KafkaCluster, node: KafkaNode) -> str:
    return f"{cluster.name}-{node.node_id}" if len(cluster.nodes) > 1 else cluster.name


def launch_node(
    cluster: KafkaCluster, node: KafkaNode, tools: Toolchain, supervisor: Supervisor, heap: str
) -> str:
    """Start (or restart, keeping its data) one node's broker; returns its process name."""
    name = process_name(cluster, node)
    argv = [
        java_binary(),
        *jvm_options(heap),
        *tools.kafka_jvm_flags(cluster.version),
        "-cp",
        broker_classpath(cluster, tools),
        KAFKA_MAIN_CLASS,
        str(node.config),
    ]
    supervisor.start(
        name,
        argv,
        node.log,
        ports={
            "kafka": node.port,
            "controller": node.controller_port,
            "kafka-sasl": node.sasl_port,
            "kafka-ssl": node.ssl_port,
            "kafka-sasl-ssl": node.sasl_ssl_port,
        },
        cwd=node.directory,
    )
    return name


def launch(cluster: KafkaCluster, tools: Toolchain, supervisor: Supervisor, heap: str) -> None:
    """Start every node's broker process under the supervisor."""
    for node in cluster.nodes:
        cluster.process_names.append(launch_node(cluster, node, tools, supervisor, heap))


def is_ready(cluster: KafkaCluster) -> bool:
    """Every node answers ApiVersions, lists all nodes as live brokers, and accepts connections
    on its secured listeners (the broker opens them together with PLAINTEXT; checked so a
    listener that failed alone cannot pass as ready)."""
    expected = {n.node_id for n in cluster.nodes}
    for node in cluster.nodes:
        kafka_protocol.api_versions(LOOPBACK, node.port)
        seen = {b.node_id for b in kafka_protocol.brokers(LOOPBACK, node.port)}
        if seen != expected:
            return False
        if not all(is_listening(port) for port in node.secured_ports.values()):
            return False
    return True


def wait_ready(cluster: KafkaCluster, supervisor: Supervisor, timeout: float) -> float:
    first, *others = cluster.process_names
    return supervisor.wait_until(
        first,
        lambda: is_ready(cluster),
        timeout=timeout,
        what="serving the Kafka protocol with all brokers registered",
        interval=0.5,
        watch=others,
    )


def start_cluster(
    name: str,
    directory: Path,
    tools: Toolchain,
    supervisor: Supervisor,
    *,
    version: str | None = None,
    nodes: int = 1,
    heap: str = "512m",
    overrides: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    wait: bool = True,
    pod_host: str | None = None,
    plugins: tuple[Path, ...] = (),
) -> KafkaCluster:
    """Prepare, format, launch and (by default) wait for a KRaft cluster (`plugins`: jars put
    on the brokers' classpath, configured through `overrides`).

    Waiting, a cluster whose broker lost a port between its choice and the bind is started
    again on fresh ports and fresh data (`port_retry`)."""

    def start_once() -> KafkaCluster:
        cluster = prepare(
            name,
            directory,
            version=version or tools.kafka_version,
            nodes=nodes,
            overrides=overrides,
            pod_host=pod_host,
        )
        cluster.plugins = tuple(plugins)
        format_storage(cluster, tools)
        launch(cluster, tools, supervisor, heap)
        if wait:
            wait_ready(cluster, supervisor, timeout)
        return cluster

    if not wait:
        return start_once()
    return port_retry.start_with_fresh_ports(start_once, supervisor, log=logger.warning)
