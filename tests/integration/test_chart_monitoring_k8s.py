"""The chart's monitoring and availability objects pass the real API server's dry-run.

PodDisruptionBudget, NetworkPolicy and the dashboard ConfigMap are validated against the API
server's built-in schemas. PrometheusRule and PodMonitor need the Prometheus Operator's CRDs,
which this API server does not have and nothing here can download: they are validated against
tests/integration/crds/prometheus-operator-subset.yaml, a hand-written subset of those CRDs'
documented schema covering the fields the chart sets (so this proves the chart writes no field
outside that subset, not full conformance with the upstream CRDs).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.ship.test_chart_monitoring import ALL_ON

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kafka-rebalance-operator"
SUBSET_CRDS = Path(__file__).resolve().parent / "crds" / "prometheus-operator-subset.yaml"


def test_enabled_objects_pass_server_side_dry_run(k8s: Any) -> None:
    k8s.kubectl("apply", "--server-side", "-f", str(SUBSET_CRDS))
    for name in ("prometheusrules", "podmonitors"):
        k8s.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            f"crd/{name}.monitoring.coreos.com",
        )
    k8s.kubectl("create", "namespace", "mon-dry", check=False)
    args = [str(k8s.tools.helm), "template", "kro", str(CHART), "--namespace", "mon-dry"]
    for value in ALL_ON:
        args += ["--set", value]
    rendered = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(rendered) if d)
    for kind in ("PrometheusRule", "PodMonitor", "PodDisruptionBudget", "NetworkPolicy"):
        assert kind in kinds
    result = subprocess.run(
        [
            str(k8s.tools.kubectl),
            f"--kubeconfig={k8s.kubeconfig}",
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
        ],
        input=rendered,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(kinds)

    # the subset is strict: a field outside it is refused, so the check above can fail
    broken = rendered.replace("podMetricsEndpoints:", "podMetricEndpoints:")
    refused = subprocess.run(
        [
            str(k8s.tools.kubectl),
            f"--kubeconfig={k8s.kubeconfig}",
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
        ],
        input=broken,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "podMetricEndpoints" in refused.stderr
