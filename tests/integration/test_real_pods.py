"""The product as real pods: the image, the chart and the operator on a real kubelet node.

Everything a user meets first runs for real here: the image built from the repository's
Dockerfile (`kafka-rebalance dev image`), `helm install` of the chart with its default values
plus only what this environment needs (`KRO_CHART_VALUES`) into a namespace that enforces the
Restricted Pod Security Standard, the operator's probes, and its in-cluster login with the
chart's ServiceAccount. The node is `kafka-rebalance dev up --kubelet` (containerd, CNI bridge,
kubelet) started in a temp state dir for this module.

A machine without the system packages or the provisioned node tools FAILS these tests (CI
installs and provisions them; a silently skipped real-node suite would prove nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalance.devenv import image
from kafka_rebalance.devenv.control_plane import REAL_NODE_NAME
from kafka_rebalance.devenv.environment import ALL_PARTS, DevEnvironment
from kafka_rebalance.devenv.supervisor import StartupError
from kafka_rebalance.devenv.toolchain import Toolchain

pytestmark = [pytest.mark.integration, pytest.mark.kubelet]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kafka-rebalance-operator"
RELEASE = "kro"
DEPLOYMENT = f"{RELEASE}-kafka-rebalance-operator"


@dataclass
class RealNode:
    """A running `dev up --kubelet` environment with the project's image loaded."""

    state_dir: Path
    info: dict[str, Any]
    image_ref: str
    tools: Toolchain
    seconds_up: float
    seconds_image: float

    @property
    def kubeconfig(self) -> str:
        return str(self.info["kubeconfig"])

    @property
    def pod_bootstrap(self) -> str:
        return str(self.info["kafka_pod_bootstrap_servers"])

    @property
    def bootstrap(self) -> str:
        return str(self.info["kafka_bootstrap_servers"])

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        proc = subprocess.run(
            [str(self.tools.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
        return proc.stdout

    def helm(self, *args: str, home: Path) -> str:
        env = {
            **os.environ,
            "KUBECONFIG": self.kubeconfig,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        proc = subprocess.run(
            [str(self.tools.helm), *args], capture_output=True, text=True, env=env, timeout=400
        )
        if proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args[:2])} failed:\n{proc.stdout}{proc.stderr}")
        return proc.stdout

    def container_log(self, namespace: str, pod: str, container: str, lines: int = 40) -> str:
        """A container's log as the kubelet wrote it (the dev node has no address for
        `kubectl logs`; see docs/development.md)."""
        out = []
        for log in sorted((self.state_dir / "node" / "pod-logs").glob(
            f"{namespace}_{pod}_*/{container}/*.log"
        )):  # fmt: skip
            out.append(f"== {log.name}")
            out += log.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)


@pytest.fixture(scope="module")
def real_node(tools: Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    state_dir = tmp_path_factory.mktemp("real-node")
    env = DevEnvironment(state_dir, tools, die_with_parent=True)
    started = time.monotonic()
    try:
        env.up(parts=ALL_PARTS, kubelet=True, timeout=240)
    except StartupError as exc:
        env.down(grace=5)
        pytest.fail(f"`dev up --kubelet` failed: {exc}", pytrace=False)
    seconds_up = time.monotonic() - started
    try:
        started = time.monotonic()
        try:
            ref = image.build_and_load(state_dir, tools, log=print)
        except image.ImageError as exc:
            pytest.fail(f"`dev image` failed: {exc}", pytrace=False)
        node = RealNode(state_dir, env.info(), ref, tools, seconds_up, time.monotonic() - started)
        print(f"real node up in {seconds_up:.1f}s, image {ref} in {node.seconds_image:.1f}s")
        yield node
    finally:
        env.down(grace=5)


def wait_for(what: str, check: Any, timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


def restricted_namespace(node: RealNode, prefix: str) -> str:
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    node.kubectl("create", "namespace", namespace)
    node.kubectl(
        "label", "namespace", namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )  # fmt: skip
    return namespace


def install_chart(node: RealNode, namespace: str, home: Path) -> float:
    """`helm install --wait` with default values + KRO_CHART_VALUES + the built image."""
    repository, tag = node.image_ref.rsplit(":", 1)
    started = time.monotonic()
    node.helm(
        "install", RELEASE, str(CHART), "--namespace", namespace,
        "-f", str(node.info["chart_values"]),
        "--set", f"image.repository={repository},image.tag={tag}",
        "--wait", "--timeout", "300s",
        home=home,
    )  # fmt: skip
    return time.monotonic() - started


def operator_pod(node: RealNode, namespace: str) -> dict[str, Any]:
    selector = "app.kubernetes.io/component=operator"
    listing = node.kubectl("get", "pods", "-n", namespace, "-o", "json", "-l", selector)
    pods = json.loads(listing)["items"]
    return pods[0] if len(pods) == 1 else {}


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def policy(name: str, bootstrap: str, topic: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "kafka-rebalance.io/v1alpha1",
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": name},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": bootstrap},
            "topics": [topic],
            "members": {"selector": {"matchLabels": {"app": app}}},
            "strategy": "lag-aware",
            "rebalance": {"pollInterval": "5s"},
        },
    }


def test_chart_runs_the_operator_under_restricted_pod_security_and_it_reconciles_in_cluster(
    real_node: RealNode, tmp_path: Path
) -> None:
    node = real_node
    namespace = restricted_namespace(node, "real")
    seconds_install = install_chart(node, namespace, tmp_path / "helm")
    pod = wait_for("the operator pod Ready", lambda: is_ready(p := operator_pod(node, namespace))
                   and p, timeout=120)  # fmt: skip
    name = pod["metadata"]["name"]
    assert pod["spec"]["nodeName"] == REAL_NODE_NAME, "ran on KWOK's fake node, not a real one"
    status = pod["status"]["containerStatuses"][0]
    assert status["restartCount"] == 0, node.container_log(namespace, name, "operator")
    assert status["imageID"], "no image ran"
    # The chart's restricted securityContext reached the container unchanged.
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True

    topic = f"orders-{uuid.uuid4().hex[:6]}"
    create_topic(node.bootstrap, topic, 3)
    body = policy("orders", node.pod_bootstrap, topic, "orders")
    manifest = tmp_path / "policy.yaml"
    manifest.write_text(json.dumps(body))
    node.kubectl("apply", "-n", namespace, "-f", str(manifest))

    def reconciled() -> dict[str, Any] | None:
        got = json.loads(node.kubectl("get", "cgp", "orders", "-n", namespace, "-o", "json"))
        status = got.get("status") or {}
        return status if status.get("conditions") else None

    status = wait_for("the operator to write the policy's status", reconciled, timeout=90)
    log = node.container_log(namespace, name, "operator")
    # From inside the pod, with the chart's ServiceAccount: a status written means it listed
    # pods, read the policy and patched status/status through RBAC, and reached the broker at
    # the pod address.
    assert "LoginError" not in log and "Forbidden" not in log, log
    print(
        f"helm install --wait {seconds_install:.1f}s; status: "
        + json.dumps({c["type"]: c.get("reason") for c in status["conditions"]})
    )


# ---- consumers as real pods: the sidecar reads its mounted ConfigMap --------------------------
SIDECAR_HEALTH_PORT = 8081
SESSION_TIMEOUT_MS = 45000  # longer than a pod's restart, so a same-name pod keeps its place
MAX_REPLICAS = 4  # the projected volume lists one optional ConfigMap per ordinal up to this


def ledger_volume(namespace: str, host_dir: Path) -> list[dict[str, Any]]:
    """A PersistentVolume on the node's disk and its claim: the pods' ledger survives them.

    Restricted pods may mount a claim but no hostPath; the PV (cluster-scoped, made by the test
    as an administrator would) is what points at the host directory the test reads.
    """
    host_dir.mkdir(parents=True, exist_ok=True)
    host_dir.chmod(0o777)  # written by uid 10001 in the pods
    storage_class = f"ledger-{namespace}"
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": storage_class},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": storage_class,
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": str(host_dir), "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": "ledger"},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "ledger", "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": storage_class,
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": storage_class,
            },
        },
    ]


