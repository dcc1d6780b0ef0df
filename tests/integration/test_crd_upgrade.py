"""Upgrading the CRD the way docs/install.md#the-crd says, on a real kube-apiserver.

Helm installs a chart's crds/ only on the first install and never upgrades them, so an upgrade
applies the chart's CRDs first with `kubectl apply --server-side --force-conflicts` (without
`--force-conflicts` the API server refuses to hand Helm's fields to kubectl). Here the old CRD
(the one before `rebalance.mode` defaulted to observe) is in place as Helm leaves it (field
manager `helm`), with policies stored under it; the documented command then applies the chart's
CRDs.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART_CRDS = ROOT / "charts" / "kafka-rebalance-operator" / "crds"
OLD_CRD = (
    Path(__file__).resolve().parent / "crds" / "consumergrouppolicies-before-observe-default.yaml"
)
NAME = "consumergrouppolicies.kafka-rebalance.io"


def _kubectl(k8s: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(k8s.tools.kubectl), f"--kubeconfig={k8s.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def _established(k8s: Any) -> None:
    _ok(_kubectl(k8s, "wait", "--for=condition=Established", "--timeout=60s", f"crd/{NAME}"))


def _mode_default(k8s: Any) -> str:
    crd = json.loads(_ok(_kubectl(k8s, "get", "crd", NAME, "-o", "json")))
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"]["rebalance"]["properties"]["mode"]["default"]


def _policy(name: str, rebalance: dict[str, Any] | None) -> str:
    spec: dict[str, Any] = {
        "groupId": f"group-{name}",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topics": ["orders"],
        "members": {"selector": {"matchLabels": {"app": name}}},
    }
    if rebalance is not None:
        spec["rebalance"] = rebalance
    return json.dumps(
        {
            "apiVersion": "kafka-rebalance.io/v1alpha1",
            "kind": "ConsumerGroupPolicy",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def _mode(k8s: Any, namespace: str, name: str) -> str:
    policy = json.loads(_ok(_kubectl(k8s, "-n", namespace, "get", "cgp", name, "-o", "json")))
    return policy["spec"]["rebalance"]["mode"]


def test_the_documented_crd_upgrade_keeps_stored_policies_and_serves_the_new_default(
    k8s: Any,
) -> None:
    # The old CRD as a first `helm install` leaves it: written by the manager `helm`.
    present = _kubectl(k8s, "get", "crd", NAME).returncode == 0
    verb = "replace" if present else "create"  # other tests of the session may have installed it
    _ok(_kubectl(k8s, verb, "--field-manager=helm", "-f", str(OLD_CRD)))
    _established(k8s)
    assert _mode_default(k8s) == "enforce"
    namespace = f"crd-upgrade-{uuid.uuid4().hex[:6]}"
    _ok(_kubectl(k8s, "create", "namespace", namespace))
    try:
        _ok(_kubectl(k8s, "-n", namespace, "create", "-f", "-", stdin=_policy("implicit", None)))
        explicit = _policy("explicit", {"mode": "propose", "approval": "Manual"})
        _ok(_kubectl(k8s, "-n", namespace, "create", "-f", "-", stdin=explicit))
        assert _mode(k8s, namespace, "implicit") == "enforce"

        # Without --force-conflicts server-side apply refuses to take fields Helm wrote.
        refused = _kubectl(k8s, "apply", "--server-side", "-f", str(CHART_CRDS))
        assert refused.returncode != 0 and 'conflict with "helm"' in refused.stderr, refused
        assert _mode_default(k8s) == "enforce"
        # docs/adopting.md#upgrading, word for word
        upgrade = _kubectl(
            k8s, "apply", "--server-side", "--force-conflicts", "-f", str(CHART_CRDS)
        )
        assert upgrade.returncode == 0, upgrade.stderr
        _established(k8s)

        assert _mode_default(k8s) == "observe"
        # a policy stored under the old default keeps the enforce the API server wrote then
        assert _mode(k8s, namespace, "implicit") == "enforce"
        assert _mode(k8s, namespace, "explicit") == "propose"
        _ok(_kubectl(k8s, "-n", namespace, "create", "-f", "-", stdin=_policy("new", None)))
        assert _mode(k8s, namespace, "new") == "observe"
        # an old policy is still valid under the new schema: a no-op update is accepted
        touched = _kubectl(
            k8s, "-n", namespace, "label", "cgp", "implicit", "upgraded=yes", "--overwrite"
        )
        assert touched.returncode == 0, touched.stderr
    finally:
        _kubectl(k8s, "delete", "namespace", namespace, "--wait=false")
        # whatever happened above, the session goes on with the chart's CRD
        _kubectl(k8s, "apply", "--server-side", "--force-conflicts", "-f", str(CHART_CRDS))
        _established(k8s)
