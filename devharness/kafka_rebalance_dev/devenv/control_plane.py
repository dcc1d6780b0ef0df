"""A real Kubernetes control plane as local processes, envtest-style, plus KWOK for a node.

etcd, kube-apiserver (TLS, client certificates, RBAC), kube-controller-manager (each controller
under its own service account, as kubeadm runs it, so namespace deletion, StatefulSets and
token handling behave as in a cluster) and kube-scheduler run from the provisioned binaries.
There is no kubelet: KWOK plays one fake node and moves scheduled pods to Running, so workloads
reach Ready without containers. Everything listens on 127.0.0.1 on free ports.
"""

from __future__ import annotations

import logging
import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalance_dev.devenv import pki, port_retry
from kafka_rebalance_dev.devenv.kube_api import KubeClient, probe_https, write_kubeconfig
from kafka_rebalance_dev.devenv.ports import LOOPBACK, free_ports
from kafka_rebalance_dev.devenv.supervisor import StartupError, Supervisor
from kafka_rebalance_dev.devenv.toolchain import Toolchain

logger = logging.getLogger(__name__)

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_FIRST_IP = "10.96.0.1"
POD_CIDR = "10.244.0.0/16"
NODE_NAME = "kwok-node-0"
# The real node of `dev up --kubelet` (devenv/node.py); its client certificate is issued with the
# rest of the PKI, which exists only while the control plane starts.
REAL_NODE_NAME = "kubelet-node-0"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
ISSUER = "https://kubernetes.default.svc.cluster.local"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


@dataclass
class ControlPlane:
    """Where a started control plane lives: its API URL, admin kubeconfig and PKI."""

    directory: Path
    api_port: int
    ca: Path
    admin: pki.KeyPair
    kubeconfig: Path

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.api_port}"

    def client(self) -> KubeClient:
        return KubeClient(self.server, self.ca, self.admin.cert, self.admin.key)


def _pki(
    directory: Path, extra_ips: tuple[str, ...] = ()
) -> tuple[pki.CertificateAuthority, dict[str, pki.KeyPair]]:
    ca = pki.CertificateAuthority(directory)
    pairs = {
        "apiserver": ca.issue(
            "apiserver",
            "kube-apiserver",
            server=True,
            dns_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            ips=(LOOPBACK, SERVICE_FIRST_IP, *extra_ips),
        ),
        "admin": ca.issue(
            "admin", "kafka-rebalance-admin", organizations=("system:masters",), client=True
        ),
        "controller-manager": ca.issue(
            "controller-manager", "system:kube-controller-manager", client=True
        ),
        "scheduler": ca.issue("scheduler", "system:kube-scheduler", client=True),
        "kwok": ca.issue("kwok", "kwok-controller", organizations=("system:masters",), client=True),
        # What the API server presents to the real node's kubelet (`kubectl logs`, `exec`).
        "kubelet-client": ca.issue(
            "kubelet-client",
            "kube-apiserver-kubelet-client",
            organizations=("system:masters",),
            client=True,
        ),
        # The Node authorizer limits it to its own node and the pods bound there.
        "kubelet": ca.issue(
            "kubelet", f"system:node:{REAL_NODE_NAME}", organizations=("system:nodes",), client=True
        ),
        "service-account": pki.service_account_keys(directory),
    }
    return ca, pairs


def _node_manifest() -> dict[str, object]:
    """The fake node KWOK manages (selected by its annotation), with room for many pods."""
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def node_ready(client: KubeClient, name: str = NODE_NAME) -> bool:
    node = client.get(f"/api/v1/nodes/{name}")
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def api_ready(plane: ControlPlane) -> bool:
    return plane.client().get("/readyz") == "ok"


def _etcd_healthy(port: int) -> bool:
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/health", timeout=2) as resp:
        return json.loads(resp.read()).get("health") == "true"


@dataclass(frozen=True)
class _Ports:
    """The loopback ports of one control plane, all handed out by the kernel at once."""

    etcd: int
    etcd_peer: int
    api: int
    controller_manager: int
    scheduler: int
    kwok: int


@dataclass(frozen=True)
class _Launch:
    """What every component's start needs: where things go and what they run with."""

    directory: Path
    tools: Toolchain
    supervisor: Supervisor
    ca: pki.CertificateAuthority
    pairs: dict[str, pki.KeyPair]
    kubeconfigs: dict[str, Path]  # per component client (controller-manager, scheduler, kwok, ...)
    ports: _Ports

    @property
    def certs(self) -> Path:
        return self.directory / "pki"

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    @property
    def etcd_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.etcd}"