def consumer_statefulset(
    name: str, image_ref: str, bootstrap: str, topic: str, policy_name: str, replicas: int
) -> dict[str, Any]:
    """The examples/consumer-statefulset.yaml shape, with the ledger as the application.

    The sidecar (the built image) reads /etc/kafka-rebalance/$(POD_NAME)/assignment.json from a
    projected volume of optional per-pod ConfigMaps the kubelet refreshes, and hands each batch
    to the ledger handler, which appends it to the shared ledger volume before the commit.
    """
    secure = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    probe = {"httpGet": {"port": SIDECAR_HEALTH_PORT}, "periodSeconds": 2, "failureThreshold": 3}
    sources = [
        {
            "configMap": {
                "name": f"{policy_name}-{name}-{i}",
                "optional": True,
                "items": [{"key": "assignment.json", "path": f"{name}-{i}/assignment.json"}],
            }
        }
        for i in range(MAX_REPLICAS)
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    "nodeSelector": {"kubernetes.io/hostname": REAL_NODE_NAME},
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 10001,
                        "runAsGroup": 10001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "sidecar",
                            "image": image_ref,
                            "imagePullPolicy": "Never",
                            "command": ["kafka-rebalance", "sidecar"],
                            "args": [
                                "--assignment=/etc/kafka-rebalance/$(POD_NAME)/assignment.json",
                                f"--bootstrap-servers={bootstrap}",
                                f"--group={policy_name}",
                                f"--topics={topic}",
                                "--apply-mode=group",
                                "--handler=kafka_rebalance.demo.ledger:record",
                                f"--health-port={SIDECAR_HEALTH_PORT}",
                                "--bind=0.0.0.0",  # the kubelet probes the pod's address
                                "--metrics-port=0",
                                f"--session-timeout-ms={SESSION_TIMEOUT_MS}",
                                "--auto-offset-reset=earliest",
                                "--max-poll-records=50",
                            ],
                            "env": [
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                                {"name": "KAFKA_REBALANCE_LEDGER_DIR", "value": "/ledger"},
                            ],
                            "readinessProbe": {
                                **probe,
                                "httpGet": {"path": "/readyz", "port": SIDECAR_HEALTH_PORT},
                            },
                            "livenessProbe": {
                                **probe,
                                "httpGet": {"path": "/healthz", "port": SIDECAR_HEALTH_PORT},
                                "initialDelaySeconds": 20,
                            },
                            "resources": {"requests": {"cpu": "50m", "memory": "96Mi"}},
                            "securityContext": secure,
                            "volumeMounts": [
                                {
                                    "name": "assignment",
                                    "mountPath": "/etc/kafka-rebalance",
                                    "readOnly": True,
                                },
                                {"name": "ledger", "mountPath": "/ledger"},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "assignment", "projected": {"sources": sources}},
                        {"name": "ledger", "persistentVolumeClaim": {"claimName": "ledger"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }
