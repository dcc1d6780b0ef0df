"""Every API call of a poll fails as StoreError: a refusal with its HTTP status, an unreachable
server as such (the real outage is tests/integration/test_pod_audit.py, where the operator is
cut off from the API server mid-run and must keep polling)."""

from __future__ import annotations

import pytest
import urllib3
from kafka_rebalance_operator.adapters import api_errors
from kafka_rebalance_operator.kube import kube_io
from kafka_rebalance_operator.ports import StoreError


def test_a_refusal_keeps_its_status_and_the_servers_message() -> None:
    refused = kube_io.ApiException(status=422, reason="Unprocessable Entity")
    refused.body = '{"message": "status: denied by policy require-approval"}'
    with pytest.raises(StoreError) as caught, api_errors():
        raise refused
    assert caught.value.status == 422
    assert str(caught.value) == "HTTP 422 status: denied by policy require-approval"


def test_an_unreachable_server_is_a_store_error_saying_so() -> None:
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", 6443)
    down = urllib3.exceptions.MaxRetryError(pool, "/api/v1/pods", reason=ConnectionRefusedError())
    with pytest.raises(StoreError) as caught, api_errors():
        raise down
    assert caught.value.status is None
    assert str(caught.value).startswith("API server unreachable: MaxRetryError")
