"""Membership from pods (selectors, readiness) and weight resolution."""

from __future__ import annotations

import pytest
from kafka_rebalance_operator.kube.members import (
    PodSummary,
    parse_cpu,
    resolve_weights,
    select_members,
    summarise_pod,
)
from kafka_rebalance_operator.kube.selectors import matches
from kafka_rebalance_operator.policy import parse_spec


def policy(**members):
    return parse_spec(
        {
            "groupId": "g",
            "kafka": {"bootstrapServers": "k:9092"},
            "topics": ["t"],
            "members": {"selector": {"matchLabels": {"app": "orders"}}, **members},
        }
    )


def pod(name, labels=None, phase="Running", ready=True, deleting=False, cpu=None):
    return PodSummary(name, labels or {"app": "orders"}, phase, ready, deleting, cpu)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"a": "2"},
            True,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"b": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "1"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Weird"}]}, {"a": "1"}, False),
        ({}, {"a": "1"}, False),  # an empty selector selects nothing, never everything
        (None, {"a": "1"}, False),
    ],
)
def test_selectors(selector, labels, expected: bool) -> None:
    assert matches(selector, labels) is expected


def test_only_running_ready_matching_pods_are_members_sorted() -> None:
    pods = [
        pod("c"),
        pod("a"),
        pod("b", ready=False),
        pod("d", phase="Pending"),
        pod("e", deleting=True),
        pod("f", labels={"app": "other"}),
    ]
    assert [p.name for p in select_members(policy(), pods)] == ["a", "c"]


def test_readiness_admits_a_member_and_only_stopping_or_deletion_removes_it() -> None:
    """An admitted member that turns NotReady (its sidecar mid hand-over) stays; a never-Ready
    pod is not admitted; admission does not keep a pod that stopped running or is deleted."""
    pods = [
        pod("a", ready=False),  # admitted earlier, now handing over
        pod("b", ready=False),  # never admitted
        pod("c", ready=False, phase="Failed"),
        pod("d", ready=False, deleting=True),
        pod("e"),
    ]
    members = select_members(policy(), pods, admitted={"a", "c", "d"})
    assert [p.name for p in members] == ["a", "e"]


def test_summarise_pod_reads_readiness_and_cpu_requests() -> None:
    body = {
        "metadata": {"name": "orders-0", "labels": {"app": "orders"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "1500m"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "0.5"}}},
            ]
        },
    }
    summary = summarise_pod(body)
    assert summary.ready and summary.phase == "Running" and not summary.deleting
    assert summary.cpu_request == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("text", "cores"),
    [
        ("250m", 0.25),
        ("2", 2.0),
        ("1.5", 1.5),
        ("2k", 2000.0),  # a decimal SI suffix: 2000 cores, not "unknown" (weight 1)
        ("1e3", 1000.0),
        ("1Ki", 1024.0),
        ("500000u", 0.5),
        ("100n", 1e-7),
        (4, 4.0),
        ("x", None),
        ("2kk", None),
        ("", None),
    ],
)
def test_parse_cpu(text: str, cores) -> None:
    assert parse_cpu(text) == (pytest.approx(cores) if cores is not None else None)


def test_explicit_weight_rules_first_match_wins_default_one() -> None:
    spec = policy(
        weights=[
            {"selector": {"matchLabels": {"size": "large"}}, "weight": 4},
            {"selector": {"matchLabels": {"app": "orders"}}, "weight": 2},
        ]
    )
    members = [pod("a", {"app": "orders", "size": "large"}), pod("b"), pod("c", {"zone": "x"})]
    assert resolve_weights(spec, members) == {"a": 4.0, "b": 2.0, "c": 1.0}


def test_weight_from_resources_uses_cpu_requests_and_rules_override() -> None:
    spec = policy(
        weightFrom="resources",
        weights=[{"selector": {"matchLabels": {"pin": "yes"}}, "weight": 7}],
    )
    members = [pod("a", cpu=4.0), pod("b", cpu=0.5), pod("c"), pod("d", {"pin": "yes"}, cpu=2.0)]
    assert resolve_weights(spec, members) == {"a": 4.0, "b": 0.5, "c": 1.0, "d": 7.0}


def test_adaptive_weights_are_taken_as_measured_clamped_and_overridden() -> None:
    spec = policy(
        weightFrom="adaptive",
        weights=[{"selector": {"matchLabels": {"pin": "yes"}}, "weight": 3}],
    )
    members = [pod("a"), pod("b"), pod("c"), pod("d"), pod("e", {"pin": "yes"})]
    measured = {"a": 2.5, "b": 0.01, "c": float("nan"), "e": 0.2}
    assert resolve_weights(spec, members, measured) == {
        "a": 2.5,
        "b": 0.1,  # clamped, never starved to nothing
        "c": 1.0,  # not a number: the neutral weight
        "d": 1.0,  # not measured yet
        "e": 3.0,  # an explicit rule wins
    }
    assert resolve_weights(spec, members) == {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 3.0}
