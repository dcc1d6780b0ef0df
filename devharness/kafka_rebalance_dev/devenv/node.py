"""A real node beside KWOK: containerd, the CNI bridge and a kubelet, all the environment's own.

`dev up --kubelet` runs the image's containers for real (probes, securityContext, mounted
ConfigMaps refreshed by the kubelet, ServiceAccount tokens) while KWOK's fake node stays for
scale. Every daemon is a separate instance with its sockets, data and logs under
`<state>/node/`; the system's containerd or Docker, if any, is never used or reconfigured.

Settings found by trial on these machines (cgroup v1, no systemd, root in a VM):
- containerd's CRI needs `restrict_oom_score_adj`, else runc fails writing oom_score_adj;
- the kubelet needs `failCgroupV1: false`, `cgroupDriver: cgroupfs`, `cgroupsPerQOS: false`,
  `enforceNodeAllocatable: []` and `failSwapOn: false`.

Pods reach the host only at the bridge's gateway address: the broker has a listener there, and
the API server is forwarded there (devenv/forward.py). The chart values the environment writes
(`KRO_CHART_VALUES`) point the operator at that address and pin pods to this node.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from kafka_rebalance_dev.devenv import control_plane, mounts, pod_network, system_packages
from kafka_rebalance_dev.devenv.control_plane import REAL_NODE_NAME, ControlPlane
from kafka_rebalance_dev.devenv.pod_network import PodNetwork
from kafka_rebalance_dev.devenv.ports import LOOPBACK, free_ports
from kafka_rebalance_dev.devenv.provision.pause import image_name as pause_image_name
from kafka_rebalance_dev.devenv.supervisor import StartupError, Supervisor
from kafka_rebalance_dev.devenv.toolchain import PAUSE_VERSION, Toolchain

NAMESPACE = "k8s.io"  # containerd's namespace for CRI (kubelet) containers and images
COMPONENTS = ("containerd", "pod-api-forward", "kubelet")


@dataclass(frozen=True)
class RealNode:
    directory: Path
    network: PodNetwork
    api_forward_port: int

    @property
    def containerd_socket(self) -> Path:
        return containerd_socket(self.directory)


def containerd_socket(directory: Path) -> Path:
    return directory / "containerd" / "containerd.sock"


def require_packages() -> None:
    """Fail in one line when containerd, runc or the CNI plugins are not installed."""
    gone = system_packages.missing(system_packages.NODE_PACKAGES)
    if gone:
        raise StartupError("kubelet", system_packages.hint(gone))
    if not system_packages.is_root():
        raise StartupError("kubelet", "a real node needs root (containerd, runc, the bridge)")


def containerd_config(directory: Path, cni_bin: Path, runc: str) -> str:
    """containerd's config: every path inside `directory`, CRI with the settings these need."""
    root = directory / "containerd"
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    return f"""\
# Written by kafka-rebalance dev up --kubelet: this environment's own containerd.
version = 2
root = "{root / "root"}"
state = "{root / "state"}"
[grpc]
  address = "{root / "containerd.sock"}"
[ttrpc]
  address = "{root / "containerd.sock.ttrpc"}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"
{cri}
  sandbox_image = "{pause_image_name(PAUSE_VERSION)}"
  # runc cannot lower its own oom_score_adj here; without this it fails every container.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
{cri[:-1]}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
{cri[:-1]}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
{cri[:-1]}.containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  Root = "{root / "runc"}"
  SystemdCgroup = false
{cri[:-1]}.cni]
  bin_dir = "{cni_bin}"
  conf_dir = "{directory / "cni" / "net.d"}"
  max_conf_num = 1
"""


def kubelet_config(
    directory: Path, address: str, port: int, healthz_port: int, client_ca: Path
) -> dict[str, object]:
    """The KubeletConfiguration: cgroup v1 settings, files in `directory`, and its API where
    the API server can reach it for `kubectl logs` and `exec`.

    A kubelet may not report a loopback node address, so its API listens on `address`, the
    host's address on the pod bridge (the node's InternalIP). Pods can reach that address, so
    the API admits only client certificates of the environment's CA (`client_ca`: the API
    server's kubelet client and the admin), never anonymous requests. Its health endpoint
    stays on loopback. Eviction thresholds are low so a busy shared disk does not evict test
    pods. Pods resync every 10 s (a kubelet's default is a minute), so a mounted ConfigMap's
    change reaches its pod within about 10 s here: the hand-overs that wait for it take seconds,
    not a minute, and the tests that follow them are shorter by as much.
    """
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": LOOPBACK,
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},  # every authenticated client is an admin
        "containerRuntimeEndpoint": f"unix://{containerd_socket(directory)}",
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(directory / "pod-logs"),
        "resolvConf": "",
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "maxPods": 40,
        "syncFrequency": "10s",
    }


