"""Sidecar injection on the real kubelet node: the chart's webhook, the built image, real pods.

The chart runs the operator in-cluster with `webhook.enabled=true`. This environment has no
kube-proxy, so the API server cannot reach the webhook's Service; the operator is pointed at its
own pod address instead (`--webhook-url-host=$(POD_IP)`, the development switch), and the
injected sidecars are told where the API server is (`webhook.sidecar.extraEnv`, as the chart's
`KRO_CHART_VALUES` tell the operator). Everything else is what a user gets: an annotated
StatefulSet of the ledger app with no sidecar in its manifest, the sidecar injected at
admission, following its own ConfigMap through the API with the per-policy Role.

Measured: how long after the operator's write a new plan reaches the running sidecars (the
issue asks for 5 s; a mounted ConfigMap takes the kubelet's 69-78 s).
"""

from __future__ import annotations

import datetime
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_rebalance_common.kafka_retry import ensure_topic
from kafka_rebalance_dev.demo.pods import ConsumerPods, consumer_statefulset, ledger_app_configmap
from kafka_rebalance_dev.devenv.control_plane import REAL_NODE_NAME

from tests.integration.test_real_pods import (
    CHART,
    RELEASE,
    RealNode,
    is_ready,
    ledger_volume,
    operator_pod,
    policy,
    real_node,  # noqa: F401 (the module's fixture)
    restricted_namespace,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.kubelet]

CONFIGURATION = f"{RELEASE}-kafka-rebalance-operator"


