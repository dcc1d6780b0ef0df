"""The `dev` environment as a whole: one Kafka broker plus the Kubernetes control plane.

Everything lives in one state directory (default `.dev/`): certificates, data, logs, the admin
kubeconfig and `state.json`, the record of started process groups that `status` and `down` read.
`up` starts Kafka's JVM first so it boots while the control plane comes up, then waits for both.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from kafka_rebalance_dev.devenv import (
    control_plane,
    kafka_broker,
    kafka_protocol,
    kafka_secured,
    mounts,
    node,
    pod_network,
    processes,
)
from kafka_rebalance_dev.devenv.ports import LOOPBACK, is_listening
from kafka_rebalance_dev.devenv.processes import StateFile
from kafka_rebalance_dev.devenv.supervisor import StartupError, Supervisor
from kafka_rebalance_dev.devenv.toolchain import Toolchain, toolchain

STATE_DIR_ENV = "KAFKA_REBALANCE_DEV_DIR"
DEFAULT_STATE_DIR = ".dev"
ALL_PARTS = ("kafka", "kubernetes")
# `--print-env` variables for the broker's secured listeners (after KAFKA_BOOTSTRAP_SERVERS):
# (variable, state.json key). KAFKA_SASL_PASSWORD is also what the sidecar reads its password
# from; the dev credentials are fixed and published (kafka_secured), not secrets.
SECURED_ENV = (
    ("KAFKA_SASL_BOOTSTRAP_SERVERS", "kafka_sasl_bootstrap_servers"),
    ("KAFKA_SSL_BOOTSTRAP_SERVERS", "kafka_ssl_bootstrap_servers"),
    ("KAFKA_SASL_SSL_BOOTSTRAP_SERVERS", "kafka_sasl_ssl_bootstrap_servers"),
    ("KAFKA_SASL_USERNAME", "kafka_sasl_username"),
    ("KAFKA_SASL_PASSWORD", "kafka_sasl_password"),
    ("KAFKA_SSL_CAFILE", "kafka_ssl_cafile"),
    ("KAFKA_SSL_CERTFILE", "kafka_ssl_certfile"),
    ("KAFKA_SSL_KEYFILE", "kafka_ssl_keyfile"),
)


# `--print-env` variables of a real node (`up --kubelet`): the broker as pods reach it, and the
# chart values file that makes the Helm chart work on this node.
REAL_NODE_ENV = (
    ("KAFKA_POD_BOOTSTRAP_SERVERS", "kafka_pod_bootstrap_servers"),
    ("KRO_CHART_VALUES", "chart_values"),
)


def resolve_state_dir(explicit: str | None = None) -> Path:
    """--state-dir, else $KAFKA_REBALANCE_DEV_DIR, else ./.dev (absolute, so logs print well)."""
    chosen = explicit or os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR
    return Path(chosen).expanduser().resolve()


@dataclass
class ComponentStatus:
    name: str
    pid: int
    ports: dict[str, int]
    running: bool
    healthy: bool
    log: str


class AlreadyUp(RuntimeError):
    """`up` found a complete environment running in this state directory."""


class PartiallyUp(RuntimeError):
    """Some recorded processes run, some do not: `down` first, then `up` again."""


class DevEnvironment:
    def __init__(
        self, state_dir: Path, tools: Toolchain | None = None, *, die_with_parent: bool = False
    ) -> None:
        self.state_dir = state_dir
        self.state = StateFile(state_dir / "state.json")
        self._tools = tools
        # Test fixtures: servers get a parent-death signal, so a killed pytest leaves none.
        self.die_with_parent = die_with_parent

    @property
    def tools(self) -> Toolchain:
        if self._tools is None:
            self._tools = toolchain()
        return self._tools

    # ---- reading the record --------------------------------------------------------------------
    def info(self) -> dict[str, object]:
        return self.state.load()

    def running(self) -> tuple[list[processes.ProcessRecord], list[processes.ProcessRecord]]:
        """(alive, gone) among recorded processes."""
        alive, gone = [], []
        for record in self.state.records():
            (alive if processes.is_running(record) else gone).append(record)
        return alive, gone

    def env_lines(self) -> list[str]:
        info = self.info()
        lines = []
        if info.get("kubeconfig"):
            lines.append(f"export KUBECONFIG={shlex.quote(str(info['kubeconfig']))}")
        if info.get("kafka_bootstrap_servers"):
            bootstrap = shlex.quote(str(info["kafka_bootstrap_servers"]))
            lines.append(f"export KAFKA_BOOTSTRAP_SERVERS={bootstrap}")
        for variable, key in SECURED_ENV:
            if info.get(key):
                lines.append(f"export {variable}={shlex.quote(str(info[key]))}")
        for variable, key in REAL_NODE_ENV:
            if info.get(key):
                lines.append(f"export {variable}={shlex.quote(str(info[key]))}")
        return lines

    # ---- up ------------------------------------------------------------------------------------
    def up(
        self,
        *,
        parts: Iterable[str] = ALL_PARTS,
        timeout: float = 240.0,
        kafka_version: str | None = None,
        log: Callable[[str], None] = lambda message: None,
        kubelet: bool = False,
        broker_plugin: bool = False,
    ) -> float:
        """Start what `parts` names and wait until it is ready; return seconds taken.

        `broker_plugin` loads the KIP-848 plan-following assignor (broker-plugin/) into the
        broker as its default server-side assignor, for `apply.mode: broker` (docs/kip848.md).

        `kubelet` adds a real node (devenv/node.py) beside KWOK's: the pod bridge is created
        first, because the broker's pod listener and the API server's certificate name its
        address. On any failure everything started so far is stopped again and StartupError
        raised.
        """
        parts = tuple(parts)
        if kubelet and "kubernetes" not in parts:
            raise StartupError("kubelet", "a real node needs the kubernetes part")
        self._refuse_unless_down()
        self._require_toolchain(parts, kafka_version, kubelet, broker_plugin)
        if kubelet:
            node.require_packages()
        started = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        supervisor = Supervisor(
            self.state,
            extra={"state_dir": str(self.state_dir)},
            die_with_parent=self.die_with_parent,
        )
        network = None
        try:
            cluster = None
            if kubelet:
                network = self._claim_pod_network(supervisor, log)
            pod_host = network.gateway if network else None
            if "kafka" in parts:
                # Kafka's JVM boots while the control plane comes up; it is waited for last.
                cluster = self._start_kafka(supervisor, kafka_version, pod_host, broker_plugin, log)
            if "kubernetes" in parts:
                plane = self._start_kubernetes(supervisor, timeout, pod_host, log)
            if kubelet and network is not None:
                self._start_real_node(supervisor, plane, network, timeout, log)
            if cluster is not None:
                kafka_broker.wait_ready(cluster, supervisor, timeout)
                log(f"kafka: ready at {cluster.bootstrap_servers}")
        except BaseException:
            self._stop_node(supervisor.extra)
            supervisor.stop()
            if network is not None:
                node.teardown(self.state_dir / "node", network.bridge)
            raise
        return time.monotonic() - started

    def _refuse_unless_down(self) -> None:
        """AlreadyUp when every recorded process runs, PartiallyUp when only some do."""
        alive, gone = self.running()
        if alive and not gone:
            raise AlreadyUp(f"already up in {self.state_dir} ({len(alive)} processes)")
        if alive:
            raise PartiallyUp(
                f"{', '.join(r.name for r in gone)} stopped while "
                f"{', '.join(r.name for r in alive)} still run; "
                "run `kafka-rebalance dev down` first"
            )

    def _require_toolchain(
        self, parts: tuple[str, ...], kafka_version: str | None, kubelet: bool, broker_plugin: bool
    ) -> None:
        """StartupError naming every unprovisioned tool the requested parts need."""
        version = kafka_version or self.tools.kafka_version
        missing = [
            m for m in self.tools.missing() if _needed(m, parts, version, kubelet, broker_plugin)
        ]
        if missing:
            raise StartupError(
                "toolchain", f"not provisioned: {', '.join(missing)}; run scripts/bootstrap"
            )

    def _claim_pod_network(
        self, supervisor: Supervisor, log: Callable[[str], None]
    ) -> pod_network.PodNetwork:
        """The real node's pod bridge, recorded before anything uses its address."""
        network = pod_network.claim()
        supervisor.extra.update(pod_bridge=network.bridge, pod_subnet=network.subnet)
        supervisor.save()
        log(f"pod network: bridge {network.bridge}, {network.subnet}")
        return network

    def _start_kafka(
        self,
        supervisor: Supervisor,
        kafka_version: str | None,
        pod_host: str | None,
        broker_plugin: bool,
        log: Callable[[str], None],
    ) -> kafka_broker.KafkaCluster:
        """Start the broker without waiting for it; record every listener and credential."""
        log("kafka: formatting storage and starting the broker")
        cluster = kafka_broker.start_cluster(
            "kafka",
            self.state_dir / "kafka",
            self.tools,
            supervisor,
            version=kafka_version,
            wait=False,
            pod_host=pod_host,
            plugins=(self.tools.broker_plugin_jar,) if broker_plugin else (),
            overrides=kafka_broker.plan_plugin_overrides() if broker_plugin else None,
        )
        supervisor.extra["kafka_bootstrap_servers"] = cluster.bootstrap_servers
        supervisor.extra["kafka_pod_bootstrap_servers"] = cluster.pod_bootstrap_servers
        supervisor.extra["kafka_version"] = cluster.version
        supervisor.extra.update(
            kafka_sasl_bootstrap_servers=cluster.sasl_bootstrap_servers,
            kafka_ssl_bootstrap_servers=cluster.ssl_bootstrap_servers,
            kafka_sasl_ssl_bootstrap_servers=cluster.sasl_ssl_bootstrap_servers,
            kafka_sasl_username=kafka_secured.DEV_USERNAME,
            kafka_sasl_password=kafka_secured.DEV_PASSWORD,
            kafka_ssl_cafile=str(cluster.tls.ca),
            kafka_ssl_certfile=str(cluster.tls.client.cert),
            kafka_ssl_keyfile=str(cluster.tls.client.key),
        )
        supervisor.save()
        return cluster

    def _start_kubernetes(
        self,
        supervisor: Supervisor,
        timeout: float,
        pod_host: str | None,
        log: Callable[[str], None],
    ) -> control_plane.ControlPlane:
        """Start the control plane, wait until it schedules pods, record how to reach it."""
        log("kubernetes: etcd, kube-apiserver, controller-manager, scheduler, kwok")
        plane = control_plane.start(
            self.state_dir / "kubernetes",
            self.tools,
            supervisor,
            kubeconfig=self.state_dir / "kubeconfig",
            timeout=timeout,
            pod_gateway=pod_host,
        )
        supervisor.extra.update(
            kubeconfig=str(plane.kubeconfig),
            api_server=plane.server,
            api_port=plane.api_port,
            ca=str(plane.ca),
            admin_cert=str(plane.admin.cert),
            admin_key=str(plane.admin.key),
        )
        supervisor.save()
        log(f"kubernetes: ready at {plane.server}")
        return plane

    def _start_real_node(
        self,
        supervisor: Supervisor,
        plane: control_plane.ControlPlane,
        network: pod_network.PodNetwork,
        timeout: float,
        log: Callable[[str], None],
    ) -> None:
        """containerd and a kubelet beside KWOK's node, and the chart values for this node."""
        log("node: containerd, kubelet (a real node beside KWOK's)")
        real = node.start(
            self.state_dir / "node", self.tools, supervisor, plane, network, timeout=timeout
        )
        values = self.state_dir / "chart-values.yaml"
        values.write_text(
            "# Written by `kafka-rebalance dev up --kubelet`: what the chart needs on "
            "this node.\n"
            + yaml.safe_dump(node.chart_values(network.gateway, real.api_forward_port))
        )
        supervisor.extra.update(
            node=control_plane.REAL_NODE_NAME,
            containerd_socket=str(real.containerd_socket),
            pod_gateway=network.gateway,
            chart_values=str(values),
        )
        supervisor.save()
        log(f"node: {control_plane.REAL_NODE_NAME} Ready")

    def _stop_node(self, info: dict[str, object]) -> None:
        """Before the processes stop: take the real node's pods down through the kubelet."""
        socket = info.get("containerd_socket")
        if not socket:
            return
        kubeconfig = Path(str(info.get("kubeconfig", self.state_dir / "kubeconfig")))
        if kubeconfig.exists():
            node.drain(self.tools.kubectl, kubeconfig, Path(str(socket)))
        node.remove_containers(Path(str(socket)))

    # ---- status --------------------------------------------------------------------------------
    def _plane(self) -> control_plane.ControlPlane | None:
        info = self.info()
        if "api_port" not in info:
            return None
        from kafka_rebalance_dev.devenv.pki import KeyPair

        return control_plane.ControlPlane(
            directory=self.state_dir / "kubernetes",
            api_port=int(info["api_port"]),  # type: ignore[arg-type]
            ca=Path(str(info["ca"])),
            admin=KeyPair(Path(str(info["admin_cert"])), Path(str(info["admin_key"]))),
            kubeconfig=Path(str(info["kubeconfig"])),
        )

    def status(self) -> list[ComponentStatus]:
        plane = self._plane()
        info = self.info()
        out = []
        for record in self.state.records():
            running = processes.is_running(record)
            healthy = running and _healthy(record, plane, info)
            out.append(
                ComponentStatus(record.name, record.pid, record.ports, running, healthy, record.log)
            )
        return out

    # ---- down ----------------------------------------------------------------------------------
    def down(self, grace: float = 10.0) -> tuple[int, list[str], list[int]]:
        """Stop recorded groups; return (count, names killed with SIGKILL, ports still open)."""
        info = self.info()
        records = self.state.records()
        self._stop_node(info)
        killed = processes.stop_all(list(reversed(records)), grace=grace)
        if info.get("pod_bridge") or info.get("containerd_socket"):
            node.teardown(self.state_dir / "node", str(info.get("pod_bridge") or "") or None)
            mounts.unmount_under(self.state_dir)  # e.g. what an interrupted `dev image` left
        ports = [p for r in records for p in r.ports.values()]
        deadline = time.monotonic() + 5.0  # the kernel may need a moment to close sockets
        still_open = [p for p in ports if is_listening(p)]
        while still_open and time.monotonic() < deadline:
            time.sleep(0.1)
            still_open = [p for p in still_open if is_listening(p)]
        self.state.remove()
        return len(records), killed, still_open


def _needed(
    missing: str, parts: tuple[str, ...], kafka_version: str, kubelet: bool, plugin: bool = False
) -> bool:
    """Whether a missing toolchain component matters for the requested parts of `up`."""
    tool = missing.split(" ", 1)[0]
    if tool == "broker-plugin":
        return plugin and "kafka" in parts
    if tool in ("kubelet", "pause"):
        return kubelet
    if tool == "kafka":
        return "kafka" in parts and missing == f"kafka {kafka_version}"
    if tool in ("kubernetes", "etcd", "kwok"):
        return "kubernetes" in parts
    return False


def _healthy(
    record: processes.ProcessRecord,
    plane: control_plane.ControlPlane | None,
    info: dict[str, object],
) -> bool:
    if "kafka" in record.ports:
        try:
            kafka_protocol.api_versions(LOOPBACK, record.ports["kafka"])
            return bool(kafka_protocol.brokers(LOOPBACK, record.ports["kafka"]))
        except (OSError, kafka_protocol.KafkaProtocolError):
            return False
    if record.name in node.COMPONENTS:
        return node.health(record.name, record.ports, info)
    return control_plane.health(record.name, record.ports, plane)
