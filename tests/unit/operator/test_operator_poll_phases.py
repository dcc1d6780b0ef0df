"""Whole polls and each phase with in-memory ports (tests/operator_ports.py): no broker, no API
server. One class per phase; the real-broker and real-API proofs of the same paths are
tests/integration/test_operator_poll.py and test_operator_k8s.py."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from kafka_rebalance_common.replanning import Action
from kafka_rebalance_common.wire import partitions, plan_record
from kafka_rebalance_operator.groups.consumer import facts, wait
from kafka_rebalance_operator.kafka import admission
from kafka_rebalance_operator.kafka.cluster_identity import Rival, servers_of
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.context import PolicyContext
from kafka_rebalance_operator.phases.decide import Stop, decide
from kafka_rebalance_operator.phases.observe import observe
from kafka_rebalance_operator.phases.plan import plan
from kafka_rebalance_operator.ports import StoreError
from kafka_rebalance_operator.settings import OperatorSettings

from tests.operator_ports import PLAN_CLIENT, MemoryKafka, Policy, memory_ports, pods

TOPIC = "t"


def spec(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "groupId": "g",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topics": [TOPIC],
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "strategy": "lag-aware",
        "load": {"model": "lag"},
        "rebalance": {"mode": "enforce", "cooldown": "0s", "minImprovement": 0.05},
    }
    for key, value in extra.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and key in base else value
    return base


def cluster(partitions: int = 6, lag: int = 100) -> MemoryKafka:
    kafka = MemoryKafka(topics={TOPIC: partitions})
    kafka.lag(TOPIC, dict.fromkeys(range(partitions), lag))
    return kafka


def policy(broker: MemoryKafka | None = None, members: int = 3, **extra: Any) -> Policy:
    return Policy(spec(**extra), pods(members), memory_ports(broker or cluster()))


def skew(policy: Policy, kafka: MemoryKafka, member: str = "c-0") -> None:
    """Make `member`'s partitions the heavy ones."""
    held = policy.ports.configmaps.documents()[member]["partitions"][TOPIC]
    kafka.lag(TOPIC, {p: (5000 if p in held else 10) for p in range(kafka.topics[TOPIC])})


def held(policy: Policy) -> list[int]:
    return sorted(
        p
        for d in policy.ports.configmaps.documents().values()
        for p in d["partitions"].get(TOPIC, [])
    )


