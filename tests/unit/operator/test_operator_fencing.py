"""One leader, fenced: the Lease arithmetic on the leader's own clock, writes conditioned on what
the poll read, the leadership term on every document, and the sidecar refusing an older term.

The elector runs against an in-memory Lease API (its calls and their timeouts recorded); the
real API server's part is tests/integration/test_operator_failover.py and test_leadership.py."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import pytest
import urllib3
from kafka_rebalance_common import wire
from kafka_rebalance_common.replanning import Action
from kafka_rebalance_common.wire import AssignmentDocument
from kafka_rebalance_operator import ownership
from kafka_rebalance_operator.kube import leadership
from kafka_rebalance_operator.phases.decide import Stop
from kafka_rebalance_operator.ports import AlwaysLeader
from kafka_rebalance_sidecar.document import AssignmentTracker, OfferStatus

from tests.operator_ports import MemoryKafka, Policy, memory_ports, pods

# -- the elector ----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class LeaseApi:
    """A Lease store with resourceVersions; `hang` makes every call block for its timeout (as a
    half-open connection does) and then fail as urllib3 does."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lease: Any = None
        self.version = 0
        self.timeouts: list[float | None] = []
        self.hang = False

    def _call(self, timeout: float | None) -> None:
        self.timeouts.append(timeout)
        if self.hang:
            self.clock.t += timeout if timeout is not None else 1e9
            raise urllib3.exceptions.ReadTimeoutError(None, "/lease", "read timed out")

    def _stored(self, spec: Any) -> Any:
        self.version += 1
        self.lease = SimpleNamespace(
            metadata=SimpleNamespace(resource_version=str(self.version)), spec=copy.copy(spec)
        )
        return copy.deepcopy(self.lease)

    def read_namespaced_lease(self, name: str, namespace: str, _request_timeout=None) -> Any:
        self._call(_request_timeout)
        if self.lease is None:
            from kubernetes.client.rest import ApiException

            raise ApiException(status=404)
        return copy.deepcopy(self.lease)

    def create_namespaced_lease(self, namespace: str, body: Any, _request_timeout=None) -> Any:
        self._call(_request_timeout)
        return self._stored(body.spec)

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: Any, _request_timeout=None
    ) -> Any:
        self._call(_request_timeout)
        if body.metadata.resource_version != self.lease.metadata.resource_version:
            from kubernetes.client.rest import ApiException

            raise ApiException(status=409)
        return self._stored(body.spec)


def elector(clock: Clock, api: LeaseApi, identity: str = "a") -> leadership.LeaderElector:
    config = leadership.LeaseConfig("ns", "lease", identity, 15.0, 10.0, 2.0)
    subject = leadership.LeaderElector(None, config, clock=clock)
    subject.api = api
    return subject


def test_every_lease_call_has_a_timeout_that_leaves_a_round_inside_the_renew_deadline() -> None:
    clock = Clock()
    api = LeaseApi(clock)
    subject = elector(clock, api)
    assert subject.try_acquire_or_renew() and subject.term == 0
    clock.t += 2
    assert subject.try_acquire_or_renew()
    assert api.timeouts and None not in api.timeouts
    config = subject.config
    assert all(2 * t + config.retry_period <= config.renew_deadline for t in api.timeouts)


def test_a_leader_whose_calls_hang_stops_writing_before_a_standby_may_take_over() -> None:
    clock = Clock()
    api = LeaseApi(clock)
    leader = elector(clock, api, "a")
    assert leader.try_acquire_or_renew()
    renewed, config = clock.t, leader.config
    api.hang = True  # each call now takes its whole timeout, then fails
    seen: list[tuple[float, bool]] = []
    while clock.t - renewed < config.lease_duration:
        leader.try_acquire_or_renew()
        seen.append((clock.t, leader.may_write()))
        clock.t += config.retry_period
    assert seen and all(t - renewed < config.renew_deadline + 1e-9 or not ok for t, ok in seen)
    assert not leader.may_write()


