"""Policies outside the watched namespaces, found by a cluster-wide list on a real API server;
an identity that may not list across namespaces (the chart's namespaced RBAC) stays silent."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "consumergrouppolicies.yaml"
POLICIES = "consumergrouppolicies.kafka-rebalance.io"


def _policy(k8s: Any, namespace: str, name: str) -> None:
    from kubernetes import client

    body = {
        "apiVersion": "kafka-rebalance.io/v1alpha1",
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": name},
        "spec": {
            "groupId": f"group-{name}",
            "kafka": {"bootstrapServers": "kafka:9092"},
            "topics": ["orders"],
            "members": {"selector": {"matchLabels": {"app": name}}},
        },
    }
    api = k8s.api_client()
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "kafka-rebalance.io", "v1alpha1", namespace, "consumergrouppolicies", body
        )
    finally:
        api.close()


@pytest.fixture(scope="module")
def namespaces(k8s: Any) -> tuple[str, str]:
    """A watched and an unwatched namespace, one policy in each."""
    k8s.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    k8s.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{POLICIES}")
    suffix = uuid.uuid4().hex[:6]
    watched, other = f"scope-watched-{suffix}", f"scope-app-{suffix}"
    for namespace in (watched, other):
        k8s.kubectl("create", "namespace", namespace)
    _policy(k8s, watched, "seen")
    _policy(k8s, other, "ignored")
    return watched, other


def test_a_policy_outside_the_watched_namespaces_is_logged_once_with_its_fix(
    k8s: Any, namespaces: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    from kafka_rebalance_operator import metrics
    from kafka_rebalance_operator.kube.namespace_scope import report_at_start

    watched, other = namespaces
    api = k8s.api_client()
    try:
        with caplog.at_level(logging.INFO, logger="kafka_rebalance_operator.kube.namespace_scope"):
            outside = report_at_start(api, [watched])
    finally:
        api.close()
    # other tests' policies live in the same API server: look at this test's two namespaces
    mine = [(p.namespace, p.name) for p in outside if p.namespace in (watched, other)]
    assert mine == [(other, "ignored")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    ignored = [w for w in warnings if f"{other}/ignored" in w]
    assert len(ignored) == 1 and f"Add '{other}' to the chart's watchNamespaces" in ignored[0]
    assert not [w for w in warnings if f"{watched}/seen" in w]
    assert metrics.UNWATCHED_POLICIES._value.get() == len(outside) >= 1


def test_without_a_cluster_wide_list_permission_nothing_is_logged(
    k8s: Any, namespaces: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The chart's RBAC: policies may be listed in the watched namespace only."""
    import math

    from kafka_rebalance_operator import metrics
    from kafka_rebalance_operator.kube.namespace_scope import list_policies, report_at_start
    from kubernetes import config

    watched, _ = namespaces
    rules = [
        {
            "apiGroups": ["kafka-rebalance.io"],
            "resources": ["consumergrouppolicies"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    kubeconfig = k8s.restricted_kubeconfig(watched, rules, name="operator")
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        assert list_policies(api) is None
        with caplog.at_level(logging.INFO, logger="kafka_rebalance_operator.kube.namespace_scope"):
            assert report_at_start(api, [watched]) == []
    finally:
        api.close()
    assert [r.getMessage() for r in caplog.records] == [
        f"watching ConsumerGroupPolicies in {watched}"
    ]
    assert math.isnan(metrics.UNWATCHED_POLICIES._value.get())


def test_an_unreachable_api_server_is_one_line_and_no_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kafka_rebalance_operator.kube.namespace_scope import list_policies
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = "https://127.0.0.1:9"  # nothing listens on the discard port
    configuration.retries = 0
    api = client.ApiClient(configuration)
    try:
        with caplog.at_level(logging.INFO, logger="kafka_rebalance_operator.kube.namespace_scope"):
            assert list_policies(api) is None
    finally:
        api.close()
    (record,) = caplog.records
    assert record.getMessage().startswith("could not list policies across namespaces: ")
    assert "\n" not in record.getMessage()
