"""From observations to the planning request, plan hashes, placement and proposals (the
apply/hold/propose decision is in test_operator_decide.py)."""

from __future__ import annotations

import kafka_rebalance_assignors as assignors
import pytest
from kafka_rebalance_operator.kube.assignment_doc import render_documents
from kafka_rebalance_operator.planning import (
    build_request,
    moves_between,
    placement_needed,
    plan_hash,
    proposal_fits,
)
from kafka_rebalance_operator.policy import parse_spec


def policy(**rebalance):
    return parse_spec(
        {
            "groupId": "g",
            "kafka": {"bootstrapServers": "k:9092"},
            "topics": ["t"],
            "members": {"selector": {"matchLabels": {"app": "x"}}},
            "rebalance": {"mode": "enforce", **rebalance},
        }
    )


def test_request_is_planned_and_carries_ownership() -> None:
    current = render_documents("g", {"a": {"t": [0, 1, 2]}, "b": {"t": [3]}}, 5, "h", "T")
    lag = {("t", 0): 1000.0, ("t", 1): 10.0, ("t", 2): None, ("t", 3): 30.0}
    rate = {("t", 0): 5.0}
    request = build_request(
        policy(maxMovesPerRound="50%"), {"t": 4}, {"a": 1.0, "b": 2.0}, current, lag, rate
    )
    assert request.members["a"].owned == {"t": [0, 1, 2]}
    assert request.members["a"].generation == 5
    assert request.members["b"].weight == 2.0
    # what was not observed goes to the planner as unknown, where it counts as the topic's mean
    assert request.lag["t"] == [1000.0, 10.0, None, 30.0]
    assert request.rate["t"] == [5.0, None, None, None]
    from kafka_rebalance_assignors.load import partition_loads
    from kafka_rebalance_assignors.validation import validate

    group = validate(request).group
    _, lags = partition_loads(group, assignors.Options(load_model="lag"))
    assert lags["t"][2] == pytest.approx((1000 + 10 + 30) / 3)
    assert request.options.max_moves == 2
    result = assignors.plan_request(request)
    assert sorted(p for parts in result.assignment.values() for p in parts.get("t", [])) == [
        0,
        1,
        2,
        3,
    ]
    assert len(result.moves) <= 2
    # the preview: `kafka-rebalance plan` on the request's document gives the same plan
    assert assignors.plan(request.to_document()) == result.to_document()


def test_topic_with_nothing_known_has_no_lag_array() -> None:
    request = build_request(policy(), {"t": 2}, {"a": 1.0}, {}, {}, {})
    assert not request.lag and not request.rate
    assert "lag" not in request.to_document() and "rate" not in request.to_document()


def test_plan_hash_is_order_independent_and_sees_members() -> None:
    a = {"m1": {"t": [1, 0]}, "m2": {}}
    b = {"m2": {"t": []}, "m1": {"t": [0, 1]}}
    assert plan_hash(a) == plan_hash(b)
    assert plan_hash(a) != plan_hash({"m1": {"t": [0, 1]}})  # member set matters
    assert plan_hash(a) != plan_hash({"m1": {"t": [0]}, "m2": {"t": [1]}})


def test_placement_needed_for_new_gone_members_and_unowned_partitions() -> None:
    current = render_documents("g", {"a": {"t": [0, 1]}, "b": {"t": [2]}}, 2, "h", "T")
    assert not placement_needed({"t": 3}, ["a", "b"], current)
    assert placement_needed({"t": 3}, ["a", "b", "c"], current)  # new pod
    assert placement_needed({"t": 3}, ["a"], current)  # pod gone
    assert placement_needed({"t": 4}, ["a", "b"], current)  # partition added


def test_proposal_fits_only_the_same_members_and_partitions() -> None:
    proposal = {"a": {"t": [0]}, "b": {"t": [1]}}
    assert proposal_fits(proposal, {"t": 2}, ["a", "b"])
    assert not proposal_fits(proposal, {"t": 3}, ["a", "b"])
    assert not proposal_fits(proposal, {"t": 2}, ["a", "b", "c"])


def test_moves_between_counts_owner_changes_only() -> None:
    before = {"a": {"t": [0, 1]}, "b": {"t": [2]}}
    after = {"a": {"t": [0]}, "b": {"t": [1, 2, 3]}}
    assert moves_between(before, after) == 1  # partition 3 was unowned: a grant


def test_a_proposal_survives_the_round_trip_through_status() -> None:
    from kafka_rebalance_operator.planning import encode_assignment, plan_hash, restore_proposal

    assignment = {"b": {"t": [3, 1]}, "a": {"t": [0], "u": [2]}, "idle": {}}
    digest = plan_hash(assignment)
    status = {
        "hash": digest,
        "moves": 2,
        "before": 1.5,
        "after": 1.0,
        "generatedAt": "2026-11-21T10:00:00Z",
        "epoch": 4,
        "assignment": encode_assignment(assignment),
    }
    restored = restore_proposal(status)
    assert restored is not None
    assert restored.hash == digest and plan_hash(restored.assignment) == digest
    assert restored.assignment == {"a": {"t": [0], "u": [2]}, "b": {"t": [1, 3]}, "idle": {}}
    assert (restored.moves, restored.before, restored.after) == (2, 1.5, 1.0)
    assert restored.generated_at == "2026-11-21T10:00:00Z"


def test_a_stored_proposal_that_does_not_match_its_hash_is_not_offered() -> None:
    from kafka_rebalance_operator.planning import encode_assignment, plan_hash, restore_proposal

    assignment = {"a": {"t": [0, 1]}, "b": {"t": [2]}}
    good = {"hash": plan_hash(assignment), "assignment": encode_assignment(assignment)}
    assert restore_proposal(good) is not None
    edited = {**good, "assignment": encode_assignment({"a": {"t": [0]}, "b": {"t": [1, 2]}})}
    assert restore_proposal(edited) is None
    assert restore_proposal({**good, "assignment": "{not json"}) is None
    assert restore_proposal({"hash": good["hash"]}) is None  # written before it was stored
    assert restore_proposal(None) is None
