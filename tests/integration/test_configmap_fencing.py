"""The operator's ConfigMap writes on the real API server are conditional: a replace or a delete
applies only to the resourceVersion the poll read, and a create that finds the object created
since is a conflict, not an overwrite (adapters.KubeConfigMaps, kube_io)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_common.wire import AssignmentDocument
from kafka_rebalance_dev.demo.cluster import install_crd, policy_body
from kafka_rebalance_operator.adapters import KubeConfigMaps
from kafka_rebalance_operator.kube import assignment_doc
from kafka_rebalance_operator.ports import WriteConflict

pytestmark = pytest.mark.integration


OWNER_UID: list[str] = []  # the uid of the real policy the ConfigMaps name as their owner


def body(epoch: int, version: str = "", term: int | None = None) -> dict[str, Any]:
    document = AssignmentDocument("g", "c-0", epoch, {"t": [0]}, plan_hash="h", leader_term=term)
    return assignment_doc.configmap_body("pol", OWNER_UID[0], NAMESPACE, document, version)


def _owner_policy(k8s: Any, manifest: Path) -> str:
    """A real policy `pol` to own the ConfigMaps: the garbage collector deletes a ConfigMap
    whose owner does not exist as soon as it knows the owner's kind."""
    install_crd(k8s.tools.kubectl, k8s.kubeconfig)
    policy = policy_body(
        "pol",
        group="g",
        bootstrap="127.0.0.1:9",
        topic="t",
        app="c",
        strategy="range",
        mode="observe",
    )
    policy["metadata"]["namespace"] = NAMESPACE
    manifest.write_text(json.dumps(policy))
    created = k8s.kubectl("create", "-o", "json", "-f", str(manifest))
    return str(json.loads(created.stdout)["metadata"]["uid"])


NAMESPACE = f"fencing-{uuid.uuid4().hex[:6]}"


def test_writes_apply_only_to_the_version_read(k8s: Any, tmp_path: Path) -> None:
    k8s.kubectl("create", "namespace", NAMESPACE)
    OWNER_UID[:] = [_owner_policy(k8s, tmp_path / "policy.json")]
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