def start(
    directory: Path,
    tools: Toolchain,
    supervisor: Supervisor,
    *,
    kubeconfig: Path | None = None,
    timeout: float = 180.0,
    pod_gateway: str | None = None,
) -> ControlPlane:
    """Generate PKI and kubeconfigs, start every component, wait until a node is Ready.

    `pod_gateway` (with a real node) is the host's address on the pod bridge, where pods reach
    the API server through a forwarder: the serving certificate must name it too.
    """
    stages = _provisioned_stages(tools)
    directory.mkdir(parents=True, exist_ok=True)
    ca, pairs = _pki(directory / "pki", (pod_gateway,) if pod_gateway else ())

    def start_once() -> ControlPlane:
        shutil.rmtree(directory / "etcd", ignore_errors=True)  # a failed attempt's member
        return _start_on_fresh_ports(
            directory, tools, supervisor, ca, pairs, stages, kubeconfig, timeout
        )

    return port_retry.start_with_fresh_ports(start_once, supervisor, log=logger.warning)


def _start_on_fresh_ports(
    directory: Path,
    tools: Toolchain,
    supervisor: Supervisor,
    ca: pki.CertificateAuthority,
    pairs: dict[str, pki.KeyPair],
    stages: list[Path],
    kubeconfig: Path | None,
    timeout: float,
) -> ControlPlane:
    """Every component on newly chosen ports, waited for until a node takes pods."""
    ports = _Ports(*free_ports(6))
    plane = ControlPlane(
        directory=directory,
        api_port=ports.api,
        ca=ca.pair.cert,
        admin=pairs["admin"],
        kubeconfig=kubeconfig or directory / "kubeconfig",
    )
    kubeconfigs = _write_kubeconfigs(plane, ca, pairs)
    launch = _Launch(directory, tools, supervisor, ca, pairs, kubeconfigs, ports)
    _start_etcd(launch)
    _start_apiserver(launch, plane, timeout)
    _start_controller_manager(launch)
    _start_scheduler(launch)
    client = plane.client()
    client.create("/api/v1/nodes", _node_manifest())
    _start_kwok(launch, stages)
    _wait_until_schedulable(launch, client, timeout)
    return plane


def _provisioned_stages(tools: Toolchain) -> list[Path]:
    """KWOK's stage configs, after checking every binary is provisioned (else StartupError)."""
    for binary in (
        tools.etcd,
        tools.kube_apiserver,
        tools.kube_controller_manager,
        tools.kube_scheduler,
        tools.kwok,
    ):
        if not binary.exists():
            raise StartupError(
                binary.name, f"{binary} is not provisioned; run scripts/bootstrap first"
            )
    stages = tools.kwok_stage_configs
    if not stages:
        raise StartupError(
            "kwok", f"no stage configs under {tools.kwok_dir}; run scripts/bootstrap"
        )
    return stages


def _write_kubeconfigs(
    plane: ControlPlane, ca: pki.CertificateAuthority, pairs: dict[str, pki.KeyPair]
) -> dict[str, Path]:
    """The admin kubeconfig (plane.kubeconfig) and one per component client, by name."""
    write_kubeconfig(
        plane.kubeconfig,
        plane.server,
        ca.pair.cert,
        user="admin",
        cert=pairs["admin"].cert,
        key=pairs["admin"].key,
    )
    return {
        name: write_kubeconfig(
            plane.directory / f"{name}.kubeconfig",
            plane.server,
            ca.pair.cert,
            user=name,
            cert=pairs[name].cert,
            key=pairs[name].key,
        )
        for name in ("controller-manager", "scheduler", "kwok", "kubelet")
    }


def _start_etcd(launch: _Launch) -> None:
    """etcd on loopback, without fsync (a throw-away store), waited for until healthy."""
    etcd_url = launch.etcd_url
    peer_url = f"http://{LOOPBACK}:{launch.ports.etcd_peer}"
    launch.supervisor.start(
        "etcd",
        [
            str(launch.tools.etcd),
            "--name=dev",
            f"--data-dir={launch.directory / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=dev={peer_url}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=1073741824",
            "--log-level=warn",
        ],
        launch.logs / "etcd.log",
        ports={"client": launch.ports.etcd, "peer": launch.ports.etcd_peer},
    )
    launch.supervisor.wait_until(
        "etcd", lambda: _etcd_healthy(launch.ports.etcd), timeout=60, what="healthy"
    )


def _start_apiserver(launch: _Launch, plane: ControlPlane, timeout: float) -> None:
    """kube-apiserver (TLS, client certificates, Node and RBAC authorization), waited for until
    /readyz answers ok."""
    pairs, ca, sa = launch.pairs, launch.ca, launch.pairs["service-account"]
    launch.supervisor.start(
        "kube-apiserver",
        [
            str(launch.tools.kube_apiserver),
            f"--etcd-servers={launch.etcd_url}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={launch.ports.api}",
            f"--cert-dir={launch.certs}",
            f"--tls-cert-file={pairs['apiserver'].cert}",
            f"--tls-private-key-file={pairs['apiserver'].key}",
            f"--client-ca-file={ca.pair.cert}",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={sa.cert}",
            f"--service-account-signing-key-file={sa.key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            f"--kubelet-client-certificate={pairs['kubelet-client'].cert}",
            f"--kubelet-client-key={pairs['kubelet-client'].key}",
            "--kubelet-preferred-address-types=InternalIP",
            "--allow-privileged=true",
            # The only address is loopback, which the `kubernetes` Service's endpoints reject.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            "--v=1",
        ],
        launch.logs / "kube-apiserver.log",
        ports={"https": launch.ports.api},
    )
    launch.supervisor.wait_until(
        "kube-apiserver",
        lambda: api_ready(plane),
        timeout=timeout,
        what="ready (/readyz)",
        interval=0.5,
        watch=("etcd",),
    )


