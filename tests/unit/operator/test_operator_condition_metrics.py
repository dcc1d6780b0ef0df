"""`kafka_rebalance_policy_condition`: the series alert rules key on (deploy/prometheus/)."""

from __future__ import annotations

from kafka_rebalance_operator import metrics


def _samples(policy: str) -> dict[tuple[str, str], float]:
    return {
        (s.labels["condition"], s.labels["reason"]): s.value
        for family in metrics.REGISTRY.collect()
        if family.name == "kafka_rebalance_policy_condition"
        for s in family.samples
        if s.labels["policy"] == policy
    }


def test_one_series_per_condition_with_its_current_reason() -> None:
    metrics.record_conditions(
        "ns",
        "p",
        [
            {"type": "Ready", "status": "False", "reason": "KafkaUnreachable"},
            {"type": "Reconciling", "status": "False", "reason": "Idle"},
            {"type": "Stalled", "status": "True", "reason": "KafkaUnreachable"},
        ],
    )
    assert _samples("p") == {
        ("Ready", "KafkaUnreachable"): 0,
        ("Reconciling", "Idle"): 0,
        ("Stalled", "KafkaUnreachable"): 1,
    }
    metrics.record_conditions(
        "ns",
        "p",
        [
            {"type": "Ready", "status": "True", "reason": "Balanced"},
            {"type": "Reconciling", "status": "False", "reason": "Idle"},
            {"type": "Stalled", "status": "False", "reason": "Progressing"},
        ],
    )
    assert _samples("p") == {
        ("Ready", "Balanced"): 1,
        ("Reconciling", "Idle"): 0,
        ("Stalled", "Progressing"): 0,
    }
    metrics.forget("ns", "p")
    assert _samples("p") == {}