def ctr(socket: Path, *args: str, timeout: float = 120, stdin: bytes | None = None) -> str:
    """Run `ctr` against the node's containerd, in the CRI namespace; return stdout."""
    proc = subprocess.run(
        [system_packages.command("ctr"), "--address", str(socket), "-n", NAMESPACE, *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"ctr {' '.join(args[:3])} failed: {proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout.decode(errors="replace")


def import_image(socket: Path, archive: Path) -> None:
    """Load an image archive (OCI or `docker save`) into the node's image store, unpacked."""
    ctr(socket, "images", "import", str(archive), timeout=600)


def node_ready(plane: ControlPlane) -> bool:
    return control_plane.node_ready(plane.client(), REAL_NODE_NAME)


def start(
    directory: Path,
    tools: Toolchain,
    supervisor: Supervisor,
    plane: ControlPlane,
    network: PodNetwork,
    *,
    timeout: float = 180.0,
) -> RealNode:
    """Start containerd, the API forwarder and the kubelet; wait until the node is Ready."""
    require_packages()
    for needed in (tools.kubelet, tools.pause_archive):
        if not needed.exists():
            raise StartupError("kubelet", f"{needed} is not provisioned; run scripts/bootstrap")
    for sub in ("containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "logs"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    _start_containerd(directory, tools, supervisor, network)
    forward_port = _start_api_forward(directory, supervisor, plane, network)
    _start_kubelet(directory, tools, supervisor, plane, network, timeout)
    return RealNode(directory, network, forward_port)


def _start_containerd(
    directory: Path, tools: Toolchain, supervisor: Supervisor, network: PodNetwork
) -> None:
    """containerd with its config and the pod network's CNI config, serving its API, with the
    pause image (the pods' sandbox) imported."""
    cni_bin = system_packages.cni_bin_dir()
    assert cni_bin is not None  # require_packages checked it
    config = directory / "containerd" / "config.toml"
    config.write_text(containerd_config(directory, cni_bin, system_packages.command("runc")))
    conflist = pod_network.cni_conflist(network, directory / "cni" / "ipam")
    (directory / "cni" / "net.d" / "10-kafka-rebalance.conflist").write_text(
        json.dumps(conflist, indent=2)
    )
    socket = containerd_socket(directory)
    supervisor.start(
        "containerd",
        [system_packages.command("containerd"), "--config", str(config)],
        directory / "logs" / "containerd.log",
    )
    supervisor.wait_until(
        "containerd",
        lambda: bool(ctr(socket, "version", timeout=10)),
        timeout=60,
        what="serving its API",
        interval=0.3,
    )
    import_image(socket, tools.pause_archive)


def _start_api_forward(
    directory: Path, supervisor: Supervisor, plane: ControlPlane, network: PodNetwork
) -> int:
    """The forwarder that lets pods reach the API server on the bridge; returns its port (the
    API server's number, on the bridge address)."""
    forward_port = plane.api_port
    supervisor.start(
        "pod-api-forward",
        [
            sys.executable,
            "-m",
            "kafka_rebalance_dev.devenv.forward",
            network.gateway,
            str(forward_port),
            LOOPBACK,
            str(plane.api_port),
        ],
        directory / "logs" / "pod-api-forward.log",
        ports={"https": forward_port},
    )
    return forward_port


def _start_kubelet(
    directory: Path,
    tools: Toolchain,
    supervisor: Supervisor,
    plane: ControlPlane,
    network: PodNetwork,
    timeout: float,
) -> None:
    """The kubelet of REAL_NODE_NAME on the bridge address, waited for until its node is Ready."""
    kubelet_port, healthz_port = free_ports(2)
    kubelet_yaml = directory / "kubelet-config.yaml"
    kubelet_yaml.write_text(
        yaml.safe_dump(
            kubelet_config(directory, network.gateway, kubelet_port, healthz_port, plane.ca),
            sort_keys=False,
        )
    )
    supervisor.start(
        "kubelet",
        [
            str(tools.kubelet),
            f"--config={kubelet_yaml}",
            f"--kubeconfig={plane.directory / 'kubelet.kubeconfig'}",
            f"--root-dir={directory / 'kubelet'}",
            f"--cert-dir={directory / 'kubelet' / 'pki'}",
            f"--hostname-override={REAL_NODE_NAME}",
            f"--node-ip={network.gateway}",
            f"--node-labels=type=kubelet,kafka-rebalance.io/dev-node={REAL_NODE_NAME}",
            "--v=1",
        ],
        directory / "logs" / "kubelet.log",
        ports={"https": kubelet_port, "healthz": healthz_port},
    )
    supervisor.wait_until(
        "kubelet",
        lambda: node_ready(plane),
        timeout=timeout,
        what=f"reporting node {REAL_NODE_NAME} Ready",
        interval=0.5,
        watch=("containerd",),
    )


def chart_values(gateway: str, api_port: int) -> dict[str, object]:
    """The Helm values this environment needs, and nothing else.

    Pods reach the API server only on the bridge (no kube-proxy serves the `kubernetes`
    Service here), so the operator is told where it is; explicit env wins over the kubelet's
    injected service variables. Pods are pinned to the real node, else the scheduler may pick
    KWOK's fake one. The securityContext stays the chart's (restricted) default.
    """
    return {
        "extraEnv": [
            {"name": "KUBERNETES_SERVICE_HOST", "value": gateway},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(api_port)},
        ],
        "nodeSelector": {"kubernetes.io/hostname": REAL_NODE_NAME},
    }


def health(name: str, ports: dict[str, int], info: dict[str, object]) -> bool:
    """One node component's health for `dev status` (no waiting)."""
    import urllib.request

    from kafka_rebalance_dev.devenv.ports import is_listening

    try:
        if name == "containerd" and info.get("containerd_socket"):
            return bool(ctr(Path(str(info["containerd_socket"])), "version", timeout=5))
        if name == "kubelet":
            url = f"http://{LOOPBACK}:{ports['healthz']}/healthz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.read().strip() == b"ok"
        if name == "pod-api-forward" and info.get("pod_gateway"):
            return is_listening(ports["https"], str(info["pod_gateway"]))
    except (OSError, RuntimeError, KeyError, subprocess.TimeoutExpired):
        return False
    return False


# ---- taking it down ----------------------------------------------------------------------------
def drain(kubectl: Path, kubeconfig: Path, socket: Path, timeout: float = 60.0) -> None:
    """Remove every pod from the node through the kubelet, so sandboxes and CNI are torn down.

    Cordon first, so controllers' replacement pods stay Pending instead of landing here again.
    """

    def run(*args: str) -> None:
        subprocess.run(
            [str(kubectl), f"--kubeconfig={kubeconfig}", "--request-timeout=10s", *args],
            capture_output=True,
            timeout=30,
            check=False,
        )

    run("cordon", REAL_NODE_NAME)
    run("delete", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={REAL_NODE_NAME}",
        "--grace-period=0", "--force", "--wait=false")  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not ctr(socket, "tasks", "ls", "-q", timeout=10).split():
                return
        except (RuntimeError, subprocess.TimeoutExpired):
            return  # containerd is gone already: teardown handles the rest
        time.sleep(0.5)


def remove_containers(socket: Path) -> None:
    """Kill and delete what is left in the node's containerd (its shims exit with them)."""
    with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
        for task in ctr(socket, "tasks", "ls", "-q", timeout=10).split():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                ctr(socket, "tasks", "kill", "-a", "-s", "SIGKILL", task, timeout=10)
        time.sleep(0.5)
        for task in ctr(socket, "tasks", "ls", "-q", timeout=10).split():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                ctr(socket, "tasks", "delete", "-f", task, timeout=10)
        for container in ctr(socket, "containers", "ls", "-q", timeout=10).split():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                ctr(socket, "containers", "rm", container, timeout=10)


def own_shims(socket: Path) -> list[int]:
    """Pids of containerd shims serving this environment's containerd (named by its socket).

    Shims detach from containerd by design (they outlive its restarts), so stopping its process
    group does not reach them; their command line names the socket, which is ours alone.
    """
    needle = f"-address\0{socket}\0".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if b"containerd-shim" in cmdline.split(b"\0", 1)[0] and needle in cmdline:
                pids.append(int(entry))
    return pids


# The kubelet links every container's log here (a fixed path); only links into our own pod log
# directory are ours to remove.
CONTAINER_LOG_LINKS = Path("/var/log/containers")


def remove_log_links(pod_logs: Path, links: Path = CONTAINER_LOG_LINKS) -> None:
    with contextlib.suppress(OSError):
        for link in links.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(f"{pod_logs}{os.sep}"):
                link.unlink(missing_ok=True)


def teardown(directory: Path, bridge: str | None) -> list[str]:
    """After the processes stopped: end leftover shims, unmount, delete the bridge.

    Returns what could not be cleaned (mount points still busy), for `dev down` to report.
    """
    for pid in own_shims(containerd_socket(directory)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    stuck = [str(p) for p in mounts.unmount_under(directory)]
    remove_log_links(directory / "pod-logs")
    if bridge:
        pod_network.release(bridge)
    return stuck
