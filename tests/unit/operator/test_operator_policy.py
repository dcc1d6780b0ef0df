"""Reading ConsumerGroupPolicy specs: CRD defaults repeated, unusable fields named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kafka_rebalance_operator.durations import DurationError, parse_duration
from kafka_rebalance_operator.policy import PolicyError, parse_spec

ROOT = Path(__file__).resolve().parents[3]
BASE = {
    "groupId": "orders",
    "kafka": {"bootstrapServers": "kafka:9092"},
    "topics": ["orders"],
    "members": {"selector": {"matchLabels": {"app": "orders"}}},
}


def spec(**changes):
    document = {**BASE}
    for key, value in changes.items():
        document[key] = value
    return document


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1m30s", 90),
        ("500ms", 0.5),
        ("1h", 3600),
        ("0s", 0),
        ("1.5s", 1.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["", "30", "s", "5 m", "1d", "-5s", "5s10", "5s 3m", "1.2.3s", "1w", "9" * 400 + "h"],
)
def test_bad_durations(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


def _crd_rebalance_defaults() -> dict[str, str]:
    crd = yaml.safe_load((ROOT / "crds" / "consumergrouppolicies.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    fields = spec["properties"]["rebalance"]["properties"]
    return {name: fields[name]["default"] for name in ("mode", "approval")}


def test_defaults_match_the_crd() -> None:
    policy = parse_spec(BASE)
    assert policy.strategy == "lag-aware"
    assert {"mode": policy.mode, "approval": policy.approval} == _crd_rebalance_defaults()
    assert policy.mode == "observe" and policy.approval == "Auto"
    assert policy.poll_interval == 30 and policy.cooldown == 300
    assert policy.min_improvement == 0.1 and policy.max_moves is None
    assert policy.apply_mode == "group" and policy.offset_reset == "earliest"
    assert not policy.needs_approval


@pytest.mark.parametrize(
    ("value", "partitions", "budget"),
    [(3, 100, 3), ("25%", 40, 10), ("1%", 10, 1), ("100%", 7, 7), ("33%", 10, 4), ("5", 9, 5)],
)
def test_move_budget(value, partitions: int, budget: int) -> None:
    policy = parse_spec(spec(rebalance={"maxMovesPerRound": value}))
    assert policy.move_budget(partitions) == budget


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"groupId": ""}, "spec.groupId"),
        ({"rebalance": {"maxMovesPerRound": 0}}, "maxMovesPerRound"),
        ({"rebalance": {"maxMovesPerRound": "150%"}}, "maxMovesPerRound"),
        ({"rebalance": {"pollInterval": "soon"}}, "spec.rebalance.pollInterval"),
        ({"rebalance": {"mode": "yolo"}}, "spec.rebalance.mode"),
        ({"topicPattern": "("}, "spec.topicPattern"),
        ({"members": {"selector": {}}}, "spec.members.selector"),
        (
            {
                "members": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "weights": [{"selector": {"matchLabels": {"a": "b"}}, "weight": 0}],
                }
            },
            "spec.members.weights[0].weight",
        ),
    ],
)
def test_unusable_fields_are_named(changes, field: str) -> None:
    document = spec(**changes)
    if "topicPattern" in changes:
        del document["topics"]
    with pytest.raises(PolicyError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(document)


def test_an_explicit_mode_is_kept_whatever_the_default() -> None:
    for mode in ("enforce", "propose", "observe"):
        assert parse_spec(spec(rebalance={"mode": mode})).mode == mode
    enforcing = parse_spec(spec(rebalance={"mode": "enforce"}))
    assert enforcing.approval == "Auto" and not enforcing.needs_approval


def test_propose_mode_and_manual_approval_both_need_approval() -> None:
    assert parse_spec(spec(rebalance={"mode": "propose"})).needs_approval
    assert parse_spec(spec(rebalance={"approval": "Manual"})).needs_approval


def test_a_broker_mode_heartbeat_interval_is_read_in_whole_milliseconds() -> None:
    parsed = parse_spec(spec(apply={"mode": "broker", "heartbeatInterval": "1.5s"}))
    assert parsed.heartbeat_interval_ms == 1500
    assert parse_spec(spec(apply={"mode": "broker"})).heartbeat_interval_ms is None


@pytest.mark.parametrize(
    ("apply", "named"),
    [
        ({"mode": "group", "heartbeatInterval": "1s"}, "needs spec.apply.mode broker"),
        ({"mode": "assign", "heartbeatInterval": "1s"}, "needs spec.apply.mode broker"),
        ({"mode": "broker", "heartbeatInterval": "0s"}, "at least 1ms"),
        ({"mode": "broker", "heartbeatInterval": "soon"}, "spec.apply.heartbeatInterval"),
    ],
)
def test_an_unusable_heartbeat_interval_is_named(apply: dict[str, str], named: str) -> None:
    with pytest.raises(PolicyError, match=r"spec\.apply\.heartbeatInterval") as refused:
        parse_spec(spec(apply=apply))
    assert named in str(refused.value)
