"""The same decide cases against every group kind (groups/: consumer, streams, share):
observe mode, cooldown,
minImprovement, approval by hash. Each kind gets a scenario with a plan in place that the
group runs, then a load that a better plan would spread; the case's rebalance settings are
then set (same generation: not a spec change) and one poll is decided.

What must agree across kinds is the decision and its effect: a new epoch delivered only on
APPLY, a proposal on offer only on PROPOSE, and an approved plan delivered exactly as offered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from kafka_rebalance_operator.kafka.share_group import ShareGroup, ShareMember
from kafka_rebalance_operator.kafka.streams_group import StreamsGroup, StreamsMember, Subtopology
from kafka_rebalance_operator.phases.decide import Action
from operator_ports import MemoryKafka, Policy, memory_ports, pods

TOPIC = "t"


def _consumer() -> Policy:
    """Six partitions over three pods, ConfigMaps written; then c-0's partitions go hot."""
    kafka = MemoryKafka(topics={TOPIC: 6})
    kafka.lag(TOPIC, dict.fromkeys(range(6), 100))
    spec = {
        "groupId": "g",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topics": [TOPIC],
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "apply": {"mode": "assign"},
        "strategy": "lag-aware",
        "load": {"model": "lag"},
        "rebalance": {"mode": "enforce", "cooldown": "0s"},
    }
    policy = Policy(spec, pods(3), memory_ports(kafka))
    assert policy.poll().action is Action.APPLY
    documents = policy.ports.configmaps.documents()
    for member, document in documents.items():  # the sidecars acknowledge epoch 1
        for p in document["partitions"].get(TOPIC, []):
            kafka.committed[(TOPIC, p)] = (0, f'{{"member": "{member}", "epoch": 1}}')
    held = documents["c-0"]["partitions"][TOPIC]
    kafka.lag(TOPIC, {p: (5000 if p in held else 10) for p in range(6)})
    return policy


def _streams_member(member_id: str, active: dict[str, list[int]]) -> StreamsMember:
    return StreamsMember(
        member_id=member_id,
        member_epoch=5,
        process_id=f"process-{member_id}",
        client_id=f"client-{member_id}",
        client_host="/127.0.0.1",
        instance_id=None,
        rack_id=None,
        active=active,
        standby={},
        warmup={},
        target_active=active,
    )


def _streams() -> Policy:
    """Six stateless tasks over three members; a first plan published and run; then the
    tasks of the member running the most go hot."""
    group = StreamsGroup(
        group_id="g",
        state="Stable",
        group_epoch=5,
        assignment_epoch=5,
        topology_epoch=1,
        subtopologies=(Subtopology("0", ("words",), (), ()),),
        members=tuple(_streams_member(f"m-{i}", {"0": [i, i + 3]}) for i in range(3)),
        assignor="kafka-rebalance-plan",
    )
    kafka = MemoryKafka(topics={"words": 6}, streams_groups={"g": group})
    kafka.lag("words", {0: 3000, 1: 10, 2: 10, 3: 3000, 4: 10, 5: 10})
    spec = {
        "groupId": "g",
        "groupType": "streams",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "apply": {"mode": "broker"},
        "strategy": "lag-aware",
        "load": {"model": "lag"},
        "rebalance": {"mode": "enforce", "cooldown": "0s"},
    }
    policy = Policy(spec, [], memory_ports(kafka))
    assert policy.poll().action is Action.APPLY
    record = kafka.published[-1][2]
    assert record is not None
    running = {
        m: {s: _parts(t) for s, t in tasks.items()} for m, tasks in record["members"].items()
    }
    kafka.streams_groups["g"] = dataclasses.replace(
        group,
        group_epoch=6,
        assignment_epoch=6,
        members=tuple(_streams_member(m, t) for m, t in sorted(running.items())),
    )
    hot = max(running.values(), key=lambda tasks: len(tasks["0"]))["0"]
    kafka.lag("words", {p: (5000 if p in hot else 10) for p in range(6)})
    return policy


def _share_group(assignment: dict[str, dict[str, list[int]]], epoch: int) -> ShareGroup:
    return ShareGroup(
        group_id="g",
        state="Stable",
        group_epoch=epoch,
        assignment_epoch=epoch,
        assignor="kafka-rebalance-plan",
        members=tuple(
            ShareMember(
                member_id=m,
                member_epoch=epoch,
                client_id=f"client-{m}",
                client_host="/127.0.0.1",
                rack_id=None,
                subscribed_topics=("jobs",),
                assignment={t: tuple(p) for t, p in topics.items()},
            )
            for m, topics in sorted(assignment.items())
        ),
    )


def _share() -> Policy:
    """Four partitions, three consumers (simple's start: one each, one with two); a first
    plan (partition 3 produces most) published and run; then one partition's backlog grows."""
    start = {"s-0": {"jobs": [0, 3]}, "s-1": {"jobs": [1]}, "s-2": {"jobs": [2]}}
    kafka = MemoryKafka(topics={"jobs": 4}, share_groups={"g": _share_group(start, 5)})
    for p in range(4):
        kafka.log_end[("jobs", p)] = 1_000
        kafka.share_lag[("jobs", p)] = 100
    spec = {
        "groupId": "g",
        "groupType": "share",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "apply": {"mode": "broker"},
        "rebalance": {"mode": "enforce", "cooldown": "0s"},
    }
    policy = Policy(spec, [], memory_ports(kafka))
    policy.poll()  # no production rate yet: held (MeasuringLoad)
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    for p in range(4):
        kafka.log_end[("jobs", p)] += 300 if p == 3 else 30
    assert policy.poll().action is Action.APPLY
    running = policy.memory.published_plan
    assert running is not None
    kafka.share_groups["g"] = _share_group(running, 7)
    hot = max(running.items(), key=lambda item: len(item[1].get("jobs", [])))[1]["jobs"][0]
    kafka.share_lag[("jobs", hot)] = 50_000
    return policy