def test_the_loss_is_noticed_at_the_deadline_while_a_call_still_hangs() -> None:
    clock = Clock()
    api = LeaseApi(clock)
    leader = elector(clock, api, "a")
    assert leader.try_acquire_or_renew()
    released = threading.Event()

    def hanging(*_: Any, **__: Any) -> Any:
        released.wait()  # a half-open connection: no answer, no error
        raise urllib3.exceptions.ReadTimeoutError(None, "/lease", "read timed out")

    api.read_namespaced_lease = hanging  # type: ignore[method-assign]
    lost = threading.Event()
    stop = threading.Event()
    runner = threading.Thread(target=leader.run, args=(stop, lost.set), daemon=True)
    runner.start()
    assert not lost.wait(0.5)  # within the deadline nothing happens
    clock.t += leader.config.renew_deadline  # the deadline passes on the leader's clock
    assert lost.wait(10), "on_lost must fire although the renew round never returned"
    assert not leader.may_write()
    released.set()
    runner.join(10)


def test_the_term_is_the_lease_transition_count_and_a_takeover_raises_it() -> None:
    clock = Clock()
    api = LeaseApi(clock)
    first, second = elector(clock, api, "a"), elector(clock, api, "b")
    assert first.try_acquire_or_renew() and first.term == 0
    assert not second.try_acquire_or_renew() and second.term is None
    clock.t += 16  # a's renewals stop; b waits a whole lease of its own time
    assert second.try_acquire_or_renew() and second.term == 1
    assert not first.may_write()  # its deadline passed long ago


def test_a_refused_or_unreachable_call_is_a_failed_round_not_a_dead_thread() -> None:
    clock = Clock()
    api = LeaseApi(clock)
    subject = elector(clock, api)
    assert subject.try_acquire_or_renew()

    def refused(*_: Any, **__: Any) -> Any:
        raise urllib3.exceptions.MaxRetryError(None, "/lease", "connection refused")

    api.read_namespaced_lease = refused  # type: ignore[method-assign]
    clock.t += 1
    assert subject.try_acquire_or_renew()  # still inside the renew deadline
    clock.t += 10
    assert not subject.try_acquire_or_renew() and not subject.may_write()


# -- conditional, fenced ConfigMap writes ---------------------------------------------------


@dataclass
class Lease:
    """What the poll is told about leadership."""

    term: int | None = 3
    leading: bool = True

    def may_write(self) -> bool:
        return self.leading


TOPIC = "t"


def fenced_policy(lease: Lease, members: int = 2, mode: str = "assign") -> Policy:
    kafka = MemoryKafka(topics={TOPIC: 4})
    kafka.lag(TOPIC, dict.fromkeys(range(4), 100))
    spec = {
        "groupId": "g",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topics": [TOPIC],
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "strategy": "lag-aware",
        "load": {"model": "lag"},
        "rebalance": {"mode": "enforce", "cooldown": "0s", "minImprovement": 0.05},
        "apply": {"mode": mode},
    }
    return Policy(spec, pods(members), replace(memory_ports(kafka), leadership=lease))


def documents(subject: Policy) -> dict[str, dict[str, Any]]:
    return subject.ports.configmaps.documents()


def test_documents_carry_the_leaders_term_and_none_without_leader_election() -> None:
    subject = fenced_policy(Lease(term=3))
    assert subject.poll().action is Action.APPLY
    assert {d["leaderTerm"] for d in documents(subject).values()} == {3}
    plain = fenced_policy(Lease(term=None))
    plain.ports = replace(plain.ports, leadership=AlwaysLeader())
    assert plain.poll().action is Action.APPLY
    assert all("leaderTerm" not in d for d in documents(plain).values())


def test_a_replica_that_may_not_write_writes_nothing() -> None:
    lease = Lease(leading=False)
    subject = fenced_policy(lease)
    outcome = subject.poll()
    assert outcome.action is Stop.FAILED and subject.ports.configmaps.writes == []
    ready = subject.condition("Ready")
    assert ready["reason"] == "LeadershipLost"
    assert subject.condition("Stalled")["status"] == "False"


