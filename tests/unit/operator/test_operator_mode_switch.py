"""Switching `apply.mode` from assign to group while the sidecars still run in assign mode: a
member outside the consumer group is fenced by nothing, so partitions move away from it only
through a revoke it acknowledges; once the members show in the group, moves are one step
again (the group's rebalances fence them). The decision is pure (`ownership.outside_group`);
the whole polls run with in-memory ports."""

from __future__ import annotations

import json
from typing import Any

from kafka_rebalance_common import wire
from kafka_rebalance_common.replanning import Action
from kafka_rebalance_common.wire import AssignmentDocument
from kafka_rebalance_operator import ownership
from kafka_rebalance_operator.kube.assignment_doc import CurrentState
from kafka_rebalance_operator.phases.decide import Stop

from tests.operator_ports import MemoryKafka, Policy, memory_ports, pods

TOPIC = "t"


def spec(mode: str) -> dict[str, Any]:
    return {
        "groupId": "g",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topics": [TOPIC],
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "strategy": "lag-aware",
        "load": {"model": "lag"},
        "rebalance": {"mode": "enforce", "cooldown": "0s", "minImprovement": 0.05},
        "apply": {"mode": mode, "handoffTimeout": "60s"},
    }


def joined(*members: str) -> dict[str, Any]:
    return {
        "group_state": "Stable",
        "protocol_type": "consumer",
        "protocol_data": "kafka-rebalance-plan",
        "members": [{"member_id": f"{m}-id", "group_instance_id": m} for m in members],
    }


def owners(subject: Policy) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for member, doc in subject.ports.configmaps.documents().items():
        for p in doc["partitions"].get(TOPIC, []):
            found.setdefault(p, []).append(member)
    return found


def switched() -> tuple[MemoryKafka, Policy, dict[str, list[int]]]:
    """Assign mode with epoch 1 applied; then apply.mode group, sidecars still in assign mode
    (nobody in the consumer group), and lags that make the plan move partitions."""
    kafka = MemoryKafka(topics={TOPIC: 4})
    kafka.lag(TOPIC, dict.fromkeys(range(4), 100))
    kafka.group = {"group_state": "Empty", "members": []}
    subject = Policy(spec("assign"), pods(2), memory_ports(kafka))
    assert subject.poll().action is Action.APPLY
    held = {m: d["partitions"][TOPIC] for m, d in subject.ports.configmaps.documents().items()}
    for member, parts in held.items():  # the assign-mode sidecars commit what they consume
        for p in parts:
            kafka.committed[(TOPIC, p)] = (0, json.dumps({"member": member, "epoch": 1}))
    subject.spec = spec("group")
    subject.generation = 2
    kafka.lag(TOPIC, {p: (5000 if p in held["c-0"] else 10) for p in range(4)})
    return kafka, subject, held


def test_the_switch_revokes_before_it_grants_and_waits_for_the_acknowledgement() -> None:
    kafka, subject, _ = switched()
    assert subject.poll().action is Action.APPLY
    docs = subject.ports.configmaps.documents()
    revoked = {(m, p) for m, d in docs.items() for p in d["revoking"].get(TOPIC, [])}
    assert revoked, "the new plan moves partitions, away from a member outside the group"
    assert all(len(ms) == 1 for ms in owners(subject).values()), "no partition granted twice"
    assert not {p for _, p in revoked} & set(owners(subject)), "revoked ones held by nobody"
    epoch = subject.status["epoch"]
    assert subject.poll().action is Stop.HANDING_OFF
    for member, p in revoked:  # the assign-mode sidecar stops and acknowledges
        kafka.committed[(TOPIC, p)] = (0, json.dumps({"member": member, "epoch": epoch}))
    assert subject.poll().action is Action.APPLY
    assert sorted(owners(subject)) == [0, 1, 2, 3]
    assert all(len(ms) == 1 for ms in owners(subject).values())


def test_a_member_that_joined_the_group_needs_no_acknowledgement() -> None:
    kafka, subject, _ = switched()
    assert subject.poll().action is Action.APPLY
    assert subject.poll().action is Stop.HANDING_OFF
    kafka.group = joined("c-0", "c-1")  # the sidecars were restarted in group mode
    assert subject.poll().action is Action.APPLY  # the rest of the plan, one step now
    docs = subject.ports.configmaps.documents()
    assert all(not d["revoking"] for d in docs.values())


def test_once_the_members_are_in_the_group_moves_are_one_step() -> None:
    kafka, subject, _ = switched()
    kafka.group = joined("c-0", "c-1")
    assert subject.poll().action is Action.APPLY
    docs = subject.ports.configmaps.documents()
    assert all(not d["revoking"] for d in docs.values())
    assert sorted(owners(subject)) == [0, 1, 2, 3]


def document(member: str, partitions: list[int], revoking: list[int] = ()) -> AssignmentDocument:
    return AssignmentDocument(
        "g", member, 3, {TOPIC: partitions} if partitions else {},
        {TOPIC: list(revoking)} if revoking else {}, "h",
    )  # fmt: skip


def test_outside_group_is_group_mode_members_with_partitions_not_in_the_group() -> None:
    current = CurrentState(
        {},
        {
            "a": document("a", [0]),
            "b": document("b", [1]),
            "c": document("c", []),
            "d": document("d", [], revoking=[2]),
            "gone": document("gone", [3]),
        },
    )
    members = ["a", "b", "c", "d"]
    commits = {
        (TOPIC, p): wire.CommitMetadata(m, 3)
        for p, m in ((0, "a"), (1, "b"), (2, "d"), (3, "gone"))
    }
    assert ownership.outside_group("group", joined("a"), current, members, commits) == ("b", "d")
    # no commit naming it: nothing consumes (no sidecar running yet)
    assert ownership.outside_group("group", joined("a"), current, members, {}) == ()
    assert ownership.outside_group("group", None, current, members, commits) == ()
    assert ownership.outside_group("assign", joined(), current, members, commits) == ()
    assert ownership.outside_group("broker", joined(), current, members, commits) == ()


def test_members_that_never_committed_consume_nothing_and_move_in_one_step() -> None:
    """Group mode before any sidecar runs (pods without consumers): no revoke step."""
    kafka, subject, _ = switched()
    kafka.committed.clear()
    assert subject.poll().action is Action.APPLY
    assert all(not d["revoking"] for d in subject.ports.configmaps.documents().values())
