"""The injection webhook's time budget and conflict retries (pure parts; the webhook itself
runs against the real API server in tests/integration/test_webhook_fail_open.py)."""

from __future__ import annotations

import pytest
from kafka_rebalance_operator.webhook import document_access
from kafka_rebalance_operator.webhook.injection import SidecarDefaults
from kafka_rebalance_operator.webhook.server import WebhookConfig
from kubernetes.client.rest import ApiException


def _config(timeout_s: float) -> WebhookConfig:
    return WebhookConfig(
        port=9443, configuration="kro", sidecar=SidecarDefaults(image="x"), timeout_s=timeout_s
    )


@pytest.mark.parametrize("timeout_s", [1, 2, 4, 10, 30])
def test_the_webhook_answers_before_its_own_timeout(timeout_s: float) -> None:
    config = _config(timeout_s)
    assert config.deadline_s < timeout_s
    assert config.request_timeout_s * 3 <= config.deadline_s


def test_conflicts_are_retried_with_jittered_waits_other_errors_raised_at_once() -> None:
    calls: list[int] = []

    def conflicting_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ApiException(status=409)
        return "done"

    assert document_access._retry_conflicts(conflicting_twice) == "done"
    assert len(calls) == 3

    def forbidden() -> str:
        calls.append(1)
        raise ApiException(status=403)

    calls.clear()
    with pytest.raises(ApiException) as raised:
        document_access._retry_conflicts(forbidden)
    assert raised.value.status == 403 and len(calls) == 1

    def always_conflicting() -> str:
        calls.append(1)
        raise ApiException(status=409)

    calls.clear()
    with pytest.raises(ApiException) as raised:
        document_access._retry_conflicts(always_conflicting, attempts=4, wait_max_s=0.01)
    assert raised.value.status == 409 and len(calls) == 4


def test_a_role_with_no_documents_has_no_rule_rather_than_an_empty_name_list() -> None:
    """An empty `resourceNames` would grant every ConfigMap of the namespace."""
    assert document_access._rules([]) == []
    (rule,) = document_access._rules(["b", "a", "a"])
    assert rule["resourceNames"] == ["a", "b"]


def test_role_names_fit_an_object_name_for_any_legal_policy_name() -> None:
    longest = "orders-" + "x" * 246
    assert len(document_access.role_name(longest)) <= 253
    assert document_access.role_name(longest) != document_access.role_name(longest[:-1] + "y")
    assert document_access.role_name("orders") == "kafka-rebalance-documents.orders"