class TestObserve:
    def test_kafka_unreachable_stalls_once_and_changes_nothing(self) -> None:
        kafka = cluster()
        subject = policy(kafka)
        assert subject.poll().action is Action.APPLY
        epoch, writes = subject.status["epoch"], list(subject.ports.configmaps.writes)
        kafka.reachable = False
        outcome = subject.poll()
        assert outcome.action is Stop.FAILED and not outcome.succeeded
        assert subject.condition("Stalled")["reason"] == "KafkaUnreachable"
        assert subject.condition("Ready")["status"] == "False"
        assert subject.status["epoch"] == epoch and subject.ports.configmaps.writes == writes
        subject.poll()
        assert [e[1] for e in subject.events].count("KafkaUnreachable") == 1
        assert subject.memory.observer is None  # a fresh client when Kafka is back
        kafka.reachable = True
        assert subject.poll().action is Action.NOOP
        assert subject.condition("Ready")["status"] == "True"
        assert subject.ports.metrics.failures == ["KafkaUnreachable", "KafkaUnreachable"]

    def test_missing_secret_stalls_before_connecting(self) -> None:
        kafka = cluster()
        subject = policy(kafka, kafka={"secretRef": {"name": "creds"}})
        outcome = subject.poll()
        assert outcome.action is Stop.FAILED
        stalled = subject.condition("Stalled")
        assert stalled["reason"] == "SecretNotFound" and "ns/creds" in stalled["message"]
        assert kafka.connections == [] and subject.ports.configmaps.items == {}
        assert subject.events == [("Warning", "SecretNotFound", stalled["message"])]

    def test_a_secret_is_read_and_a_changed_one_reconnects(self) -> None:
        kafka = cluster()
        subject = policy(kafka, kafka={"secretRef": {"name": "creds"}})
        secrets = subject.ports.secrets.items
        sasl = {"securityProtocol": "SASL_PLAINTEXT", "saslMechanism": "PLAIN", "saslUsername": "u"}
        secrets[("ns", "creds")] = {**sasl, "saslPassword": "p1-long-enough"}
        assert subject.poll().action is Action.APPLY
        assert kafka.connections[0][1]["sasl_plain_password"] == "p1-long-enough"
        subject.poll()
        assert len(kafka.connections) == 1  # unchanged Secret: the same client
        secrets[("ns", "creds")] = {**sasl, "saslPassword": "p2-long-enough"}
        subject.poll()
        assert [c[1]["sasl_plain_password"] for c in kafka.connections] == [
            "p1-long-enough",
            "p2-long-enough",
        ]

    def test_an_unusable_secret_is_invalid_secret(self) -> None:
        subject = policy(kafka={"secretRef": {"name": "creds"}})
        subject.ports.secrets.items[("ns", "creds")] = {"securityProtocol": "CARRIER_PIGEON"}
        subject.poll()
        assert subject.condition("Stalled")["reason"] == "InvalidSecret"

    def test_a_server_off_the_allowlist_is_refused_before_the_secret_is_read(self) -> None:
        kafka = cluster()
        subject = policy(kafka, kafka={"secretRef": {"name": "absent"}})
        subject.settings = OperatorSettings(
            allowed_bootstrap_servers=admission.parse_allowlist(["kafka.internal:9092"])
        )
        subject.poll()
        assert subject.condition("Stalled")["reason"] == admission.REFUSAL_REASON
        assert kafka.connections == []

    def test_invalid_spec_and_conflicting_policy(self) -> None:
        subject = policy()
        subject.spec = {k: v for k, v in spec().items() if k != "groupId"}
        subject.poll()
        stalled = subject.condition("Stalled")
        assert stalled["reason"] == "InvalidSpec" and "spec.groupId" in stalled["message"]
        subject.spec = spec()
        subject.rivals = (Rival("t0", "ns", "older", servers_of("KAFKA:9092")),)
        subject.poll()
        stalled = subject.condition("Stalled")
        assert stalled["reason"] == "ConflictingPolicy" and "policy older " in stalled["message"]
        assert subject.ports.kafka.connections == []  # servers written alike: no Kafka call

    def test_an_older_policy_under_an_alias_of_the_same_cluster_wins(self) -> None:
        kafka = cluster()
        first = policy(kafka)
        first.namespace = "team-a"
        assert first.poll().succeeded
        second = Policy(
            spec(kafka={"bootstrapServers": "kafka-alias:9092"}), pods(3, "c"), first.ports
        )
        second.namespace, second.name = "team-b", "copy"
        second.rivals = (Rival("t0", "team-a", "pol", servers_of("kafka:9092")),)
        written = dict(first.ports.configmaps.documents())
        assert not second.poll().succeeded
        stalled = second.condition("Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "ConflictingPolicy")
        assert "policy team-a/pol (older)" in stalled["message"]
        assert "memory-cluster" in stalled["message"]
        assert first.ports.configmaps.documents() == written  # the copy wrote nothing
        kafka.cluster_id = "another-cluster"  # the alias reaches another cluster: no conflict
        second.memory.close()
        second.ports.clusters.forget(("team-b", "copy"))
        other = Policy(second.spec, pods(3, "c"), memory_ports(kafka))
        other.rivals = second.rivals
        other.ports.clusters.learned(("team-a", "pol"), servers_of("kafka:9092"), "memory-cluster")
        assert other.poll().succeeded

    def test_an_older_policy_not_polled_yet_holds_a_younger_one_back(self) -> None:
        subject = policy(kafka={"bootstrapServers": "kafka-alias:9092"})
        subject.rivals = (Rival("t0", "ns", "older", servers_of("kafka:9092")),)
        assert not subject.poll().succeeded
        ready = subject.condition("Ready")
        assert (ready["reason"], subject.condition("Stalled")["status"]) == (
            "ClusterIdentityPending",
            "False",
        )
        assert subject.ports.configmaps.documents() == {}
        subject.ports.clusters.polled(("ns", "older"), servers_of("kafka:9092"))  # unreachable
        assert subject.poll().succeeded

    def test_a_cluster_whose_id_cannot_be_read_is_not_managed(self) -> None:
        kafka = cluster()
        kafka.cluster_id = None
        subject = policy(kafka)
        assert not subject.poll().succeeded
        assert subject.condition("Stalled")["reason"] == "ClusterUnknown"
        assert subject.ports.configmaps.documents() == {}
        assert subject.ports.clusters.snapshot()[("ns", "pol")].cluster_id is None

    def test_no_topic_found(self) -> None:
        subject = policy(topics=["absent"])
        subject.poll()
        assert subject.condition("Stalled")["reason"] == "TopicsNotFound"

    def test_configmaps_that_cannot_be_listed(self) -> None:
        subject = policy()
        subject.ports.configmaps.refuse = StoreError(403, "Forbidden")
        subject.poll()
        stalled = subject.condition("Stalled")
        assert stalled["reason"] == "ApplyFailed"
        assert stalled["message"] == "listing ConfigMaps: HTTP 403 Forbidden"

    def test_observed_facts(self) -> None:
        kafka = cluster(partitions=4, lag=50)
        del kafka.committed[(TOPIC, 3)]
        ports, memory = memory_ports(kafka), PolicyMemory()
        ctx = PolicyContext("ns", "pol", "uid", 1, spec(), {"epoch": 7})
        observed = observe(ctx, pods(2), memory, ports, OperatorSettings(), ports.clock.now())
        assert observed.member_names == ["c-0", "c-1"]
        assert observed.epoch == 7 and observed.handoff is None and observed.mismatch is None
        assert observed.total_lag == 150 + (observed.lags[(TOPIC, 3)].lag or 0)
        assert memory.history is not None
        assert set(memory.history.layout.keys()) == {(TOPIC, p) for p in range(4)}


class TestPlan:
    def _planned(self, kafka: MemoryKafka, members: int = 3, status: dict | None = None):
        ports, memory = memory_ports(kafka), PolicyMemory()
        ctx = PolicyContext("ns", "pol", "uid", 1, spec(), status or {})
        now = ports.clock.now()
        observed = observe(ctx, pods(members), memory, ports, OperatorSettings(), now)
        return ctx, observed, plan(ctx, observed, memory, OperatorSettings(), now)

    def test_a_first_plan_covers_every_partition_once(self) -> None:
        _, _, planned = self._planned(cluster(partitions=6))
        owned = sorted(p for parts in planned.assignment.values() for p in parts.get(TOPIC, []))
        assert owned == list(range(6)) and set(planned.assignment) == {"c-0", "c-1", "c-2"}
        assert planned.proposal is None and not planned.timed_out and not planned.handoff_done

    def test_load_drives_the_plan(self) -> None:
        kafka = cluster(partitions=4)
        kafka.lag(TOPIC, {0: 9000, 1: 9000, 2: 10, 3: 10})
        _, _, planned = self._planned(kafka, members=2)
        heavy = [sorted(parts[TOPIC]) for parts in planned.assignment.values()]
        assert all(len({0, 1} & set(parts)) == 1 for parts in heavy)


class TestDecide:
    def test_first_plan_then_unchanged_plan(self) -> None:
        subject = policy()
        assert subject.poll().action is Action.APPLY
        assert subject.status["epoch"] == 1 and held(subject) == list(range(6))
        assert subject.condition("Ready")["status"] == "True"
        writes = len(subject.ports.configmaps.writes)
        for _ in range(3):
            subject.ports.clock.advance(30)
            assert subject.poll().action is Action.NOOP
        assert len(subject.ports.configmaps.writes) == writes  # nothing written

    def test_a_configmap_deleted_by_hand_is_repaired_at_the_same_epoch(self) -> None:
        subject = policy()
        subject.poll()
        before = dict(subject.ports.configmaps.items)
        name = sorted(before)[0]
        del subject.ports.configmaps.items[name]
        outcome = subject.poll()
        assert outcome.action is Action.REPAIR and subject.status["epoch"] == 1
        repaired = subject.ports.configmaps.items[name]
        assert repaired["data"] == before[name]["data"]  # a new object: a new resourceVersion

    def test_cooldown_holds_a_better_plan_until_it_has_passed(self) -> None:
        kafka = cluster()
        subject = policy(kafka, rebalance={"cooldown": "5m"})
        subject.poll()
        skew(subject, kafka)
        subject.ports.clock.advance(60)
        outcome = subject.poll()
        assert outcome.action is Action.HOLD
        assert subject.condition("Ready")["reason"] == "CoolingDown"
        assert "240s left" in subject.condition("Ready")["message"]
        assert subject.status["epoch"] == 1
        subject.ports.clock.advance(241)
        assert subject.poll().action is Action.APPLY and subject.status["epoch"] == 2

    def test_a_pod_leaving_is_placed_at_once_despite_the_cooldown(self) -> None:
        subject = policy(rebalance={"cooldown": "1h"})
        subject.poll()
        subject.pods = pods(2)
        assert subject.poll().action is Action.APPLY
        assert set(subject.ports.configmaps.documents()) == {"c-0", "c-1"}
        assert held(subject) == list(range(6))

    def test_min_improvement_keeps_the_plan_for_a_small_gain(self) -> None:
        """The planner gets minImprovement too, and keeps the applied assignment."""
        kafka = cluster()
        subject = policy(kafka, rebalance={"minImprovement": 0.99})
        subject.poll()
        writes = len(subject.ports.configmaps.writes)
        skew(subject, kafka)
        assert subject.poll().action is Action.NOOP
        assert subject.status["epoch"] == 1 and len(subject.ports.configmaps.writes) == writes
        assert subject.status["maxLoadRatio"] > 1.5  # imbalanced, and left so

    def test_min_improvement_holds_a_plan_that_gains_too_little(self) -> None:
        kafka = cluster()
        subject = policy(kafka, rebalance={"minImprovement": 0.2})
        subject.poll()
        ctx = PolicyContext("ns", "pol", "uid-1", 1, subject.spec, subject.status)
        ports, settings = subject.ports, subject.settings
        now = ports.clock.now() + 60
        observed = observe(ctx, subject.pods, subject.memory, ports, settings, now)
        planned = plan(ctx, observed, subject.memory, settings, now)
        small = replace(planned, hash="other", ratio_before=2.0, ratio_after=1.8, moves=2)
        held_back = decide(observed.spec, facts(ctx, observed, small), now)
        assert held_back.action is Action.HOLD and held_back.epoch == 1
        assert "1.800 is below minImprovement 0.2" in held_back.message
        enough = replace(small, ratio_after=1.5)
        assert decide(observed.spec, facts(ctx, observed, enough), now).action is Action.APPLY

    def test_a_load_following_plan_waits_for_the_first_capacity_measurement(self) -> None:
        """weightFrom adaptive: every member has a backlog, and c-2 falls behind (3 of the 5
        records/s each of its partitions gets). Until some member is measured (3 backlogged
        intervals over at least 12 s) every weight is 1 for want of a measurement, so the plan
        that moves load off c-2 by its lag alone waits; once they are, the plan made on the
        measured weights goes out."""
        kafka = cluster(lag=0)
        subject = Policy(spec(members={"weightFrom": "adaptive"}), pods(3), memory_ports(kafka))
        assert subject.poll().action is Action.APPLY  # the first placement is never held
        slow = subject.ports.configmaps.documents()["c-2"]["partitions"][TOPIC]

        def interval(consumed: dict[int, int]) -> tuple[Action, str]:
            subject.ports.clock.advance(30)
            for p in range(6):
                kafka.log_end[(TOPIC, p)] += 150
                kafka.committed[(TOPIC, p)] = (kafka.committed[(TOPIC, p)][0] + consumed[p], "")
            return subject.poll().action, subject.condition("Ready")["reason"]

        # everyone 100 behind and keeping up: balanced (ownership is first seen at the second
        # poll, so these two intervals only settle)
        assert interval(dict.fromkeys(range(6), 50)) == (Action.NOOP, "Balanced")
        assert interval(dict.fromkeys(range(6), 150)) == (Action.NOOP, "Balanced")
        behind = {p: 90 if p in slow else 150 for p in range(6)}
        for _ in range(2):  # 1, then 2 backlogged intervals: not enough
            assert interval(behind) == (Action.HOLD, "MeasuringCapacity")
        assert "waits for the first capacity measurement" in subject.condition("Ready")["message"]
        assert subject.status["epoch"] == 1
        # the third backlogged interval: 90 s in all, measured; the plan goes out
        assert interval(behind)[0] is Action.APPLY
        assert subject.memory.capacity.capacity == {"c-0": 10.0, "c-1": 10.0, "c-2": 6.0}
        assert subject.status["epoch"] == 2
        after = subject.ports.configmaps.documents()["c-2"]["partitions"].get(TOPIC, [])
        assert len(after) < len(slow)

    def test_measuring_does_not_hold_a_placement(self) -> None:
        kafka = cluster()
        subject = policy(kafka, rebalance={"cooldown": "0s"})
        subject.poll()
        subject.pods = pods(2)
        ctx = PolicyContext("ns", "pol", "uid-1", 1, subject.spec, subject.status)
        ports, settings = subject.ports, subject.settings
        now = ports.clock.now() + 60
        observed = observe(ctx, subject.pods, subject.memory, ports, settings, now)
        planned = replace(plan(ctx, observed, subject.memory, settings, now), measuring=True)
        assert decide(observed.spec, facts(ctx, observed, planned), now).action is Action.APPLY
        # the same plan for an unchanged group is held
        subject.pods = pods(3)
        observed = observe(ctx, subject.pods, subject.memory, ports, settings, now)
        planned = replace(
            plan(ctx, observed, subject.memory, settings, now),
            hash="other",
            ratio_before=2.0,
            ratio_after=1.0,
            measuring=True,
        )
        held_back = decide(observed.spec, facts(ctx, observed, planned), now)
        assert held_back.action is Action.HOLD and held_back.reason == "MeasuringCapacity"
        assert "first capacity measurement" in held_back.message and held_back.epoch == 1

    def test_observe_mode_writes_nothing(self) -> None:
        subject = policy(rebalance={"mode": "observe"})
        assert subject.poll().action is Action.OBSERVE
        assert subject.ports.configmaps.items == {}
        assert subject.condition("Ready")["reason"] == "Observing"

    def test_no_members_keeps_the_applied_plan(self) -> None:
        subject = policy()
        subject.poll()
        items = dict(subject.ports.configmaps.items)
        subject.pods = []
        outcome = subject.poll()
        assert outcome.action is Stop.NO_MEMBERS and outcome.succeeded
        assert subject.condition("Stalled")["reason"] == "NoMembers"
        assert subject.status["members"] == 0 and subject.status["epoch"] == 1
        assert subject.ports.configmaps.items == items

    def test_protocol_mismatch_holds_new_epochs_in_assign_mode(self) -> None:
        kafka = cluster(partitions=2)
        kafka.group = {
            "group_state": "Stable",
            "protocol_type": "consumer",
            "protocol_data": "range",
            "members": [{"member_id": "plain-1", "client_id": "plain"}],
        }
        subject = policy(kafka, members=2, apply={"mode": "assign"})
        assert subject.poll().action is Action.HOLD
        stalled = subject.condition("Stalled")
        assert stalled["status"] == "True" and stalled["reason"] == "ProtocolMismatch"
        assert "'range'" in stalled["message"] and subject.ports.configmaps.items == {}
        subject.poll()
        assert [e[:2] for e in subject.events] == [("Warning", "ProtocolMismatch")]
        kafka.group = {"group_state": "Empty", "members": []}
        assert subject.poll().action is Action.APPLY
        assert subject.condition("Stalled")["status"] == "False"

    def test_decide_is_pure(self) -> None:
        """The same observations and plan give the same decision, and nothing is written."""
        kafka = cluster()
        ports, memory = memory_ports(kafka), PolicyMemory()
        ctx = PolicyContext("ns", "pol", "uid", 1, spec(), {})
        now = ports.clock.now()
        observed = observe(ctx, pods(3), memory, ports, OperatorSettings(), now)
        assert wait(observed) is None
        planned = plan(ctx, observed, memory, OperatorSettings(), now)
        first = decide(observed.spec, facts(ctx, observed, planned), now)
        assert first == decide(observed.spec, facts(ctx, observed, planned), now)
        assert first.action is Action.APPLY and first.epoch == 1
        assert ports.configmaps.writes == []


class TestApprove:
    def test_a_proposal_is_applied_only_when_its_hash_is_approved(self) -> None:
        kafka = cluster(partitions=4)
        subject = policy(kafka, members=2, rebalance={"approval": "Manual"})
        assert subject.poll().action is Action.PROPOSE
        proposal = subject.status["proposal"]
        assert proposal["epoch"] == 1 and subject.condition("Ready")["reason"] == "AwaitingApproval"
        kafka.lag(TOPIC, {0: 500})  # lag moves; the proposal on offer does not
        assert subject.poll().action is Action.PROPOSE
        assert subject.status["proposal"]["hash"] == proposal["hash"]
        assert [e[1] for e in subject.events] == ["AwaitingApproval"]
        subject.spec = {**subject.spec, "approvedPlan": "0000"}
        assert subject.poll().action is Action.PROPOSE and subject.ports.configmaps.items == {}
        subject.spec = {**subject.spec, "approvedPlan": proposal["hash"]}
        assert subject.poll().action is Action.APPLY
        hashes = {d["planHash"] for d in subject.ports.configmaps.documents().values()}
        assert hashes == {proposal["hash"]} and "proposal" not in subject.status

    def test_a_restarted_operator_offers_the_same_proposal(self) -> None:
        kafka = cluster(partitions=4)
        subject = policy(kafka, members=2, rebalance={"approval": "Manual"})
        subject.poll()
        offered = subject.status["proposal"]["hash"]
        subject.memory = PolicyMemory()  # restart: only status survives
        kafka.lag(TOPIC, {0: 7000})
        subject.poll()
        assert subject.status["proposal"]["hash"] == offered


class TestHandOver:
    def _revoking(self, timeout: str = "60s"):
        kafka = cluster(partitions=4)
        subject = policy(kafka, members=2, apply={"mode": "assign", "handoffTimeout": timeout})
        subject.poll()
        skew(subject, kafka)
        assert subject.poll().action is Action.APPLY
        docs = subject.ports.configmaps.documents()
        revoked = {(m, p) for m, d in docs.items() for p in d["revoking"].get(TOPIC, [])}
        assert revoked, "the skew moves at least one partition"
        return kafka, subject, revoked

    def test_a_revoked_partition_is_held_by_nobody_until_acknowledged(self) -> None:
        _, subject, revoked = self._revoking()
        assert not set(held(subject)) & {p for _, p in revoked}
        subject.ports.clock.advance(5)
        assert subject.poll().action is Stop.HANDING_OFF
        reconciling = subject.condition("Reconciling")
        assert reconciling["status"] == "True" and reconciling["reason"] == "HandingOff"

    def test_acknowledged_revokes_are_granted_in_the_next_epoch(self) -> None:
        kafka, subject, revoked = self._revoking()
        epoch = subject.status["epoch"]
        for member, partition in revoked:
            commit = json.dumps({"member": member, "epoch": epoch})
            kafka.committed[(TOPIC, partition)] = (0, commit)
        assert subject.poll().action is Action.APPLY
        final = subject.ports.configmaps.documents()
        assert all(not d["revoking"] for d in final.values())
        assert held(subject) == list(range(4)) and subject.status["epoch"] == epoch + 1

    def test_an_acknowledgement_for_another_epoch_does_not_count(self) -> None:
        kafka, subject, revoked = self._revoking()
        epoch = subject.status["epoch"]
        for member, partition in revoked:
            kafka.committed[(TOPIC, partition)] = (0, json.dumps({"member": member, "epoch": 1}))
        assert epoch != 1
        assert subject.poll().action is Stop.HANDING_OFF

    def test_a_timed_out_revoke_returns_to_its_owner(self) -> None:
        _, subject, revoked = self._revoking(timeout="10s")
        epoch = subject.status["epoch"]
        subject.spec = spec(
            apply={"mode": "assign", "handoffTimeout": "10s"}, rebalance={"cooldown": "1h"}
        )
        subject.ports.clock.advance(11)
        assert subject.poll().action is Action.APPLY
        settled = subject.ports.configmaps.documents()
        assert {d["epoch"] for d in settled.values()} == {epoch + 1}
        for member, partition in revoked:
            assert partition in settled[member]["partitions"][TOPIC], "back with its old owner"
        assert held(subject) == list(range(4))
        stalled = subject.condition("Stalled")
        assert stalled["status"] == "True" and stalled["reason"] == "HandoffTimedOut"
        assert ("Warning", "HandoffTimedOut") in {e[:2] for e in subject.events}
        subject.ports.clock.advance(5)
        assert subject.poll().action is Action.HOLD  # the retry waits for the cooldown
        assert subject.condition("Stalled")["message"] == stalled["message"]


class TestWhoMayConsume:
    """Assign mode never grants a partition to one member while another may still consume it:
    what a member acts on is its ConfigMap, or what the operator last wrote for it, or (after a
    restart) what its own commits say, and a pod that still runs is asked to give up first."""

    def _assigned(self, members: int = 2) -> tuple[MemoryKafka, Policy]:
        kafka = cluster(partitions=4)
        subject = policy(kafka, members=members, apply={"mode": "assign"})
        assert subject.poll().action is Action.APPLY
        return kafka, subject

    def _delete_configmap(self, subject: Policy, member: str) -> list[int]:
        name = next(
            n
            for n, body in subject.ports.configmaps.items.items()
            if json.loads(body["data"]["assignment.json"])["member"] == member
        )
        document = json.loads(subject.ports.configmaps.items.pop(name)["data"]["assignment.json"])
        return document["partitions"][TOPIC]

    def _assert_revoked_not_granted(self, subject: Policy, member: str, held: list[int]) -> None:
        docs = subject.ports.configmaps.documents()
        others = {p for m, d in docs.items() if m != member for p in d["partitions"].get(TOPIC, [])}
        assert not others & set(held), "granted while its old owner may still consume it"
        assert set(docs[member]["revoking"].get(TOPIC, [])) == set(held) - set(
            docs[member]["partitions"].get(TOPIC, [])
        )

    def test_a_configmap_deleted_by_hand_still_counts_as_what_its_member_consumes(self) -> None:
        kafka, subject = self._assigned()
        held_by_c0 = self._delete_configmap(subject, "c-0")
        skew(subject, kafka, "c-1")  # the plan now moves partitions towards c-0 ...
        kafka.lag(TOPIC, dict.fromkeys(held_by_c0, 9000))  # ... and away from it
        assert subject.poll().action is Action.APPLY
        self._assert_revoked_not_granted(subject, "c-0", held_by_c0)
        assert subject.ports.configmaps.documents()["c-0"]["revoking"], "nothing moved"

    def test_after_a_restart_the_members_own_commits_say_what_it_consumes(self) -> None:
        kafka, subject = self._assigned()
        epoch = subject.status["epoch"]
        held_by_c0 = self._delete_configmap(subject, "c-0")
        for p in held_by_c0:
            kafka.committed[(TOPIC, p)] = (0, json.dumps({"member": "c-0", "epoch": epoch}))
        subject.memory = PolicyMemory()  # the operator restarted: its memory is gone
        kafka.lag(TOPIC, dict.fromkeys(held_by_c0, 9000))
        assert subject.poll().action is Action.APPLY
        self._assert_revoked_not_granted(subject, "c-0", held_by_c0)
        assert subject.status["epoch"] > epoch

    def test_a_running_pod_that_left_the_selector_gives_up_before_anyone_gets_its_share(
        self,
    ) -> None:
        kafka, subject = self._assigned(members=3)
        gone = subject.ports.configmaps.documents()["c-2"]["partitions"][TOPIC]
        subject.pods = [
            replace(p, labels={"app": "other"}) if p.name == "c-2" else p for p in subject.pods
        ]
        assert subject.poll().action is Action.APPLY
        docs = subject.ports.configmaps.documents()
        assert docs["c-2"]["partitions"] == {} and docs["c-2"]["revoking"] == {TOPIC: gone}
        self._assert_revoked_not_granted(subject, "c-2", gone)
        subject.ports.clock.advance(5)
        assert subject.poll().action is Stop.HANDING_OFF
        epoch = subject.status["epoch"]
        for p in gone:
            kafka.committed[(TOPIC, p)] = (0, json.dumps({"member": "c-2", "epoch": epoch}))
        assert subject.poll().action is Action.APPLY
        docs = subject.ports.configmaps.documents()
        assert held(subject) == list(range(4))
        assert "c-2" not in docs or docs["c-2"]["partitions"] == {}

    def test_a_pod_that_stopped_running_needs_no_acknowledgement(self) -> None:
        _, subject = self._assigned(members=3)
        subject.pods = [p for p in subject.pods if p.name != "c-2"]
        assert subject.poll().action is Action.APPLY
        docs = subject.ports.configmaps.documents()
        assert "c-2" not in docs and held(subject) == list(range(4))
        assert all(not d["revoking"] for d in docs.values())


class TestRecreatedPolicy:
    """A policy deleted and created again is a new incarnation: its documents say so, its epochs
    start above every epoch in place or committed, and no commit of the old incarnation
    acknowledges one of its revokes."""

    def _recreate(self, subject: Policy) -> None:
        subject.uid, subject.status, subject.memory = "uid-2", {}, PolicyMemory()

    def test_documents_name_the_incarnation_and_a_new_one_takes_over_in_a_new_epoch(
        self,
    ) -> None:
        kafka = cluster()
        subject = policy(kafka)
        assert subject.poll().action is Action.APPLY
        docs = subject.ports.configmaps.documents()
        assert {d["policyUid"] for d in docs.values()} == {"uid-1"}
        self._recreate(subject)  # the old ConfigMaps are still there (not yet collected)
        assert subject.poll().action is Action.APPLY
        after = subject.ports.configmaps.documents()
        assert {(d["policyUid"], d["epoch"]) for d in after.values()} == {("uid-2", 2)}
        assert {m: d["partitions"] for m, d in after.items()} == {
            m: d["partitions"] for m, d in docs.items()
        }
        assert subject.poll().action is Action.NOOP

    def test_epochs_start_above_the_old_incarnations_commits(self) -> None:
        kafka = cluster(partitions=4)
        subject = policy(kafka, members=2, apply={"mode": "assign"})
        subject.poll()
        for p in range(4):
            kafka.committed[(TOPIC, p)] = (0, json.dumps({"member": "c-9", "epoch": 41}))
        subject.ports.configmaps.items.clear()  # collected with the old policy
        self._recreate(subject)
        assert subject.poll().action is Action.APPLY
        assert subject.status["epoch"] == 42

    def test_what_the_commits_say_is_written_down_even_when_no_better_plan_is_due(self) -> None:
        kafka = cluster(partitions=4)
        subject = policy(
            kafka, members=2, apply={"mode": "assign"}, rebalance={"minImprovement": 0.5}
        )
        subject.poll()
        held = {m: d["partitions"][TOPIC] for m, d in subject.ports.configmaps.documents().items()}
        for member, parts in held.items():
            for p in parts:
                kafka.committed[(TOPIC, p)] = (0, json.dumps({"member": member, "epoch": 1}))
        subject.ports.configmaps.items.clear()  # collected with the old policy
        self._recreate(subject)
        assert subject.poll().action is Action.APPLY
        docs = subject.ports.configmaps.documents()
        assert {m: d["partitions"][TOPIC] for m, d in docs.items()} == held
        assert {(d["policyUid"], d["epoch"]) for d in docs.values()} == {("uid-2", 2)}

    def test_an_old_incarnations_commit_acknowledges_nothing(self) -> None:
        kafka = cluster(partitions=4)
        subject = policy(kafka, members=2, apply={"mode": "assign"})
        subject.poll()
        self._recreate(subject)
        subject.poll()  # takes over: epoch 2 of uid-2
        skew(subject, kafka)
        assert subject.poll().action is Action.APPLY
        epoch = subject.status["epoch"]
        docs = subject.ports.configmaps.documents()
        revoked = [(m, p) for m, d in docs.items() for p in d["revoking"].get(TOPIC, [])]
        assert revoked
        for member, p in revoked:
            old = {"member": member, "epoch": epoch + 5, "policy": "uid-1"}
            kafka.committed[(TOPIC, p)] = (0, json.dumps(old))
        assert subject.poll().action is Stop.HANDING_OFF
        for member, p in revoked:
            new = {"member": member, "epoch": epoch, "policy": "uid-2"}
            kafka.committed[(TOPIC, p)] = (0, json.dumps(new))
        assert subject.poll().action is Action.APPLY


class TestBrokerMode:
    """apply.mode broker: the plan in place is published once per plan for the brokers'
    assignor and the group nudged; a failed publish is retried (the real-broker proof is
    tests/integration/test_broker_mode.py)."""

    @staticmethod
    def kip848(partitions: int = 4) -> MemoryKafka:
        """A KIP-848 group under the plug-in's assignor, with one member id to name."""
        kafka = cluster(partitions=partitions)
        kafka.assignor = "kafka-rebalance-plan"
        kafka.group_type = ("consumer", "Stable")
        kafka.group = {"members": [{"member_id": "uuid-a"}]}
        return kafka

    def test_each_plan_is_published_once_and_nudged(self) -> None:
        kafka = self.kip848()
        subject = policy(kafka, members=2, apply={"mode": "broker"})
        assert subject.poll().action is Action.APPLY
        ((topic, group, record),) = kafka.published
        assert (topic, group, kafka.nudges) == ("kafka-rebalance-plans", "g", ["g"])
        docs = subject.ports.configmaps.documents()
        members = {
            m: {t: list(partitions.decode_set(text, t)) for t, text in topics.items()}
            for m, topics in record["members"].items()
        }
        assert members == {m: d["partitions"] for m, d in docs.items()}
        assert record["epoch"] == subject.status["epoch"] == 1
        assert record["incarnation"] == subject.uid and kafka.signatures == [None]
        subject.ports.clock.advance(30)
        assert subject.poll().action is Action.NOOP
        assert len(kafka.published) == 1 and len(kafka.nudges) == 1
        skew(subject, kafka)
        assert subject.poll().action is Action.APPLY
        assert [r[2]["epoch"] for r in kafka.published] == [1, 2]

    def test_a_target_that_differs_while_a_recompute_is_pending_is_not_nudged_again(
        self,
    ) -> None:
        # a nudge's leave bumps the group epoch; the coordinator computes the target at a
        # member's next heartbeat: until then the old target is on its way out, not missed
        kafka = self.kip848()
        subject = policy(kafka, members=2, apply={"mode": "broker"})
        subject.poll()
        names = sorted(subject.ports.configmaps.documents())

        def group(group_epoch: int, assignment_epoch: int) -> dict[str, Any]:
            members = [
                {
                    "member_id": f"uuid-{name}",
                    "group_instance_id": name,
                    "target_assignment": {"assigned_partitions": []},  # not the plan
                }
                for name in names
            ]
            return {
                "group_epoch": group_epoch,
                "assignment_epoch": assignment_epoch,
                "members": members,
            }

        kafka.group = group(6, 5)
        subject.ports.clock.advance(30)
        subject.poll()
        assert len(kafka.nudges) == 1, "a pending recompute is waited for"
        kafka.group = group(6, 6)  # computed, and still not the plan: the nudge missed
        subject.ports.clock.advance(30)
        subject.poll()
        assert len(kafka.nudges) == 2

    def test_a_publish_that_fails_is_retried_at_the_next_poll(self) -> None:
        kafka = self.kip848()
        subject = policy(kafka, members=2, apply={"mode": "broker"})
        subject.poll()  # connects
        subject.memory.published_hash = None
        kafka.published.clear()
        original = subject.memory.observer.publish_plan

        def refuse(*args: Any) -> None:
            from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable

            raise KafkaUnavailable("publishing the plan to kafka-rebalance-plans: timed out")

        subject.memory.observer.publish_plan = refuse
        outcome = subject.poll()
        assert not outcome.succeeded
        assert subject.condition("Stalled")["reason"] == "PublishFailed"
        subject.memory.observer.publish_plan = original
        assert subject.poll().succeeded and len(kafka.published) == 1

    KEY = b"shared-plan-key-0123"

    def keyed(self, kafka: MemoryKafka, **extra: Any) -> Policy:
        subject = policy(kafka, members=2, apply={"mode": "broker"}, **extra)
        subject.settings = OperatorSettings(
            kafka_timeout_s=3, plan_keys=(self.KEY, b"old" * 6), plan_client=PLAN_CLIENT
        )
        return subject

    def test_records_are_signed_with_the_first_key_and_name_the_groups_member_ids(self) -> None:
        kafka = cluster(partitions=4)
        kafka.assignor = "kafka-rebalance-plan"
        kafka.group_type = ("consumer", "Stable")
        kafka.group = {"members": [{"member_id": "uuid-b"}, {"member_id": "uuid-a"}]}
        subject = self.keyed(kafka)
        subject.poll()
        ((_, group, record),) = kafka.published
        value = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
        assert kafka.signatures == [plan_record.sign(self.KEY, group, value)]
        assert record["memberIds"] == ["uuid-a", "uuid-b"]

    def test_a_live_plan_is_refreshed_without_a_nudge_and_when_its_members_all_changed(
        self,
    ) -> None:
        kafka = cluster(partitions=4)
        kafka.assignor = "kafka-rebalance-plan"
        kafka.group_type = ("consumer", "Stable")
        kafka.group = {"members": [{"member_id": "uuid-a"}]}
        subject = self.keyed(kafka)
        subject.poll()
        subject.ports.clock.advance(30)
        subject.poll()
        assert (len(kafka.published), len(kafka.nudges)) == (1, 1)
        subject.ports.clock.advance(subject.settings.plan_refresh_s)
        subject.poll()
        assert (len(kafka.published), len(kafka.nudges)) == (2, 1)
        assert kafka.published[0][2]["epoch"] == kafka.published[1][2]["epoch"]
        kafka.group = {"members": [{"member_id": "uuid-new"}]}  # every member restarted
        subject.ports.clock.advance(5)
        subject.poll()
        assert (len(kafka.published), len(kafka.nudges)) == (3, 1)
        assert kafka.published[2][2]["memberIds"] == ["uuid-new"]

    def test_no_publish_and_no_nudge_while_the_group_is_a_classic_group(self) -> None:
        kafka = cluster(partitions=4)
        kafka.group = {
            "group_state": "Stable",
            "protocol_type": "consumer",
            "protocol_data": "range",
            "members": [{"member_id": "m", "group_instance_id": "c-0"}],
        }
        subject = self.keyed(kafka)
        for _ in range(3):
            subject.poll()
            subject.ports.clock.advance(30)
        assert subject.condition("Stalled")["reason"] == "ProtocolMismatch"
        assert (kafka.published, kafka.nudges) == ([], [])

    def test_under_another_server_assignor_each_plan_is_published_once_never_nudged(
        self,
    ) -> None:
        kafka = cluster(partitions=4)
        kafka.assignor = "uniform"
        kafka.group_type = ("consumer", "Stable")
        kafka.group = {"members": [{"member_id": "uuid-a"}]}
        subject = self.keyed(kafka)
        subject.poll()
        assert subject.condition("Stalled")["reason"] == "ProtocolMismatch"
        for _ in range(3):
            subject.ports.clock.advance(30)
            subject.poll()
        assert (len(kafka.published), kafka.nudges) == (1, [])

    def test_leaving_broker_mode_retires_the_plan_with_a_signed_tombstone(self) -> None:
        kafka = self.kip848()
        subject = self.keyed(kafka)
        subject.poll()
        subject.spec = spec(apply={"mode": "assign"})
        subject.generation += 1
        subject.poll()
        assert kafka.published[-1][1:] == ("g", None)
        epoch = kafka.published[0][2]["epoch"]
        assert kafka.headers[-1] == {
            plan_record.SIGNATURE_HEADER: plan_record.sign_tombstone(
                self.KEY, "g", subject.uid, epoch
            ),
            plan_record.INCARNATION_HEADER: subject.uid.encode(),
            plan_record.EPOCH_HEADER: str(epoch).encode(),
        }
        assert subject.memory.published_group is None

    def test_a_failed_describe_publishes_nothing_and_says_why(self) -> None:
        kafka = self.kip848()
        kafka.membership_error = "describing group g: NodeNotReadyError"
        subject = self.keyed(kafka)
        outcome = subject.poll()
        assert not outcome.succeeded and (kafka.published, kafka.nudges) == ([], [])
        ready = subject.condition("Ready")
        assert (ready["status"], ready["reason"]) == ("False", "MembershipUnknown")
        assert "NodeNotReadyError" in ready["message"]
        assert subject.condition("Stalled")["status"] == "False"
        assert subject.ports.metrics.skipped == ["membership_unknown"]
        kafka.membership_error = None
        subject.ports.clock.advance(30)
        assert subject.poll().succeeded
        ((_, _, record),) = kafka.published
        assert record["memberIds"] == ["uuid-a"]

    def test_a_group_without_members_gets_no_record_naming_nobody(self) -> None:
        kafka = self.kip848()
        kafka.group, kafka.assignor, kafka.group_type = None, None, None  # no such group yet
        subject = self.keyed(kafka)
        assert subject.poll().succeeded
        assert (kafka.published, subject.ports.metrics.skipped) == ([], ["no_members"])


class TestApply:
    def test_a_refused_write_fails_the_poll_and_the_next_poll_finishes(self) -> None:
        subject = policy()
        subject.ports.configmaps.refuse = None
        store = subject.ports.configmaps
        original = store.upsert
        calls = []

        def refuse_second(body):
            calls.append(body["metadata"]["name"])
            if len(calls) == 2:
                raise StoreError(422, "Unprocessable")
            original(body)

        store.upsert = refuse_second
        outcome = subject.poll()
        assert outcome.action is Stop.FAILED
        assert (
            subject.condition("Stalled")["message"] == "writing ConfigMaps: HTTP 422 Unprocessable"
        )
        assert "epoch" not in subject.status and len(store.items) == 1
        store.upsert = original
        assert subject.poll().action is Action.REPAIR  # epoch 1, partly written: finished
        assert held(subject) == list(range(6)) and subject.status["epoch"] == 1
        assert {d["epoch"] for d in store.documents().values()} == {1}

    def test_plan_applied_events_are_rate_limited(self) -> None:
        kafka = cluster()
        subject = policy(kafka)
        subject.poll()
        skew(subject, kafka)
        subject.ports.clock.advance(10)
        assert subject.poll().action is Action.APPLY
        assert [e[1] for e in subject.events] == ["PlanApplied"]  # the second within 60s
        assert subject.ports.metrics.plans == 2


class TestReport:
    def test_a_quiet_poll_patches_only_the_poll_time(self) -> None:
        subject = policy()
        subject.poll()
        subject.ports.clock.advance(30)
        assert set(subject.poll().status) == {"lastPollTime", "conditions"}  # "is current"
        subject.ports.clock.advance(30)
        assert set(subject.poll().status) == {"lastPollTime"}

    def test_a_failed_poll_patches_only_conditions(self) -> None:
        kafka = cluster()
        subject = policy(kafka)
        subject.poll()
        kafka.reachable = False
        subject.ports.clock.advance(30)
        assert set(subject.poll().status) == {"conditions", "lastPollTime"}

    def test_status_metrics_and_telemetry_agree(self) -> None:
        subject = policy()
        subject.poll()
        status, metrics = subject.status, subject.ports.metrics
        assert status["strategy"] == "lag-aware" and status["members"] == 3
        assert status["totalLag"] == 600 and status["appliedPlan"]
        assert metrics.state["epoch"] == status["epoch"] == 1
        assert metrics.state["total_lag"] == 600
        assert metrics.state["max_load_ratio"] == status["maxLoadRatio"]
        assert sum(count for count, _ in metrics.state["members"].values()) == 6
        rows = subject.ports.telemetry.rows
        plan_rows = [r for r in rows if r.get("kind") == "plan"]
        partition_rows = [r for r in rows if r.get("kind") is None]
        assert [r["epoch"] for r in plan_rows] == [1]
        assert sorted(r["partition"] for r in partition_rows) == list(range(6))
        assert {r["owner"] for r in partition_rows} == {"c-0", "c-1", "c-2"}
        assert metrics.successes == 1 and metrics.polls == 1

    def test_a_stopped_poll_reports_telemetry_with_the_owners_in_place(self) -> None:
        kafka = cluster()
        subject = policy(kafka)
        subject.poll()
        subject.pods = []
        kafka.lag(TOPIC, dict.fromkeys(range(6), 120))  # every partition's row changes
        before = len(subject.ports.telemetry.rows)
        subject.poll()
        rows = subject.ports.telemetry.rows[before:]
        assert len(rows) == 6 and {r["owner"] for r in rows} == {"c-0", "c-1", "c-2"}
        assert subject.ports.metrics.successes == 1  # a stop is not a success for the gauge


@pytest.mark.parametrize("members", [1, 4])
def test_every_partition_is_owned_once_whatever_the_member_count(members: int) -> None:
    subject = policy(members=members)
    subject.poll()
    assert held(subject) == list(range(6))


class TestSafeguardsWithoutStatus:
    """Status writes that fail (an admission policy on /status, an object over the limit) must
    not undo cooldown, minImprovement or the epoch: the operator remembers them too."""

    def test_cooldown_holds_though_status_never_records_the_apply(self) -> None:
        kafka = cluster()
        subject = policy(kafka, rebalance={"cooldown": "5m"})
        subject.status_writes_fail = True
        assert subject.poll().action is Action.APPLY
        assert "lastAppliedTime" not in subject.status
        actions = []
        for heavy in ("c-0", "c-1", "c-2"):
            skew(subject, kafka, heavy)
            subject.ports.clock.advance(30)
            actions.append(subject.poll().action)
        assert Action.HOLD in actions and Action.APPLY not in actions  # a better plan waits
        assert {d["epoch"] for d in subject.ports.configmaps.documents().values()} == {1}

    def test_a_spec_change_skips_the_cooldown_once_not_every_poll(self) -> None:
        kafka = cluster()
        subject = policy(kafka, rebalance={"cooldown": "5m"})
        subject.poll()  # status written: observedGeneration 1, lastAppliedTime
        subject.status_writes_fail = True
        subject.generation = 2
        subject.spec = spec(rebalance={"cooldown": "5m", "minImprovement": 0.06})
        skew(subject, kafka)
        assert subject.poll().action is Action.APPLY  # the first plan after a spec change
        assert subject.status["observedGeneration"] == 1  # never written
        actions = []
        for heavy in ("c-0", "c-1", "c-2"):
            skew(subject, kafka, heavy)
            subject.ports.clock.advance(30)
            actions.append(subject.poll().action)
        assert Action.HOLD in actions and Action.APPLY not in actions  # a better plan waits
        assert {d["epoch"] for d in subject.ports.configmaps.documents().values()} == {2}

    def test_configmaps_deleted_by_hand_come_back_at_their_epoch_when_status_forgot_it(
        self,
    ) -> None:
        kafka = cluster()
        subject = policy(kafka)
        subject.status_writes_fail = True
        subject.poll()
        skew(subject, kafka)
        assert subject.poll().action is Action.APPLY
        before = subject.ports.configmaps.documents()
        subject.ports.configmaps.items.clear()  # deleted by hand; status never had the epoch
        assert subject.poll().action is Action.REPAIR  # what the sidecars still act on
        after = subject.ports.configmaps.documents()
        assert {d["epoch"] for d in after.values()} == {2}
        assert {m: d["partitions"] for m, d in after.items()} == {
            m: d["partitions"] for m, d in before.items()
        }

    def test_a_proposal_too_large_for_status_stays_in_memory_and_says_so(self) -> None:
        kafka = cluster(partitions=4)
        subject = policy(kafka, members=2, rebalance={"approval": "Manual"})
        subject.settings = OperatorSettings(proposal_budget_bytes=10)
        assert subject.poll().action is Action.PROPOSE
        proposal = subject.status["proposal"]
        assert "assignment" not in proposal and proposal["hash"]
        ready = subject.condition("Ready")
        assert "kept in the operator's memory only" in ready["message"]
        kafka.lag(TOPIC, {0: 900})
        assert subject.poll().action is Action.PROPOSE
        assert subject.status["proposal"]["hash"] == proposal["hash"]  # still on offer
        subject.spec = {**subject.spec, "approvedPlan": proposal["hash"]}
        assert subject.poll().action is Action.APPLY
        hashes = {d["planHash"] for d in subject.ports.configmaps.documents().values()}
        assert hashes == {proposal["hash"]}


def test_broker_mode_without_a_plan_cluster_is_stalled_before_any_kafka_call() -> None:
    kafka = TestBrokerMode.kip848()
    subject = policy(kafka, members=2, apply={"mode": "broker"})
    subject.settings = OperatorSettings(kafka_timeout_s=3)  # no plan client bootstrap_servers
    assert not subject.poll().succeeded
    stalled = subject.condition("Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "PlanClusterNotConfigured")
    assert "--plan-bootstrap-servers" in stalled["message"]
    assert (kafka.connections, kafka.published) == ([], [])
    assert subject.ports.configmaps.documents() == {}
