"""Consumer pods on the real kubelet node: an application container and the sidecar container,
both from the project's image, the way examples/consumer-statefulset.yaml wires them.

- The `app` container runs examples/ledger-app/app.py (mounted from a ConfigMap) on the image's
  Python: it takes the sidecar's batches over HTTP on 127.0.0.1 and appends each record to the
  ledger before it answers, so the ledger proves at-least-once end to end. The image itself
  carries no demo or test code.
- The `sidecar` container reads `/etc/kafka-rebalance/$(POD_NAME)/assignment.json` from a
  projected volume of optional per-pod ConfigMaps the kubelet refreshes; its `/readyz` is the
  readiness probe, `/healthz` the liveness probe.

`PodFleet` runs such a StatefulSet for the demo (`demo --kubelet`) behind the same small surface
as the process fleet (fleet.py), so the demo's phases do not care which kind runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_rebalance_operator import names

from kafka_rebalance_dev.demo.cluster import ROOT, Cluster, wait_for

LEDGER_APP = ROOT / "examples" / "ledger-app" / "app.py"
LEDGER_APP_CONFIGMAP = "ledger-app"
APP_PORT = 8000
HEALTH_PORT = 8081


@dataclass(frozen=True)
class ConsumerPods:
    """What every pod of the consumer StatefulSet shares."""

    name: str  # the StatefulSet, its pods' `app` label and their name prefix
    image: str
    bootstrap: str  # the brokers as pods reach them
    group: str
    topic: str
    policy: str
    node: str  # the real node's name (pods are pinned to it; KWOK's nodes run nothing)
    apply_mode: str = "group"
    session_timeout_ms: int = 45000
    max_poll_records: int = 50
    max_replicas: int = 4  # one optional ConfigMap per ordinal below this is projected
    slow_members: tuple[str, ...] = ()
    slow_ms: int = 0  # per record, in the app, on `slow_members`


@dataclass(frozen=True)
class RealNode:
    """Where consumer pods run for real: `dev up --kubelet` plus `dev image`."""

    image: str
    bootstrap: str  # KAFKA_POD_BOOTSTRAP_SERVERS
    node: str
    pod_logs: Path  # the kubelet's podLogsDir


def ledger_app_configmap() -> dict[str, Any]:
    """The application's code as a ConfigMap (mounted at /app in the `app` container)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": LEDGER_APP_CONFIGMAP},
        "data": {"app.py": LEDGER_APP.read_text()},
    }


RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def consumer_statefulset(
    pods: ConsumerPods, replicas: int, ledger: dict[str, Any]
) -> dict[str, Any]:
    """The StatefulSet; `ledger` is the volume source the app writes the ledger to (a claim
    under the Restricted standard, a hostPath where the namespace allows it)."""
    app, sidecar, sources = _app_container(pods), _sidecar_container(pods), _assignments(pods)
    labels = {"app": pods.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": pods.name, "labels": labels},
        "spec": {
            "serviceName": pods.name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # Above the sidecar's last batch and commit; the app answers for 5 s after
                    # SIGTERM so that batch lands.
                    "terminationGracePeriodSeconds": 30,
                    "nodeSelector": {"kubernetes.io/hostname": pods.node},
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 10001,
                        "runAsGroup": 10001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [app, sidecar],
                    "volumes": [
                        {"name": "assignment", "projected": {"sources": sources}},
                        {"name": "app", "configMap": {"name": LEDGER_APP_CONFIGMAP}},
                        {"name": "ledger", **ledger},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def _assignments(pods: ConsumerPods) -> list[dict[str, Any]]:
    """The projected volume's sources: every pod's ConfigMap (optional: the operator writes it
    later), each under the pod's name, so a pod reads its own through $(POD_NAME)."""
    return [
        {
            "configMap": {
                "name": names.configmap_name(pods.policy, f"{pods.name}-{i}"),
                "optional": True,
                "items": [{"key": "assignment.json", "path": f"{pods.name}-{i}/assignment.json"}],
            }
        }
        for i in range(pods.max_replicas)
    ]


def _app_container(pods: ConsumerPods) -> dict[str, Any]:
    """examples/ledger-app/app.py on the image: takes records over HTTP, writes the ledger."""
    return {
        "name": "app",
        "image": pods.image,
        "imagePullPolicy": "Never",
        "command": ["python", "/app/app.py"],
        "env": [
            {"name": "LEDGER_DIR", "value": "/ledger"},
            {"name": "PORT", "value": str(APP_PORT)},
            {"name": "SLOW_MS", "value": str(pods.slow_ms)},
            {"name": "SLOW_MEMBERS", "value": ",".join(pods.slow_members)},
        ],
        "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}},
        "securityContext": RESTRICTED_CONTAINER,
        "volumeMounts": [
            {"name": "app", "mountPath": "/app", "readOnly": True},
            {"name": "ledger", "mountPath": "/ledger"},
        ],
    }


def _sidecar_container(pods: ConsumerPods) -> dict[str, Any]:
    """`kafka-rebalance sidecar` following the pod's mounted ConfigMap, delivering to the app."""
    probe = {"periodSeconds": 2, "failureThreshold": 3}
    return {
        "name": "sidecar",
        "image": pods.image,
        "imagePullPolicy": "Never",
        "command": ["kafka-rebalance", "sidecar"],
        "args": [
            "--assignment=/etc/kafka-rebalance/$(POD_NAME)/assignment.json",
            f"--bootstrap-servers={pods.bootstrap}",
            f"--group={pods.group}",
            f"--topics={pods.topic}",
            f"--apply-mode={pods.apply_mode}",
            f"--deliver-to=http://127.0.0.1:{APP_PORT}/records",
            f"--health-port={HEALTH_PORT}",
            "--bind=0.0.0.0",  # the kubelet probes the pod's address
            "--metrics-port=0",
            f"--session-timeout-ms={pods.session_timeout_ms}",
            "--auto-offset-reset=earliest",
            f"--max-poll-records={pods.max_poll_records}",
        ],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "readinessProbe": {**probe, "httpGet": {"path": "/readyz", "port": HEALTH_PORT}},
        "livenessProbe": {
            **probe,
            "httpGet": {"path": "/healthz", "port": HEALTH_PORT},
            "initialDelaySeconds": 20,
        },
        "resources": {"requests": {"cpu": "50m", "memory": "96Mi"}},
        "securityContext": RESTRICTED_CONTAINER,
        "volumeMounts": [
            {"name": "assignment", "mountPath": "/etc/kafka-rebalance", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def newest_container_log(pod_logs: Path, namespace: str, pod: str, container: str) -> str:
    """The container's log as the kubelet wrote it under its podLogsDir (the newest pod of that
    name: a deleted pod's directory stays behind)."""
    found = sorted(
        pod_logs.glob(f"{namespace}_{pod}_*/{container}/*.log"), key=lambda p: p.stat().st_mtime
    )
    return found[-1].read_text(errors="replace") if found else ""


class PodFleet:
    """The sidecars as the real pods of one StatefulSet (`demo --kubelet`).

    Members are pods; stopping one scales the StatefulSet below it, so only the highest ordinal
    can be stopped (the demo's slow member is the last pod). The ledger is a hostPath directory
    the host reads, which the demo's namespace (no Pod Security enforcement) allows."""

    def __init__(self, cluster: Cluster, pods: ConsumerPods, ledger_dir: Path, pod_logs: Path):
        self.cluster, self.pods = cluster, pods
        self.ledger_dir, self.pod_logs = ledger_dir, pod_logs
        self.replicas = 0
        ledger_dir.mkdir(parents=True, exist_ok=True)
        ledger_dir.chmod(0o777)  # written by uid 10001 in the pods

    def start_all(
        self, members: list[str], slow: Mapping[str, int] | None = None, timeout: float = 180
    ) -> None:
        """Create the ConfigMap of the app's code and the StatefulSet (`slow`: member -> ms of
        stand-in work per record in its app); wait until every pod is Ready (its sidecar
        answered /readyz)."""
        slow = {m: ms for m, ms in (slow or {}).items() if ms > 0}
        if slow:
            self.pods = dataclasses.replace(
                self.pods, slow_members=tuple(sorted(slow)), slow_ms=max(slow.values())
            )
        expected = [f"{self.pods.name}-{i}" for i in range(len(members))]
        if members != expected:
            raise ValueError(f"pods are named by ordinal: expected {expected}, got {members}")
        self.cluster.core.create_namespaced_config_map(
            self.cluster.namespace, ledger_app_configmap()
        )
        ledger = {"hostPath": {"path": str(self.ledger_dir), "type": "Directory"}}
        body = consumer_statefulset(self.pods, len(members), ledger)
        self.cluster.apps.create_namespaced_stateful_set(self.cluster.namespace, body)
        self.replicas = len(members)
        self.cluster.wait_pods(self.pods.name, members, timeout=timeout)

    def members(self) -> list[str]:
        return self.cluster.ready_pods(self.pods.name)

    def exited(self) -> dict[str, int]:
        """Pods whose app or sidecar container ended or restarted (a crash to report), with
        the last exit code the kubelet recorded."""
        crashed: dict[str, int] = {}
        listed = self.cluster.core.list_namespaced_pod(
            self.cluster.namespace, label_selector=f"app={self.pods.name}"
        ).items
        for pod in listed:
            for status in pod.status.container_statuses or []:
                ended = status.last_state.terminated or status.state.terminated
                if status.restart_count or status.state.terminated:
                    crashed[pod.metadata.name] = int(ended.exit_code if ended else -1)
        return crashed

    def stop(self, member: str, *, grace: float = 60) -> None:
        """SIGTERM to the member's containers by scaling the StatefulSet below it."""
        if member != f"{self.pods.name}-{self.replicas - 1}":
            raise ValueError(f"only the highest ordinal can be stopped, not {member}")
        self.replicas -= 1
        self.cluster.scale(self.pods.name, self.replicas)
        wait_for(f"pod {member} gone", lambda: member not in self._pods(), grace)

    def stop_all(self, grace: float = 60) -> None:
        self.replicas = 0
        self.cluster.scale(self.pods.name, 0)
        wait_for("the consumer pods gone", lambda: not self._pods(), grace)

    def log_tail(self, member: str, lines: int = 20) -> str:
        text = newest_container_log(self.pod_logs, self.cluster.namespace, member, "sidecar")
        return "\n".join(text.splitlines()[-lines:])

    def _pods(self) -> list[str]:
        listed = self.cluster.core.list_namespaced_pod(
            self.cluster.namespace, label_selector=f"app={self.pods.name}"
        ).items
        return [p.metadata.name for p in listed]
