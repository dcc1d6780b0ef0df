"""The chart's injection webhook is called for annotated pods only (its `matchConditions`), on
the real API server: the configuration rendered from the chart, pointed at a port where nothing
listens and made to fail closed, refuses an annotated pod and admits an unannotated one, which
it therefore never called. Pods are created with server-side dry run (admission runs, nothing
is stored)."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_operator.webhook.injection import ANNOTATION_POLICY

from tests.unit.ship.test_chart_static import _of_kind, _render
from tests.unit.ship.test_chart_static import helm as _helm_fixture

pytestmark = [pytest.mark.integration]

helm = _helm_fixture  # the provisioned helm (a pytest fixture)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # released: nothing listens there


def _pod(name: str, annotated: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if annotated:
        metadata["annotations"] = {ANNOTATION_POLICY: "orders"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1"}]},
    }


def test_only_annotated_pods_are_sent_to_the_webhook(k8s: Any, helm: Path) -> None:
    namespace = f"match-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", namespace)
    (config,) = _of_kind(
        _render(helm, "webhook.enabled=true", f"watchNamespaces={{{namespace}}}"),
        "MutatingWebhookConfiguration",
    )
    name = f"kro-match-{namespace}"
    config["metadata"] = {"name": name}
    (hook,) = config["webhooks"]
    assert hook["matchConditions"]  # the chart's, unchanged
    hook["failurePolicy"] = "Fail"  # so a call that is made cannot go unnoticed
    hook["timeoutSeconds"] = 2
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{_closed_port()}/inject",
        "caBundle": base64.b64encode(Path(k8s.ca).read_bytes()).decode(),
    }
    manifest = Path(k8s.directory) / f"{name}.json"
    manifest.write_text(json.dumps(config))
    k8s.kubectl("apply", "-f", str(manifest))

    def create(pod: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        path = Path(k8s.directory) / f"{namespace}-{pod['metadata']['name']}.json"
        path.write_text(json.dumps(pod))
        result: subprocess.CompletedProcess[str] = k8s.kubectl(
            "create", "--dry-run=server", "-n", namespace, "-f", str(path), check=False
        )
        return result

    try:
        refused = wait_for(
            "the annotated pod sent to the (unreachable) webhook",
            lambda: (r := create(_pod("annotated", True))).returncode != 0 and r,
            timeout=30,
        )
        assert "failed calling webhook" in refused.stderr, refused.stderr
        plain = create(_pod("plain", False))
        assert plain.returncode == 0, plain.stderr
    finally:
        k8s.kubectl("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found")
        k8s.kubectl("delete", "namespace", namespace, "--wait=false")
