"""The chart's monitoring and availability objects, rendered by the real helm (no cluster).

PrometheusRule, PodMonitor, the Grafana dashboard ConfigMap, PodDisruptionBudget and
NetworkPolicy render only when their values are set, carry what their consumers select on, and
every metric name the alert rules and the dashboard query is one the operator or the sidecar
really exports (read from their own registries). The API server's dry-run of the same objects is
in tests/integration/test_chart_monitoring_k8s.py; the rules' behaviour in
tests/unit/ship/test_prometheus_rules.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_rebalance_dev.devenv.toolchain import Toolchain, toolchain

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "kafka-rebalance-operator"
RULES = CHART / "files" / "prometheus-rules.yaml"
DASHBOARD = CHART / "files" / "grafana-dashboard.json"
ALL_ON = (
    "metrics.prometheusRule.enabled=true",
    "metrics.podMonitor.enabled=true",
    "metrics.grafanaDashboard.enabled=true",
    "podDisruptionBudget.enabled=true",
    "networkPolicy.enabled=true",
)
OPTIONAL_KINDS = {"PrometheusRule", "PodMonitor", "PodDisruptionBudget", "NetworkPolicy"}


@pytest.fixture(scope="module")
def helm() -> Path:
    tools: Toolchain = toolchain()
    if not tools.helm.is_file():
        pytest.fail(
            f"not provisioned: helm {tools.helm_version}; run `scripts/bootstrap`", pytrace=False
        )
    return tools.helm


def render(helm: Path, *sets: str) -> list[dict[str, Any]]:
    args = [str(helm), "template", "kro", str(CHART), "--namespace", "ops"]
    for value in sets:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, [d["kind"] for d in docs]
    return found[0]


def exported_metric_names() -> set[str]:
    """Every series name the operator and a sidecar expose, suffixes included."""
    from kafka_rebalance_operator import metrics
    from kafka_rebalance_sidecar.health import SidecarMetrics

    names: set[str] = set()
    for registry in (metrics.REGISTRY, SidecarMetrics("g", "m").registry):
        for family in registry.collect():
            kind, base = family.type, family.name
            names.add(base)
            if kind == "counter":
                names.add(f"{base}_total")
            if kind == "histogram":
                names.update(f"{base}_{s}" for s in ("bucket", "count", "sum"))
    return names


def queried_metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bkafka_rebalance_[a-z0-9_]+", expr))


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_nothing_optional_renders_by_default(helm: Path) -> None:
    docs = render(helm)
    assert not {d["kind"] for d in docs} & OPTIONAL_KINDS
    assert not [d for d in docs if d["metadata"]["name"].endswith("-dashboard")]


def test_every_optional_object_renders_when_enabled(helm: Path) -> None:
    docs = render(helm, *ALL_ON)
    assert {d["kind"] for d in docs} >= OPTIONAL_KINDS

    rule = one(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    # The file's rules, with the operator-target matcher narrowed to this release.
    release = (
        'namespace="ops", app_kubernetes_io_name="kafka-rebalance-operator", '
        'app_kubernetes_io_instance="kro"'
    )
    generic = 'app_kubernetes_io_name="kafka-rebalance-operator"'
    assert generic in RULES.read_text()
    expected = yaml.safe_load(RULES.read_text().replace(generic, release))["groups"]
    assert rule["spec"]["groups"] == expected

    monitor = one(docs, "PodMonitor")
    deployment = one(docs, "Deployment")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert "metrics" in ports

    dashboard = one(docs, "ConfigMap", "kro-kafka-rebalance-operator-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["kafka-rebalance.json"]) == json.loads(
        DASHBOARD.read_text()
    )

    budget = one(docs, "PodDisruptionBudget")
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": selector},
    }
    assert one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector


def test_both_monitors_copy_the_pod_labels_the_alert_rules_match(helm: Path) -> None:
    """The operator-down and absent() rules match app_kubernetes_io_name/_instance: whichever
    monitor scrapes the operator must put those pod labels on its targets."""
    docs = render(helm, "metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true")
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    for kind in ("ServiceMonitor", "PodMonitor"):
        copied = one(docs, kind)["spec"]["podTargetLabels"]
        assert copied == ["app.kubernetes.io/name", "app.kubernetes.io/instance"]
        assert set(copied) <= set(pod_labels)
    rules = one(render(helm, "metrics.prometheusRule.enabled=true"), "PrometheusRule")
    exprs = [r["expr"] for g in rules["spec"]["groups"] for r in g["rules"]]
    (down,) = [e for e in exprs if e.startswith("up{")]
    (absent,) = [e for e in exprs if e.startswith("absent(")]
    for expr in (down, absent):
        assert 'app_kubernetes_io_instance="kro"' in expr and 'namespace="ops"' in expr


def test_pdb_min_available_replaces_max_unavailable(helm: Path) -> None:
    docs = render(helm, "podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=1")
    spec = one(docs, "PodDisruptionBudget")["spec"]
    assert spec["minAvailable"] == 1 and "maxUnavailable" not in spec


def test_network_policy_admits_only_the_health_and_metrics_ports(helm: Path) -> None:
    docs = render(helm, "networkPolicy.enabled=true", "health.port=8181", "metrics.port=9191")
    policy = one(docs, "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = [p for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert ports == [{"port": 8181, "protocol": "TCP"}, {"port": 9191, "protocol": "TCP"}]
    assert all("from" not in rule for rule in policy["spec"]["ingress"])
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert sorted(p["containerPort"] for p in container["ports"]) == [8181, 9191]

    narrowed = render(
        helm,
        "networkPolicy.enabled=true",
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring",
        "metrics.enabled=false",
    )
    rules = one(narrowed, "NetworkPolicy")["spec"]["ingress"]
    assert [r["ports"][0]["port"] for r in rules] == [8080], "no metrics port when metrics are off"


def test_alert_rules_and_dashboard_query_only_exported_metrics() -> None:
    exported = exported_metric_names()
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    assert {r["alert"] for r in rules} == {
        "KafkaRebalancePolicyStalled",
        "KafkaRebalanceGroupNotConverging",
        "KafkaRebalanceLagGrowing",
        "KafkaRebalanceHandoffTimedOut",
        "KafkaRebalanceOperatorNotPolling",
        "KafkaRebalanceOperatorDown",
        "KafkaRebalanceOperatorAbsent",
        "KafkaRebalanceWebhookCertificateExpiring",
    }
    for expr in [r["expr"] for r in rules] + dashboard_queries():
        unknown = queried_metric_names(expr) - exported
        assert not unknown, f"{unknown} in {expr}"
    queried = set().union(*(queried_metric_names(e) for e in dashboard_queries()))
    assert len(queried) >= 12, queried


def test_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]


def test_enabled_objects_are_kubeconform_strict_clean(helm: Path) -> None:
    """PodDisruptionBudget, NetworkPolicy and the dashboard ConfigMap against the pinned
    Kubernetes version's strict schemas. kubeconform has no schema of the Prometheus Operator's
    kinds here (nothing is downloaded): those two are checked by the API server's dry-run
    against their CRDs in tests/integration/test_chart_monitoring_k8s.py."""
    tools = toolchain()
    missing = [m for m in tools.missing() if m.split(" ", 1)[0] in ("kubeconform", "kube-schemas")]
    if missing:
        pytest.fail(
            f"not provisioned: {', '.join(missing)}; run `scripts/bootstrap`", pytrace=False
        )
    docs = render(helm, *ALL_ON)
    checked = [d for d in docs if d["kind"] not in ("PrometheusRule", "PodMonitor")]
    result = subprocess.run(
        [
            str(tools.kubeconform),
            "-strict",
            "-summary",
            "-schema-location",
            tools.kubeconform_schema_location,
            "-",
        ],
        input=yaml.safe_dump_all(checked),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Valid: {len(checked)}, Invalid: 0, Errors: 0" in result.stdout, result.stdout


def test_log_format_reaches_the_operator_command_line(helm: Path) -> None:
    from kafka_rebalance.cli import build_parser

    container = one(render(helm, "logFormat=json"), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    args = container["args"]
    assert args[args.index("--log-format") + 1] == "json"
    assert build_parser("operator").parse_args(args).log_format == "json"
