"""The assignment document against a real kube-apiserver: the version-1/version-2 switch sits
exactly at the API server's ConfigMap limit, and a member owning 500k partitions is stored as a
small version-2 ConfigMap that the operator and the sidecar read back unchanged."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from kafka_rebalance_common import wire
from kafka_rebalance_common.wire import document as wire_document
from kafka_rebalance_operator.kube.assignment_doc import (
    configmap_body,
    read_current,
    render_documents,
)
from kafka_rebalance_sidecar.document import AssignmentTracker

pytestmark = pytest.mark.integration


@pytest.fixture
def core(k8s: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(k8s.api_client())


@pytest.fixture
def namespace(k8s: Any) -> str:
    name = f"wire-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", name)
    return name


def padded_to(length: int) -> wire.AssignmentDocument:
    doc = wire.AssignmentDocument("g", "m", 1, {"orders": (0, 2)}, {}, "h", "")
    short = len(wire.encode_document(doc, version=1))
    return dataclasses.replace(doc, generated_at="x" * (length - short))


def test_version_1_is_written_exactly_as_long_as_the_api_server_takes_it(core, namespace):
    from kubernetes.client.rest import ApiException

    limit = wire_document.V1_MAX_BYTES
    largest = wire.encode_document(padded_to(limit), version=1)
    assert len(largest) == limit
    body = {"metadata": {"name": "at-limit"}, "data": {wire_document.DATA_KEY: largest}}
    core.create_namespaced_config_map(namespace, body)
    stored = core.read_namespaced_config_map("at-limit", namespace).data[wire_document.DATA_KEY]
    assert wire.decode_document(stored) == padded_to(limit)

    one_more = wire.encode_document(padded_to(limit + 1), version=1)
    body = {"metadata": {"name": "beyond"}, "data": {wire_document.DATA_KEY: one_more}}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(namespace, body)
    assert refused.value.status == 422 and "1048576" in str(refused.value.body)
    assert '"version":2' in wire.encode_document(padded_to(limit + 1))  # what the operator writes


def test_a_member_owning_500k_partitions_round_trips_through_the_api(core, namespace):
    assignment = {"orders-0": {f"topic-{i:04d}": list(range(0, 1000, 2)) for i in range(1000)}}
    documents = render_documents("orders-processor", assignment, 7, "0" * 20, "T")
    body = configmap_body("pol", "uid-1", namespace, documents["orders-0"])
    body["metadata"].pop("ownerReferences")  # no policy object in this namespace
    core.create_namespaced_config_map(namespace, body)

    stored = core.read_namespaced_config_map("pol.orders-0", namespace)
    text = stored.data[wire_document.DATA_KEY]
    assert len(text) < 200_000  # every other partition: the worst pattern for ranges
    current = read_current([{"metadata": {"name": "pol.orders-0"}, "data": stored.data}])
    assert current.by_member["orders-0"] == documents["orders-0"]
    tracker = AssignmentTracker(group="orders-processor", member="orders-0")
    assert tracker.offer(text, "configmap pol.orders-0").accepted
    assert tracker.current is not None and len(tracker.current.owned()) == 500_000
