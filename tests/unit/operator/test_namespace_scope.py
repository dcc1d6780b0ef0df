"""Policies outside the watched namespaces, and the fix each one is logged with."""

from __future__ import annotations

from kafka_rebalance_operator import metrics
from kafka_rebalance_operator.kube.namespace_scope import fix_text, unwatched


def test_only_policies_outside_the_watched_namespaces_are_named_sorted() -> None:
    policies = [("payments", "p"), ("orders", "o"), ("apps", "b"), ("apps", "a"), ("apps", "a")]
    outside = unwatched(["orders", "payments"], policies)
    assert [(p.namespace, p.name) for p in outside] == [("apps", "a"), ("apps", "b")]


def test_watching_every_namespace_leaves_nothing_outside() -> None:
    assert unwatched(None, [("anywhere", "p")]) == []


def test_the_fix_names_the_policy_what_is_watched_and_the_values_to_change() -> None:
    text = fix_text("apps", "orders", {"kafka-rebalance", "billing"})
    assert text.startswith("ConsumerGroupPolicy apps/orders is ignored")
    assert "watches only billing, kafka-rebalance" in text
    assert "watchNamespaces" in text and "watchAllNamespaces" in text and "\n" not in text


def _samples(name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in metrics.REGISTRY.collect()
        for s in family.samples
        if s.name == name
    }


def test_the_watched_namespaces_gauge_has_one_series_each_or_a_star() -> None:
    metrics.record_watched_namespaces(["b", "a", "a"])
    series = _samples("kafka_rebalance_watched_namespace")
    assert series == {(("namespace", "a"),): 1.0, (("namespace", "b"),): 1.0}
    metrics.record_watched_namespaces(None)
    assert _samples("kafka_rebalance_watched_namespace") == {(("namespace", "*"),): 1.0}
