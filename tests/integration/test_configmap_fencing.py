"""The operator's ConfigMap writes on the real API server are conditional: a replace or a delete
applies only to the resourceVersion the poll read, and a create that finds the object created
since is a conflict, not an overwrite (ports.KubeConfigMaps, kube_io)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka_rebalance_operator import assignment_doc
from kafka_rebalance_operator.assignment_doc import MemberDocument
from kafka_rebalance_operator.ports import KubeConfigMaps, WriteConflict

pytestmark = pytest.mark.integration


def body(epoch: int, version: str = "", term: int | None = None) -> dict[str, Any]:
    document = MemberDocument("g", "c-0", epoch, {"t": [0]}, "h", "", leader_term=term)
    return assignment_doc.configmap_body("pol", "uid-1", NAMESPACE, document, version)


NAMESPACE = f"fencing-{uuid.uuid4().hex[:6]}"


def test_writes_apply_only_to_the_version_read(k8s: Any) -> None:
    k8s.kubectl("create", "namespace", NAMESPACE)
    api = k8s.api_client()
    store = KubeConfigMaps(api)
    try:
        first = store.upsert(body(1))
        assert first
        (listed,) = store.list(NAMESPACE, "pol")
        assert listed["metadata"]["resourceVersion"] == first
        with pytest.raises(WriteConflict):
            store.upsert(body(1))  # created since the (empty) listing: not overwritten
        second = store.upsert(body(2, first, term=4))
        assert second != first
        with pytest.raises(WriteConflict):
            store.upsert(body(3, first))  # a writer that read version `first`: refused
        with pytest.raises(WriteConflict):
            store.delete(NAMESPACE, "pol.c-0", first)
        (kept,) = store.list(NAMESPACE, "pol")
        document = assignment_doc.parse_document(kept["data"]["assignment.json"])
        assert document is not None and (document.epoch, document.leader_term) == (2, 4)
        store.delete(NAMESPACE, "pol.c-0", second)
        assert store.list(NAMESPACE, "pol") == []
        with pytest.raises(WriteConflict):
            store.upsert(body(5, second))  # deleted since it was read
    finally:
        api.close()
        k8s.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