def _parts(text: str) -> list[int]:
    out: list[int] = []
    for item in text.split(","):
        a, _, b = item.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


KINDS: dict[str, Callable[[], Policy]] = {
    "consumer": _consumer,
    "streams": _streams,
    "share": _share,
}


def _decided(scenario: Callable[[], Policy], rebalance: dict[str, Any]) -> tuple[Policy, int]:
    policy = scenario()
    policy.ports.clock.advance(60)  # type: ignore[attr-defined]
    epoch = policy.memory.applied_epoch
    policy.spec = {**policy.spec, "rebalance": {"mode": "enforce", **rebalance}}
    return policy, epoch


CASES = [
    ({"mode": "observe", "cooldown": "0s"}, Action.OBSERVE, "Observing"),
    ({"cooldown": "5m"}, Action.HOLD, "CoolingDown"),
    # a gain under minImprovement: the partition and task planners keep the plan in place
    # themselves (NOOP), the share planner leaves it to decide (HOLD); nothing is delivered
    ({"cooldown": "0s", "minImprovement": 0.99}, (Action.NOOP, Action.HOLD), "Balanced"),
    ({"cooldown": "0s", "minImprovement": 0.0}, Action.APPLY, None),
    ({"cooldown": "0s", "approval": "Manual"}, Action.PROPOSE, "AwaitingApproval"),
    ({"mode": "propose", "cooldown": "0s"}, Action.PROPOSE, "AwaitingApproval"),
]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("rebalance", "action", "reason"), CASES)
def test_every_kind_decides_alike(
    kind: str, rebalance: dict[str, Any], action: Action | tuple[Action, ...], reason: str | None
) -> None:
    policy, epoch = _decided(KINDS[kind], rebalance)
    outcome = policy.poll()
    allowed = action if isinstance(action, tuple) else (action,)
    assert outcome.action in allowed, policy.condition("Ready")
    delivered = policy.memory.applied_epoch - epoch
    assert delivered == (1 if outcome.action is Action.APPLY else 0)
    assert ("proposal" in policy.status) == (outcome.action is Action.PROPOSE)
    if reason is not None:
        assert policy.condition("Ready")["reason"] == reason


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_delivers_the_approved_proposal_as_offered(kind: str) -> None:
    policy, epoch = _decided(KINDS[kind], {"cooldown": "0s", "approval": "Manual"})
    assert policy.poll().action is Action.PROPOSE
    offered = policy.status["proposal"]
    assert offered["epoch"] == epoch + 1
    assert [e[1] for e in policy.events][-1] == "AwaitingApproval"
    policy.spec = {**policy.spec, "approvedPlan": "0000"}  # another hash approves nothing
    assert policy.poll().action is Action.PROPOSE
    assert policy.status["proposal"]["hash"] == offered["hash"]
    policy.spec = {**policy.spec, "approvedPlan": offered["hash"]}
    assert policy.poll().action is Action.APPLY
    assert policy.memory.applied_epoch == epoch + 1
    assert "proposal" not in policy.status


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_offers_the_same_proposal_after_an_operator_restart(kind: str) -> None:
    from kafka_rebalance_operator.memory import PolicyMemory

    policy, _ = _decided(KINDS[kind], {"cooldown": "0s", "approval": "Manual"})
    policy.poll()
    offered = policy.status["proposal"]["hash"]
    policy.memory = PolicyMemory()  # only status survives
    policy.poll()
    assert policy.status["proposal"]["hash"] == offered


@pytest.mark.parametrize("kind", ["streams", "share"])  # the kinds the brokers assign
def test_every_broker_kind_keeps_the_groups_heartbeat_as_its_policy_says(kind: str) -> None:
    """spec.apply.heartbeatInterval becomes the group's own config, written once (not each
    poll); a value the brokers refuse stalls the policy and delivers nothing; unset, the
    operator's value is removed once."""
    policy, _ = _decided(KINDS[kind], {"cooldown": "0s"})
    kafka = policy.ports.kafka
    assert isinstance(kafka, MemoryKafka)
    group = policy.spec["groupId"]

    def heartbeat(value: str | None) -> None:
        apply = {k: v for k, v in policy.spec["apply"].items() if k != "heartbeatInterval"}
        if value is not None:
            apply["heartbeatInterval"] = value
        policy.spec = {**policy.spec, "apply": apply}

    heartbeat("1500ms")
    policy.poll()
    policy.poll()
    assert kafka.heartbeat_set == [(group, kind, 1500)]

    kafka.heartbeat_refusal = f"{kind}.heartbeat.interval.ms must be in the range 5000 to 15000"
    heartbeat("1s")
    epoch = policy.memory.applied_epoch
    policy.poll()
    stalled = policy.condition("Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "HeartbeatIntervalRefused")
    assert "spec.apply.heartbeatInterval" in stalled["message"]
    assert "5000 to 15000" in stalled["message"]
    assert policy.memory.applied_epoch == epoch

    kafka.heartbeat_refusal = None
    heartbeat(None)
    policy.poll()
    policy.poll()
    assert kafka.heartbeat_set == [(group, kind, 1500), (group, kind, None)]