def _values(node: RealNode, path: Path) -> Path:
    """KRO_CHART_VALUES plus the webhook, the operator's pod address and the sidecar's API."""
    values = yaml.safe_load(Path(str(node.info["chart_values"])).read_text())
    env = {e["name"]: e["value"] for e in values.get("extraEnv", []) if "value" in e}
    values["extraEnv"] = [
        *values.get("extraEnv", []),
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    values["extraArgs"] = [*values.get("extraArgs", []), "--webhook-url-host=$(POD_IP)"]
    repository, tag = node.image_ref.rsplit(":", 1)
    values["image"] = {**values.get("image", {}), "repository": repository, "tag": tag}
    values["webhook"] = {
        "enabled": True,
        "sidecar": {
            "image": {"pullPolicy": "Never"},
            "extraEnv": {
                "KUBERNETES_SERVICE_HOST": env["KUBERNETES_SERVICE_HOST"],
                "KUBERNETES_SERVICE_PORT": env["KUBERNETES_SERVICE_PORT"],
            },
        },
    }
    path.write_text(yaml.safe_dump(values))
    return path


def _annotated(pods: ConsumerPods, replicas: int) -> dict[str, Any]:
    """The demo's consumer StatefulSet without its hand-wired sidecar and per-ordinal volume:
    the app container and one annotation."""
    statefulset = consumer_statefulset(
        pods, replicas, {"persistentVolumeClaim": {"claimName": "ledger"}}
    )
    template = statefulset["spec"]["template"]
    spec = template["spec"]
    spec["containers"] = [c for c in spec["containers"] if c["name"] == "app"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in ("assignment", "tmp")]
    template["metadata"]["annotations"] = {"kafka-rebalance.io/policy": pods.policy}
    return statefulset


def _stamp(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text[:23], "%Y-%m-%d %H:%M:%S,%f")


def _messages(node: RealNode, namespace: str, pod: str, container: str) -> list[str]:
    """The container's own lines (the CRI prefix `time stream tag` dropped)."""
    text = node.container_log(namespace, pod, container, lines=100_000)
    return [
        line.split(" ", 3)[3]
        for line in text.splitlines()
        if not line.startswith("==") and line.count(" ") >= 3
    ]


def test_injected_pods_on_the_real_node_get_new_plans_within_5_seconds(
    real_node: RealNode,  # noqa: F811
    tmp_path: Path,
) -> None:
    node = real_node
    namespace = restricted_namespace(node, "inject")
    home = tmp_path / "helm"
    node.helm(
        "install", RELEASE, str(CHART), "--namespace", namespace,
        "-f", str(_values(node, tmp_path / "values.yaml")),
        "--wait", "--timeout", "300s",
        home=home,
    )  # fmt: skip
    operator = wait_for(
        "the operator pod Ready",
        lambda: is_ready(p := operator_pod(node, namespace)) and p,
        timeout=120,
    )
    operator_name = operator["metadata"]["name"]
    wait_for(
        "the webhook configuration pointed at the operator's pod",
        lambda: (
            f"https://{operator['status']['podIP']}:9443/"
            in node.kubectl("get", "mutatingwebhookconfiguration", CONFIGURATION, "-o", "json")
        ),
        timeout=60,
    )

    topic, name = f"events-{uuid.uuid4().hex[:6]}", "events"
    ensure_topic(node.bootstrap, topic, 8)
    body = policy(name, node.pod_bootstrap, topic, name)
    body["spec"]["rebalance"]["cooldown"] = "5s"
    pods = ConsumerPods(
        name=name,
        image=node.image_ref,
        bootstrap=node.pod_bootstrap,
        group=name,
        topic=topic,
        policy=name,
        node=REAL_NODE_NAME,
    )
    manifests = [
        body,
        ledger_app_configmap(),
        *ledger_volume(namespace, node.state_dir / f"ledger-{namespace}"),
    ]
    (tmp_path / "base.json").write_text(json.dumps({"kind": "List", "apiVersion": "v1",
                                                    "items": manifests}))  # fmt: skip
    node.kubectl("apply", "-n", namespace, "-f", str(tmp_path / "base.json"))
    wait_for(
        "the policy polled",
        lambda: json.loads(node.kubectl("get", "cgp", name, "-n", namespace, "-o", "json")).get(
            "status"
        ),
        timeout=90,
    )
    (tmp_path / "sts.json").write_text(json.dumps(_annotated(pods, 3)))
    node.kubectl("apply", "-n", namespace, "-f", str(tmp_path / "sts.json"))

    def accepted(pod: str) -> list[tuple[datetime.datetime, int]]:
        marker = f"accepted assignment from configmap {namespace}/{name}.{pod}: group {name} "
        found = []
        for line in _messages(node, namespace, pod, "kafka-rebalance"):
            if marker in line:
                epoch = int(line.split(" epoch ")[1].split(",")[0])
                found.append((_stamp(line), epoch))
        return found

    members = [f"{name}-{i}" for i in range(3)]
    try:
        for member in members:
            wait_for(f"{member}'s injected sidecar on a document", lambda m=member: accepted(m),
                     timeout=240)  # fmt: skip
        listing = json.loads(node.kubectl("get", "pods", "-n", namespace, "-l", f"app={name}",
                                          "-o", "json"))["items"]  # fmt: skip
        for pod in listing:
            names = [c["name"] for c in pod["spec"]["containers"]]
            assert names == ["app", "kafka-rebalance"], names
            assert pod["spec"]["nodeName"] == REAL_NODE_NAME

        epoch = wait_for(
            "a settled epoch on all three",
            lambda: (
                len({max(e for _, e in accepted(m)) for m in members}) == 1
                and max(e for _, e in accepted(members[0]))
            ),
            timeout=120,
        )
        scaled = datetime.datetime.now()
        node.kubectl("scale", "-n", namespace, f"statefulset/{name}", "--replicas=4")
        wait_for(
            f"the three running sidecars on an epoch above {epoch}",
            lambda: all(any(e > epoch for _, e in accepted(m)) for m in members),
            timeout=240,
        )
        new_epoch = min(min(e for _, e in accepted(m) if e > epoch) for m in members)
        marker = f"{namespace}/{name} epoch {new_epoch}: "
        (written,) = [
            _stamp(line)
            for line in _messages(node, namespace, operator_name, "operator")
            if marker in line and "written" in line
        ]
        delays = {m: min(t for t, e in accepted(m) if e == new_epoch) - written for m in members}
        print(
            f"\nreal node: operator's write of epoch {new_epoch} (its log line after the last "
            "ConfigMap) -> injected sidecar accepts: "
            + ", ".join(f"{m} {d.total_seconds():+.3f}s" for m, d in sorted(delays.items()))
            + f"; kubectl scale -> operator's write {(written - scaled).total_seconds():.1f}s"
        )
        assert max(d.total_seconds() for d in delays.values()) < 5.0, delays
    finally:
        print(node.container_log(namespace, operator_name, "operator", lines=30))