def test_a_configmap_changed_since_the_read_is_not_overwritten() -> None:
    subject = fenced_policy(Lease())
    assert subject.poll().action is Action.APPLY
    store = subject.ports.configmaps
    name = sorted(store.items)[0]
    racer = copy.deepcopy(store.items[name])
    marker = json.loads(racer["data"]["assignment.json"])
    marker["planHash"] = "written-by-someone-else"
    racer["data"]["assignment.json"] = json.dumps(marker)
    subject.pods = pods(3)  # a new member: a new epoch rewrites every ConfigMap

    def race(written: str) -> None:
        if written == name and store.before_write is not None:
            store.before_write = None
            store.put(racer)  # another writer, after this poll read it

    store.before_write = race
    outcome = subject.poll()
    assert outcome.action is Stop.FAILED
    assert subject.condition("Ready")["reason"] == "WriteConflict"
    assert subject.condition("Stalled")["status"] == "False"  # retried, not stuck
    assert json.loads(store.items[name]["data"]["assignment.json"])["planHash"] == (
        "written-by-someone-else"
    )
    assert subject.poll().action is Action.APPLY  # the next poll reads again and writes
    assert len(documents(subject)) == 3


def test_a_new_leader_stamps_its_term_on_every_configmap_before_granting_anything() -> None:
    lease = Lease(term=3)
    subject = fenced_policy(lease, members=2)
    assert subject.poll().action is Action.APPLY
    before = {
        n: b["metadata"]["resourceVersion"] for n, b in subject.ports.configmaps.items.items()
    }
    lease.term = 4  # a takeover: this process is the new leader (and has no memory)
    subject.memory = type(subject.memory)()
    subject.pods = pods(3)
    store = subject.ports.configmaps
    store.writes.clear()
    order: list[tuple[str, int, dict[str, Any]]] = []
    store.before_write = lambda name: order.append(
        (name, len(order), copy.deepcopy(documents(subject)))
    )
    assert subject.poll().action is Action.APPLY
    old = sorted(before)
    assert store.writes[: len(old)] == old, "the fence comes first"
    fenced_view = order[len(old) - 1][2]  # what the store held just before the last fence
    assert all(d["epoch"] == 1 for d in fenced_view.values()), "nothing granted before the fence"
    assert {d["leaderTerm"] for d in documents(subject).values()} == {4}
    assert {d["epoch"] for d in documents(subject).values()} == {2}


def test_a_write_of_the_deposed_leader_after_the_fence_is_refused() -> None:
    old_lease, new_lease = Lease(term=3), Lease(term=4)
    old = fenced_policy(old_lease)
    assert old.poll().action is Action.APPLY
    store = old.ports.configmaps
    read = {n: b["metadata"]["resourceVersion"] for n, b in store.items.items()}
    new = Policy(old.spec, pods(3), replace(old.ports, leadership=new_lease))
    assert new.poll().action is Action.APPLY  # the new leader fences and applies
    # the old leader's late write, conditioned on what it had read
    name = sorted(read)[0]
    late = copy.deepcopy(store.items[name])
    late["metadata"]["resourceVersion"] = read[name]
    with pytest.raises(Exception) as refused:
        store.upsert(late)
    assert type(refused.value).__name__ == "WriteConflict"


# -- the sidecar and the operator agree on terms --------------------------------------------


def doc(epoch: int, term: int | None, partitions: list[int], uid: str = "u") -> str:
    return wire.encode_document(
        wire.AssignmentDocument(
            "g", "m", epoch, {"t": tuple(partitions)}, {}, "h", "", uid, leader_term=term
        )
    )


def test_a_sidecar_refuses_an_older_term_at_the_same_epoch_and_follows_a_newer_one() -> None:
    tracker = AssignmentTracker(group="g", member="m")
    assert tracker.offer(doc(5, 2, [0, 1]), "cm").accepted
    older = tracker.offer(doc(5, 1, [2]), "cm")
    assert older.status is OfferStatus.REJECTED and "leaderTerm" in older.reason
    newer = tracker.offer(doc(5, 3, [2]), "cm")
    assert newer.accepted and tracker.current.owned() == {("t", 2)}
    assert tracker.offer(doc(5, 2, [0, 1]), "cm").status is OfferStatus.REJECTED
    # the same plan stamped with a newer term changes nothing but the term it remembers
    assert tracker.offer(doc(5, 4, [2]), "cm").status is OfferStatus.UNCHANGED
    assert tracker.current.leader_term == 4
    assert tracker.offer(doc(5, 3, [7]), "cm").status is OfferStatus.REJECTED
    # terms are compared at one epoch only: a Lease created again restarts its count
    assert tracker.offer(doc(6, 0, [3]), "cm").accepted


