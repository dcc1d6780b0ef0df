"""The harness's control plane is real Kubernetes: controllers, scheduling, RBAC, helm."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.manifests import pause_statefulset

pytestmark = pytest.mark.integration

CHART = Path(__file__).parent / "charts" / "tiny"


def _namespace(k8s, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", name)
    return name


def _apply(k8s, namespace: str, manifest: str) -> None:
    subprocess.run(
        [
            str(k8s.tools.kubectl),
            f"--kubeconfig={k8s.kubeconfig}",
            "-n",
            namespace,
            "apply",
            "-f",
            "-",
        ],
        input=manifest,
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _get(k8s, *args: str) -> dict:
    return json.loads(k8s.kubectl("get", "-o", "json", *args).stdout)


def test_statefulset_reaches_three_ready_pods(k8s) -> None:
    namespace = _namespace(k8s, "sts")
    _apply(k8s, namespace, pause_statefulset("web", 3))
    k8s.kubectl(
        "-n", namespace, "rollout", "status", "statefulset/web", "--timeout=120s", timeout=150
    )
    sts = _get(k8s, "-n", namespace, "statefulset", "web")
    assert sts["status"]["readyReplicas"] == 3
    pods = _get(k8s, "-n", namespace, "pods", "-l", "app=web")["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["web-0", "web-1", "web-2"]
    for pod in pods:
        assert pod["spec"]["nodeName"] == "kwok-node-0"  # placed by the real scheduler
        assert pod["status"]["phase"] == "Running"
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True"


def test_namespace_deletion_completes(k8s) -> None:
    namespace = _namespace(k8s, "gone")
    k8s.kubectl("-n", namespace, "create", "configmap", "leftover", "--from-literal=a=b")
    _apply(k8s, namespace, pause_statefulset("db", 1))
    k8s.kubectl(
        "-n", namespace, "rollout", "status", "statefulset/db", "--timeout=120s", timeout=150
    )
    # The namespace controller must empty it (pods via KWOK's deletion stage) and finalize it.
    k8s.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=120s", timeout=150)
    gone = k8s.kubectl("get", "namespace", namespace, check=False)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr


def test_helm_install_creates_the_chart_resources(k8s, tmp_path: Path) -> None:
    namespace = f"helm-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        "KUBECONFIG": str(k8s.kubeconfig),
        "HELM_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "config"),
        "HELM_DATA_HOME": str(tmp_path / "data"),
    }
    result = subprocess.run(
        [
            str(k8s.tools.helm),
            "install",
            "tiny",
            str(CHART),
            "--namespace",
            namespace,
            "--create-namespace",
            "--set",
            "greeting=from-the-test",
            "--wait",
            "--timeout=2m",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    config = _get(k8s, "-n", namespace, "configmap", "tiny-config")
    assert config["data"] == {"greeting": "from-the-test"}
    deployment = _get(k8s, "-n", namespace, "deployment", "tiny")
    assert deployment["status"]["readyReplicas"] == 1
    service = _get(k8s, "-n", namespace, "service", "tiny")
    assert service["spec"]["clusterIP"].startswith("10.96.")
    listed = subprocess.run(
        [str(k8s.tools.helm), "list", "-n", namespace, "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    releases = json.loads(listed.stdout)
    assert [(r["name"], r["status"]) for r in releases] == [("tiny", "deployed")]


def test_restricted_service_account_is_refused_outside_its_role(k8s) -> None:
    home = f"rbac-{uuid.uuid4().hex[:6]}"
    elsewhere = _namespace(k8s, "other")
    token_config = k8s.restricted_kubeconfig(
        home, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]
    )

    def can_i(*args: str) -> str:
        result = k8s.kubectl("auth", "can-i", *args, kubeconfig=token_config, check=False)
        return result.stdout.strip()

    assert can_i("list", "configmaps", "-n", home) == "yes"
    assert can_i("get", "configmaps", "-n", home) == "yes"
    assert can_i("list", "configmaps", "-n", elsewhere) == "no"
    assert can_i("create", "configmaps", "-n", home) == "no"
    assert can_i("list", "pods", "-n", home) == "no"
    assert can_i("list", "nodes") == "no"

    # Not just the review API: real requests are allowed and refused the same way.
    k8s.kubectl("-n", home, "create", "configmap", "visible", "--from-literal=k=v")
    inside = k8s.kubectl("get", "configmap", "visible", "-o", "name", kubeconfig=token_config)
    assert inside.stdout.strip() == "configmap/visible"
    outside = k8s.kubectl(
        "-n", elsewhere, "get", "configmaps", kubeconfig=token_config, check=False
    )
    assert outside.returncode != 0
    assert "forbidden" in outside.stderr.lower()
    assert f"system:serviceaccount:{home}:restricted" in outside.stderr


def test_service_account_tokens_authenticate_as_their_account(k8s) -> None:
    namespace = f"whoami-{uuid.uuid4().hex[:6]}"
    token_config = k8s.restricted_kubeconfig(namespace, [], name="who")
    deadline = time.monotonic() + 30
    while True:
        result = k8s.kubectl("auth", "whoami", "-o", "json", kubeconfig=token_config, check=False)
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert result.returncode == 0, result.stderr
    user = json.loads(result.stdout)["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{namespace}:who"
    assert f"system:serviceaccounts:{namespace}" in user["groups"]


def test_fake_node_lease_is_renewed(k8s) -> None:
    """KWOK must heartbeat like a kubelet, or the node-lifecycle controller marks the node
    unreachable after its grace period and every pod turns NotReady."""

    def renew_time() -> str:
        lease = _get(k8s, "-n", "kube-node-lease", "lease", "kwok-node-0")
        return lease["spec"]["renewTime"]

    first = renew_time()
    deadline = time.monotonic() + 40
    while renew_time() == first and time.monotonic() < deadline:
        time.sleep(1)
    assert renew_time() != first, "the node Lease was not renewed within 40s"
    node = _get(k8s, "node", "kwok-node-0")
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert not any(
        t["key"].startswith("node.kubernetes.io/") for t in node["spec"].get("taints", [])
    )
