"""The one-line errors of `kubectl cgp` from the API server's own Status bodies."""

from __future__ import annotations

import json

from urllib3.exceptions import MaxRetryError, NewConnectionError

from kafka_rebalance import cgp_errors
from kafka_rebalance.cgp_errors import Request

FORBIDDEN_BODY = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "reason": "Forbidden",
        "code": 403,
        "message": 'consumergrouppolicies.kafka-rebalance.io is forbidden: User "system:'
        'serviceaccount:team:ci" cannot list resource "consumergrouppolicies" in API group '
        '"kafka-rebalance.io" in the namespace "team"',
    }
)


def test_forbidden_names_who_verb_resource_and_namespace() -> None:
    line = cgp_errors.api_error(403, "Forbidden", FORBIDDEN_BODY, Request("list", "team"))
    assert line.startswith(
        "forbidden: system:serviceaccount:team:ci may not list "
        "consumergrouppolicies.kafka-rebalance.io in namespace team ("
    )
    assert "\n" not in line
    everywhere = cgp_errors.api_error(403, "Forbidden", None, Request("watch", None))
    assert (
        everywhere.startswith("forbidden: you may not watch ") and "in any namespace" in everywhere
    )


def test_not_found_tells_a_missing_policy_from_a_missing_crd() -> None:
    assert (
        cgp_errors.api_error(404, "Not Found", "{}", Request("get", "team", "orders"))
        == "policy team/orders not found"
    )
    assert "is the CRD installed?" in cgp_errors.api_error(
        404, "Not Found", "not json", Request("list", "team")
    )


def test_other_statuses_keep_the_servers_message_on_one_line() -> None:
    body = json.dumps({"message": "admission webhook\nsaid no"})
    assert (
        cgp_errors.api_error(422, "Unprocessable", body, Request("patch", "t", "o"))
        == "HTTP 422: admission webhook said no"
    )
    assert cgp_errors.api_error(500, "Internal", b"", Request("get", "t", "o")) == (
        "HTTP 500: Internal"
    )


def test_unreachable_is_the_server_and_the_plain_cause() -> None:
    refused = NewConnectionError(
        object(), "Failed to establish a new connection: [Errno 111] Connection refused"
    )
    error = MaxRetryError(None, "/apis/kafka-rebalance.io/v1alpha1/namespaces/t/x", refused)
    assert cgp_errors.unreachable("https://127.0.0.1:1", error) == (
        "cannot reach the API server at https://127.0.0.1:1: connection refused "
        "(is the cluster up?)"
    )
    odd = cgp_errors.unreachable("https://h:6443", OSError("something\nelse"))
    assert (
        odd == "cannot reach the API server at https://h:6443: something else (is the cluster up?)"
    )
