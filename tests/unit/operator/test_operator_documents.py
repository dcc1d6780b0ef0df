"""Per-pod ConfigMaps: rendering, reading back, and writing only what changed."""

from __future__ import annotations

import json

from kafka_rebalance_operator import names
from kafka_rebalance_operator.kube.assignment_doc import (
    configmap_body,
    diff,
    document_text,
    parse_document,
    read_current,
    render_documents,
)


def configmaps(policy, documents, extra=()):
    return [configmap_body(policy, "uid-1", "ns", d) for d in documents.values()] + list(extra)


def test_rendered_configmap_has_the_architecture_shape_and_owner() -> None:
    documents = render_documents("orders", {"orders-0": {"orders": [2, 0]}}, 12, "h1", "T")
    body = configmap_body("pol", "uid-1", "ns", documents["orders-0"])
    assert body["metadata"]["name"] == "pol.orders-0"
    assert body["metadata"]["labels"] == {
        "kafka-rebalance.io/policy": "pol",
        "kafka-rebalance.io/member": "orders-0",
        "app.kubernetes.io/managed-by": "kafka-rebalance-operator",
    }
    owner = body["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ConsumerGroupPolicy" and owner["uid"] == "uid-1"
    assert owner["apiVersion"] == "kafka-rebalance.io/v1alpha1" and owner["controller"] is True
    data = json.loads(body["data"]["assignment.json"])
    assert data == {
        "group": "orders",
        "member": "orders-0",
        "epoch": 12,
        "partitions": {"orders": [0, 2]},
        "revoking": {},
        "planHash": "h1",
        "generatedAt": "T",
    }


def test_round_trip_and_current_state() -> None:
    documents = render_documents("g", {"a": {"t": [0, 1]}, "b": {"t": [2]}}, 3, "h", "T")
    current = read_current(configmaps("p", documents))
    assert current.epoch == 3 and current.applied_hash() == "h"
    assert current.owned(["a"]) == {"a": {"t": [0, 1]}}
    assert parse_document(document_text(documents["a"])) == documents["a"]


def test_disagreeing_configmaps_have_no_applied_hash() -> None:
    one = render_documents("g", {"a": {"t": [0]}}, 3, "h1", "T")
    two = render_documents("g", {"b": {"t": [1]}}, 3, "h2", "T")
    assert read_current(configmaps("p", {**one, **two})).applied_hash() is None


def test_unchanged_plan_writes_nothing_even_with_a_new_timestamp() -> None:
    old = render_documents("g", {"a": {"t": [0]}, "b": {"t": [1]}}, 3, "h", "T1")
    new = render_documents("g", {"a": {"t": [0]}, "b": {"t": [1]}}, 3, "h", "T2")
    assert not diff("p", read_current(configmaps("p", old)), new)


def test_diff_writes_changed_and_deletes_departed_members() -> None:
    old = render_documents("g", {"a": {"t": [0]}, "b": {"t": [1]}, "gone": {}}, 3, "h", "T")
    new = render_documents("g", {"a": {"t": [0, 1]}, "b": {}}, 4, "h2", "T")
    writes = diff("p", read_current(configmaps("p", old)), new)
    assert sorted(d.member for d in writes.upserts) == ["a", "b"]
    assert writes.deletes == ["p.gone"]


def test_unreadable_configmap_is_rewritten() -> None:
    documents = render_documents("g", {"a": {"t": [0]}}, 1, "h", "T")
    broken = {"metadata": {"name": "p-a"}, "data": {"assignment.json": "{not json"}}
    writes = diff("p", read_current([broken]), documents)
    assert [d.member for d in writes.upserts] == ["a"]


def test_parse_document_refuses_garbage() -> None:
    for text in [
        "",
        "[]",
        '{"epoch": -1, "group": "g", "member": "m"}',
        '{"epoch": 1, "group": "g", "member": "m", "partitions": {"t": ["x"]}}',
    ]:
        assert parse_document(text) is None


def test_a_document_too_big_for_version_1_is_written_as_version_2_and_read_back() -> None:
    big = {"a": {f"topic-{i:04d}": list(range(500)) for i in range(1000)}}  # 500k partitions
    documents = render_documents("g", big, 3, "h", "T")
    text = document_text(documents["a"])
    assert json.loads(text)["version"] == 2 and len(text) < 32 * 1024
    body = configmap_body("p", "uid-1", "ns", documents["a"])
    current = read_current([body])
    assert current.by_member["a"] == documents["a"]
    assert not diff("p", current, documents)  # read back equal: nothing to rewrite
    small = render_documents("g", {"a": {"t": [0]}}, 3, "h", "T")
    assert "version" not in json.loads(document_text(small["a"]))


def test_long_names_are_shortened_uniquely_within_limits() -> None:
    long_pod = "p" * 250
    name = names.configmap_name("policy", long_pod)
    assert len(name) <= 253 and name != names.configmap_name("policy", long_pod + "x")
    assert len(names.label_value(long_pod)) <= 63
    assert names.configmap_name("pol", "orders-0") == "pol.orders-0"


def test_configmap_names_of_two_policies_never_collide() -> None:
    """Policy names have no dot (a CRD rule), so the first dot ends the policy's part."""
    assert names.configmap_name("orders", "eu-orders-0") != names.configmap_name(
        "orders-eu", "orders-0"
    )
    pairs = [(p, m) for p in ("a", "a-b", "a-b-c") for m in ("b-c-0", "c-0", "0", "b.c-0")]
    assert len({names.configmap_name(p, m) for p, m in pairs}) == len(pairs)
