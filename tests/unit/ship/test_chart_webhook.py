"""The chart's injection webhook as `helm template` renders it (the webhook itself runs against a
real API server in tests/integration/test_injection_webhook.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.ship.test_chart_static import _helm, _of_kind, _render
from tests.unit.ship.test_chart_static import helm as _helm_fixture

helm = _helm_fixture  # the provisioned helm (a pytest fixture)

CHART = Path(__file__).resolve().parents[3] / "charts" / "kafka-rebalance-operator"


def _operator_args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = _of_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_off_by_default(helm: Path) -> None:
    docs = _render(helm)
    assert not _of_kind(docs, "MutatingWebhookConfiguration")
    assert not [a for a in _operator_args(docs) if a.startswith("--webhook")]


def test_one_value_enables_it_failing_open_in_the_watched_namespaces_only(helm: Path) -> None:
    docs = _render(helm, "webhook.enabled=true", "watchNamespaces={orders,payments}")
    (config,) = _of_kind(docs, "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["rules"][0]["resources"] == ["pods"]
    assert hook["rules"][0]["operations"] == ["CREATE"]
    (expression,) = hook["namespaceSelector"]["matchExpressions"]
    assert expression["operator"] == "In" and expression["values"] == ["orders", "payments"]
    assert hook["objectSelector"]["matchExpressions"][0]["values"] == ["kro"]
    assert hook["clientConfig"]["service"]["name"] == "kro-kafka-rebalance-operator-webhook"
    args = _operator_args(docs)
    assert args[args.index("--webhook-port") + 1] == "9443"
    assert args[args.index("--webhook-configuration") + 1] == config["metadata"]["name"]
    resources = json.loads(args[args.index("--sidecar-resources") + 1])
    assert resources["requests"]["cpu"] == "100m"
    for role in _of_kind(docs, "Role"):
        if role["metadata"]["name"].endswith("-webhook-certificate"):
            continue
        assert any("roles" in rule["resources"] for rule in role["rules"]), role["metadata"]
    (cluster_role,) = [
        r for r in _of_kind(docs, "ClusterRole") if r["metadata"]["name"].endswith("-webhook")
    ]
    (rule,) = cluster_role["rules"]
    assert rule["resourceNames"] == [config["metadata"]["name"]]


def test_fail_closed_by_a_value(helm: Path) -> None:
    docs = _render(helm, "webhook.enabled=true", "webhook.failurePolicy=Fail")
    (config,) = _of_kind(docs, "MutatingWebhookConfiguration")
    assert config["webhooks"][0]["failurePolicy"] == "Fail"


def test_cert_manager_issues_the_certificate_and_injects_the_ca(helm: Path) -> None:
    docs = _render(helm, "webhook.enabled=true", "webhook.certManager.enabled=true")
    (config,) = _of_kind(docs, "MutatingWebhookConfiguration")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "ops/kro-kafka-rebalance-operator-webhook"
    )
    (certificate,) = _of_kind(docs, "Certificate")
    assert certificate["spec"]["secretName"] == "kro-kafka-rebalance-operator-webhook-tls"
    args = _operator_args(docs)
    assert "--webhook-cert-dir" in args and "--webhook-cert-secret" not in args
    assert not [s for s in _of_kind(docs, "Secret") if s["metadata"]["name"].endswith("-signed")]


def test_every_replica_serves_the_webhook_with_one_certificate_from_a_secret(helm: Path) -> None:
    docs = _render(helm, "webhook.enabled=true", "replicaCount=3", "leaderElection.enabled=true")
    (deployment,) = _of_kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    (service,) = [
        s for s in _of_kind(docs, "Service") if s["metadata"]["name"].endswith("-webhook")
    ]
    # the Service selects every replica (no per-pod or leader label)
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert set(service["spec"]["selector"]) == {
        "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
    }
    # one Secret, rendered empty, that the first replica fills and every replica serves
    (secret,) = [s for s in _of_kind(docs, "Secret") if s["metadata"]["name"].endswith("-signed")]
    assert secret["metadata"]["name"] == "kro-kafka-rebalance-operator-webhook-self-signed"
    assert secret["metadata"]["namespace"] == "ops"
    assert not secret.get("data") and not secret.get("stringData")
    args = _operator_args(docs)
    assert args[args.index("--webhook-cert-secret") + 1] == (
        "ops/kro-kafka-rebalance-operator-webhook-self-signed"
    )
    assert "--webhook-cert-dir" not in args
    # read and written by the operator, that Secret only
    (role,) = [
        r for r in _of_kind(docs, "Role") if r["metadata"]["name"].endswith("-webhook-certificate")
    ]
    (rule,) = role["rules"]
    assert rule["resources"] == ["secrets"]
    assert rule["resourceNames"] == [secret["metadata"]["name"]]
    assert sorted(rule["verbs"]) == ["get", "update"]
    (binding,) = [
        b
        for b in _of_kind(docs, "RoleBinding")
        if b["metadata"]["name"].endswith("-webhook-certificate")
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert (
        binding["subjects"][0]["name"]
        == deployment["spec"]["template"]["spec"]["serviceAccountName"]
    )


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("webhook.failurePolicy=Maybe",), "failurePolicy"),
        (("replicaCount=2",), "replicaCount > 1 needs leaderElection.enabled=true"),
    ],
)
def test_unusable_values_are_refused_naming_them(
    helm: Path, sets: tuple[str, ...], message: str
) -> None:
    args = ["template", "kro", str(CHART), "--set", "webhook.enabled=true"]
    for value in sets:
        args += ["--set", value]
    result = _helm(helm, *args, check=False)
    assert result.returncode != 0 and message in result.stderr


def test_the_sidecar_delivery_values_become_its_flags_and_bad_ones_are_refused(helm: Path) -> None:
    args = _operator_args(_render(helm, "webhook.enabled=true"))
    assert "--sidecar-arg=--transient-retry-budget=60s" in args
    assert "--sidecar-arg=--max-batch-bytes=8Mi" in args
    args = _operator_args(
        _render(
            helm,
            "webhook.enabled=true",
            "webhook.sidecar.transientRetryBudget=1m30s",
            "webhook.sidecar.maxBatchBytes=512Ki",
        )
    )
    assert "--sidecar-arg=--transient-retry-budget=1m30s" in args
    assert "--sidecar-arg=--max-batch-bytes=512Ki" in args
    for bad in (
        "webhook.sidecar.transientRetryBudget=1 minute",
        "webhook.sidecar.maxBatchBytes=8MB",
    ):
        result = _helm(
            helm, "template", "kro", str(CHART), "--set", "webhook.enabled=true", "--set", bad,
            check=False,
        )  # fmt: skip
        assert result.returncode != 0 and bad.split("=")[0].split(".")[-1] in result.stderr


def test_only_annotated_pods_reach_the_webhook(helm: Path) -> None:
    from kafka_rebalance_operator.webhook.injection import ANNOTATION_POLICY

    (config,) = _of_kind(_render(helm, "webhook.enabled=true"), "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    (condition,) = hook["matchConditions"]
    assert condition["expression"] == (
        f"has(object.metadata.annotations) && '{ANNOTATION_POLICY}' in object.metadata.annotations"
    )


def test_the_failure_policy_and_timeout_reach_the_webhook(helm: Path) -> None:
    docs = _render(helm, "webhook.enabled=true", "webhook.failurePolicy=Fail")
    args = _operator_args(docs)
    assert args[args.index("--webhook-failure-policy") + 1] == "Fail"
    (config,) = _of_kind(docs, "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert args[args.index("--webhook-timeout") + 1] == str(hook["timeoutSeconds"])


def test_the_sidecar_log_level_value_becomes_a_flag_only_when_set(helm: Path) -> None:
    assert "--sidecar-log-level" not in _operator_args(_render(helm, "webhook.enabled=true"))
    args = _operator_args(_render(helm, "webhook.enabled=true", "webhook.sidecar.logLevel=debug"))
    assert args[args.index("--sidecar-log-level") + 1] == "debug"
    result = _helm(
        helm, "template", "kro", str(CHART), "--set", "webhook.enabled=true",
        "--set", "webhook.sidecar.logLevel=trace", check=False,
    )  # fmt: skip
    assert result.returncode != 0 and "logLevel" in result.stderr