def test_a_document_without_a_term_is_judged_as_before() -> None:
    tracker = AssignmentTracker(group="g", member="m")
    assert tracker.offer(doc(5, None, [0]), "cm").accepted
    assert tracker.offer(doc(5, None, [1]), "cm").status is OfferStatus.REJECTED
    assert tracker.offer(doc(5, 1, [1]), "cm").status is OfferStatus.REJECTED  # nothing to compare
    assert tracker.offer(doc(5, 1, [0]), "cm").status is OfferStatus.UNCHANGED
    assert tracker.current.leader_term == 1


def member_doc(epoch: int, term: int | None, partitions: list[int]) -> AssignmentDocument:
    return AssignmentDocument("g", "m", epoch, {"t": partitions}, plan_hash="h", leader_term=term)


def test_the_operator_reads_a_term_rewrite_as_the_sidecar_does() -> None:
    held = member_doc(5, 2, [0])
    assert ownership.accepted_by_sidecar(member_doc(5, 3, [1]), held)
    assert not ownership.accepted_by_sidecar(member_doc(5, 1, [1]), held)
    assert not ownership.accepted_by_sidecar(member_doc(5, None, [1]), held)
    assert ownership.accepted_by_sidecar(member_doc(6, 0, [1]), held)


# -- a ConfigMap showing another incarnation's document -------------------------------------


def test_a_member_shown_another_incarnations_document_still_holds_its_partitions() -> None:
    """The sidecar takes any new policyUid (and then refuses the incarnation it replaced), so a
    member whose ConfigMap shows another incarnation's document counts as holding what that
    document gives it: nobody else is granted those partitions before it acknowledges giving
    them up, and if it never does (a detached sidecar), the policy stalls naming it."""
    kafka = MemoryKafka(topics={TOPIC: 4})
    kafka.lag(TOPIC, dict.fromkeys(range(4), 100))
    spec = {
        "groupId": "g",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topics": [TOPIC],
        "members": {"selector": {"matchLabels": {"app": "c"}}},
        "strategy": "lag-aware",
        "load": {"model": "lag"},
        "rebalance": {"mode": "enforce", "cooldown": "0s", "minImprovement": 0.05},
        "apply": {"mode": "assign", "handoffTimeout": "10s"},
    }
    subject = Policy(spec, pods(2), memory_ports(kafka))
    assert subject.poll().action is Action.APPLY
    store = subject.ports.configmaps
    docs = documents(subject)
    taken = docs["c-0"]["partitions"][TOPIC][0]  # c-0's, about to be claimed by c-1's sidecar
    name = next(
        n for n, b in store.items.items() if '"member":"c-1"' in b["data"]["assignment.json"]
    )
    foreign = copy.deepcopy(store.items[name])
    raw = json.loads(foreign["data"]["assignment.json"])
    raw.update(policyUid="uid-other", epoch=0, partitions={TOPIC: [taken]}, revoking={})
    foreign["data"]["assignment.json"] = json.dumps(raw)
    store.put(foreign)  # a lower epoch: same-incarnation rules would call it refused
    subject.poll()
    after = documents(subject)
    others = {p for m, d in after.items() if m != "c-1" for p in d["partitions"].get(TOPIC, [])}
    assert taken not in others, (
        "still given to another member while c-1's sidecar may act on the foreign document"
    )
    assert taken in after["c-1"]["revoking"].get(TOPIC, []) + after["c-1"]["partitions"].get(
        TOPIC, []
    ), "c-1 is addressed about the partition it may consume"
    subject.ports.clock.advance(11)  # c-1 never acknowledges (its sidecar refuses this uid now)
    subject.poll()
    stalled = subject.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "HandoffTimedOut"
    assert "c-1" in stalled["message"]


def test_a_listed_configmap_another_owner_holds_is_never_written_over() -> None:
    """A ConfigMap that carries the policy's labels but not its ownerReference is somebody
    else's: conditional writes go straight to a replace, so the owner is checked first."""
    subject = fenced_policy(Lease())
    assert subject.poll().action is Action.APPLY
    store = subject.ports.configmaps
    name = sorted(store.items)[0]
    foreign = copy.deepcopy(store.items[name])
    foreign["metadata"]["ownerReferences"] = []
    store.put(foreign)
    kept = copy.deepcopy(store.items[name])
    subject.pods = pods(3)
    subject.poll()
    assert subject.condition("Stalled")["reason"] == "ConfigMapConflict"
    assert name in subject.condition("Stalled")["message"]
    assert store.items[name] == kept