# Flags the controller manager and the scheduler share: serve on loopback, a single instance.
_COMMON_SERVING = (f"--bind-address={LOOPBACK}", "--leader-elect=false", "--profiling=false")


def _start_controller_manager(launch: _Launch) -> None:
    """Every default controller, each under its own service account (as kubeadm runs it)."""
    ca, sa = launch.ca, launch.pairs["service-account"]
    config = launch.kubeconfigs["controller-manager"]
    launch.supervisor.start(
        "kube-controller-manager",
        [
            str(launch.tools.kube_controller_manager),
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            f"--secure-port={launch.ports.controller_manager}",
            f"--cert-dir={launch.directory / 'controller-manager'}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={sa.key}",
            f"--root-ca-file={ca.pair.cert}",
            f"--cluster-signing-cert-file={ca.pair.cert}",
            f"--cluster-signing-key-file={ca.pair.key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--cluster-cidr={POD_CIDR}",
            "--controllers=*",
            "--v=1",
            *_COMMON_SERVING,
        ],
        launch.logs / "kube-controller-manager.log",
        ports={"https": launch.ports.controller_manager},
    )


def _start_scheduler(launch: _Launch) -> None:
    config = launch.kubeconfigs["scheduler"]
    launch.supervisor.start(
        "kube-scheduler",
        [
            str(launch.tools.kube_scheduler),
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            f"--secure-port={launch.ports.scheduler}",
            f"--cert-dir={launch.directory / 'scheduler'}",
            "--v=1",
            *_COMMON_SERVING,
        ],
        launch.logs / "kube-scheduler.log",
        ports={"https": launch.ports.scheduler},
    )


def _start_kwok(launch: _Launch, stages: list[Path]) -> None:
    """KWOK managing the fake node (which must exist first: it selects it by annotation)."""
    launch.supervisor.start(
        "kwok",
        [
            str(launch.tools.kwok),
            f"--kubeconfig={launch.kubeconfigs['kwok']}",
            *(f"--config={stage}" for stage in stages),
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            # Renew the node's Lease: without it the node-lifecycle controller marks the node
            # unreachable after its 50s grace period and sets every pod's Ready to False.
            "--node-lease-duration-seconds=40",
            f"--node-ip={LOOPBACK}",
            f"--cidr={POD_CIDR}",
            f"--server-address={LOOPBACK}:{launch.ports.kwok}",
        ],
        launch.logs / "kwok.log",
        ports={"http": launch.ports.kwok},
    )


def _wait_until_schedulable(launch: _Launch, client: KubeClient, timeout: float) -> None:
    """Controller manager and scheduler healthy, the fake node Ready and the `default`
    ServiceAccount created: from then on a pod can be created, scheduled and become Ready."""
    supervisor = launch.supervisor
    for name, port in (
        ("kube-controller-manager", launch.ports.controller_manager),
        ("kube-scheduler", launch.ports.scheduler),
    ):
        supervisor.wait_until(
            name,
            lambda port=port: probe_https(f"https://{LOOPBACK}:{port}/healthz"),
            timeout=timeout,
            what="healthy (/healthz)",
            interval=0.5,
        )
    supervisor.wait_until(
        "kwok",
        lambda: node_ready(client),
        timeout=timeout,
        what=f"reporting node {NODE_NAME} Ready",
        interval=0.5,
    )
    # The service-account controller creates `default` in every namespace; pods need it.
    supervisor.wait_until(
        "kube-controller-manager",
        lambda: bool(client.get("/api/v1/namespaces/default/serviceaccounts/default")),
        timeout=timeout,
        what="creating the default ServiceAccount",
        interval=0.5,
    )


def health(component: str, ports: dict[str, int], plane: ControlPlane | None) -> bool:
    """One component's health for `dev status` (no waiting)."""
    try:
        if component == "etcd":
            return _etcd_healthy(ports["client"])
        if component == "kube-apiserver" and plane is not None:
            return api_ready(plane)
        if component in ("kube-controller-manager", "kube-scheduler"):
            return probe_https(f"https://{LOOPBACK}:{ports['https']}/healthz")
        if component == "kwok" and plane is not None:
            return node_ready(plane.client())
    except (OSError, ValueError, ssl.SSLError, RuntimeError):
        return False
    return False
