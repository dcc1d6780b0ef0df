"""The plan-following assignor in a real consumer group on a real Kafka 4.x broker.

Three kafka-python consumers (static members, each on its own thread, as the sidecar runs them)
join with `PlanFollowingAssignor`. Their assignment documents are offered to their trackers;
the group must end up exactly as the documents say. Then a new epoch moves a partition: a rejoin
(the sidecar's only hook, `request_rejoin`) must move it; cooperatively in two rounds, never
granted while another member still owns it, or eagerly in one. Finally describe_groups must show
the assignor by name and the claims as readable JSON text. A last test has a fourth member claim
every partition at Long.MAX_VALUE: the sidecar leader gives it nothing. Another has a member
still follow a deleted policy incarnation's document: it gets nothing beyond the new plan.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import CommitFailedError
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.ledger import ledger_path, reconcile
from kafka_rebalance_sidecar.assignor import ASSIGNOR_NAME, PlanFollowingAssignor
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.plan_following import Composition

pytestmark = pytest.mark.integration

PARTITIONS = 4
PODS = ("pod-0", "pod-1", "pod-2")
EPOCH_1 = {"pod-0": [0, 1], "pod-1": [2], "pod-2": [3]}
EPOCH_2 = {"pod-0": [0], "pod-1": [2], "pod-2": [1, 3]}  # partition 1 moves pod-0 -> pod-2


@dataclass
class Member:
    """One consumer on its own thread; the test only talks to it through thread-safe fields."""

    pod: str
    tracker: AssignmentTracker
    assignor: PlanFollowingAssignor
    rejoin: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    assigned: frozenset[int] = frozenset()
    history: list[frozenset[int]] = field(default_factory=list)  # every distinct assignment
    # made as the leader: (what each member said it owned, by instance id; the composition)
    compositions: list[tuple[dict[str, set[int]], Composition]] = field(default_factory=list)
    error: BaseException | None = None

    def snapshot(self) -> frozenset[int]:
        with self.lock:
            return self.assigned


def document(
    group: str, pod: str, epoch: int, partitions: list[int], topic: str, policy_uid: str = ""
) -> str:
    return json.dumps(
        {
            "group": group,
            "member": pod,
            "epoch": epoch,
            "partitions": {topic: partitions},
            "revoking": {},
            "planHash": f"hash-{epoch}",
            **({"policyUid": policy_uid} if policy_uid else {}),
        }
    )


def record_compositions(member: Member) -> None:
    """Keep every composition this member makes as leader (the assignor keeps only the last)."""
    assign = member.assignor.assign

    def recording(cluster, members):  # type: ignore[no-untyped-def]
        result = assign(cluster, members)
        composition = member.assignor.last_composition
        assert composition is not None
        owned = {
            m.member_id: {p for tp in m.metadata.owned_partitions for p in tp.partitions}
            for m in members
        }
        with member.lock:
            member.compositions.append((owned, composition))
        return result

    member.assignor.assign = recording  # type: ignore[method-assign]


def run_consumer(
    member: Member,
    bootstrap: str,
    group: str,
    topic: str,
    stop: threading.Event,
    ledger: Path | None = None,
):
    """Poll until `stop`. With `ledger`, every record goes to the project's ledger
    (`<ledger>/<pod>.jsonl`, labelled with the group generation) before its offset is committed,
    and a partition new to the group is read from its start."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_instance_id=member.pod,
        client_id=member.pod,
        partition_assignment_strategy=[member.assignor],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
    )
    member.assignor.owned_source = consumer.assignment
    next_repair = 0.0
    try:
        while not stop.is_set():
            if member.rejoin.is_set():
                member.rejoin.clear()
                consumer._coordinator.request_rejoin()
            elif member.assignor.last_composed_epoch == -1 and time.monotonic() > next_repair:
                # the sidecar's repair of a first join whose leader had no topic metadata yet
                # (its GroupRunner rejoins on a stale composition; these raw consumers must too)
                next_repair = time.monotonic() + 2.0
                consumer._coordinator.request_rejoin()
            batches = consumer.poll(timeout_ms=100)
            if ledger is not None and batches:
                write_ledger(ledger, member, [r for rs in batches.values() for r in rs])
                with contextlib.suppress(CommitFailedError):  # a rebalance: read again, never lost
                    consumer.commit()
            now = frozenset(tp.partition for tp in consumer.assignment())
            with member.lock:
                if now != member.assigned or not member.history:
                    member.history.append(now)
                member.assigned = now
    except BaseException as error:  # surfaced by the test, not lost in the thread
        member.error = error
    finally:
        consumer.close(autocommit=False)


def write_ledger(ledger: Path, member: Member, records: list[Any]) -> None:
    """The ledger's line format (kafka_rebalance_dev.demo.ledger), written before the commit."""
    now, generation = int(time.time() * 1000), member.assignor.last_generation or -1
    lines = "".join(
        json.dumps(
            {
                "t": r.topic,
                "p": r.partition,
                "o": r.offset,
                "m": member.pod,
                "e": generation,
                "ts": now,
            },
            separators=(",", ":"),
        )
        + "\n"
        for r in records
    )
    with open(ledger_path(ledger, member.pod), "a", encoding="utf-8") as out:
        out.write(lines)


def wait_until(condition: Callable[[], bool], members: list[Member], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for member in members:
            if member.error is not None:
                raise AssertionError(f"{member.pod} failed") from member.error
        if condition():
            return
        time.sleep(0.1)
    states = {m.pod: sorted(m.snapshot()) for m in members}
    raise AssertionError(f"timed out; assignments now {states}")


def assignments(members: list[Member]) -> dict[str, list[int]]:
    return {m.pod: sorted(m.snapshot()) for m in members}


@pytest.fixture(params=[True, False], ids=["cooperative", "eager"])
def group_of_three(
    kafka: str, request: pytest.FixtureRequest
) -> Iterator[tuple[str, str, list[Member]]]:
    cooperative: bool = request.param
    topic = f"plan-following-{uuid.uuid4().hex[:8]}"
    group = f"plan-following-group-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka, client_id="plan-following-admin")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    members = []
    for pod in PODS:
        tracker = AssignmentTracker(group=group, member=pod)
        assert tracker.offer(document(group, pod, 1, EPOCH_1[pod], topic), "test").accepted
        member = Member(pod, tracker, PlanFollowingAssignor(tracker, cooperative=cooperative))
        record_compositions(member)
        members.append(member)
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=run_consumer, args=(m, kafka, group, topic, stop), name=m.pod, daemon=True
        )
        for m in members
    ]
    for thread in threads:
        thread.start()
    try:
        yield group, topic, members
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)


def test_group_follows_the_documents_and_moves_the_partition(
    kafka: str, group_of_three: tuple[str, str, list[Member]]
) -> None:
    group, topic, members = group_of_three
    cooperative = members[0].assignor.cooperative

    wait_until(lambda: assignments(members) == EPOCH_1, members, timeout=30)
    for member in members:
        assert member.assignor.last_assignment == frozenset((topic, p) for p in EPOCH_1[member.pod])
        assert member.assignor.last_composed_epoch == 1
    for member in members:
        with member.lock:
            member.history = [member.assigned]
            member.compositions.clear()

    # epoch 2: partition 1 moves from pod-0 to pod-2; every sidecar rejoins on its new epoch
    for member in members:
        text = document(group, member.pod, 2, EPOCH_2[member.pod], topic)
        assert member.tracker.offer(text, "test").accepted
        member.rejoin.set()
    wait_until(lambda: assignments(members) == EPOCH_2, members, timeout=30)
    for member in members:
        assert member.assignor.last_composed_epoch == 2

    compositions = [entry for m in members for entry in m.compositions]
    assert compositions
    withheld = [c for _, c in compositions if c.withheld]
    if cooperative:
        # round 1 withheld partition 1 (pod-0 still owned it), a later round granted it to
        # pod-2; no composition ever granted a partition that another member still owned
        for owned, composition in compositions:
            for member_id, topics in composition.assignment.items():
                for partition in topics.get(topic, []):
                    others = [o for o, ps in owned.items() if o != member_id and partition in ps]
                    assert not others, f"{partition} granted to {member_id} while {others} own it"
        assert withheld, "the move should take a cooperative round with the partition withheld"
        assert all(c.withheld == ((topic, 1),) for c in withheld)
    else:
        # eager: every member revoked everything before joining, so one round moves it
        assert not withheld
    by_pod = {m.pod: m for m in members}
    assert all(1 not in a for a in by_pod["pod-1"].history)
    assert by_pod["pod-0"].history[-1] == frozenset({0})
    assert by_pod["pod-2"].history[-1] == frozenset({1, 3})

    admin = RetryingAdmin(bootstrap_servers=kafka, client_id="plan-following-describe")
    try:
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    assert described["protocol_data"] == ASSIGNOR_NAME
    assert described["group_state"] == "Stable"
    seen = {}
    for entry in described["members"]:
        claim = json.loads(entry["member_metadata"]["user_data"])
        composed = json.loads(entry["member_assignment"]["user_data"])
        seen[entry["group_instance_id"]] = (claim, composed)
    assert seen == {
        pod: (
            {"epoch": 2, "partitions": {topic: EPOCH_2[pod]}},
            {"claimEpoch": 2, "composedEpoch": 2},
        )
        for pod in PODS
    }


HUGE_EPOCH = 2**63 - 1  # Long.MAX_VALUE, the largest epoch a Java client can send


class RogueAssignor(PlanFollowingAssignor):
    """A member that lies: its subscription claims every partition at HUGE_EPOCH, whatever its
    document says."""

    def __init__(self, tracker: AssignmentTracker, topic: str) -> None:
        super().__init__(tracker)
        self.topic = topic

    def metadata(self, topics: Any) -> ConsumerProtocolSubscription:
        honest = super().metadata(topics)
        claim = {"epoch": HUGE_EPOCH, "partitions": {self.topic: list(range(PARTITIONS))}}
        return ConsumerProtocolSubscription(
            version=honest.version,
            topics=honest.topics,
            user_data=json.dumps(claim, separators=(",", ":")).encode(),
            owned_partitions=honest.owned_partitions,
        )


def test_a_member_claiming_a_huge_epoch_gets_nothing_from_a_sidecar_leader(kafka: str) -> None:
    """Issue 34, the sidecar's end: three honest sidecar members (one of them leads) follow
    their documents; a fourth joins claiming every partition at Long.MAX_VALUE. The leader
    trusts no claim above its own document's epoch, so the rogue gets no partition, ever, and
    the honest members keep theirs."""
    topic = f"plan-following-{uuid.uuid4().hex[:8]}"
    group = f"plan-following-group-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka, client_id="plan-following-admin")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    honest = []
    for pod in PODS:
        tracker = AssignmentTracker(group=group, member=pod)
        assert tracker.offer(document(group, pod, 1, EPOCH_1[pod], topic), "test").accepted
        member = Member(pod, tracker, PlanFollowingAssignor(tracker))
        record_compositions(member)
        honest.append(member)
    rogue_tracker = AssignmentTracker(group=group, member="pod-3")
    rogue = Member("pod-3", rogue_tracker, RogueAssignor(rogue_tracker, topic))
    stop = threading.Event()

    def start(member: Member) -> threading.Thread:
        thread = threading.Thread(
            target=run_consumer, args=(member, kafka, group, topic, stop), name=member.pod
        )
        thread.daemon = True
        thread.start()
        return thread

    threads = [start(m) for m in honest]
    try:
        wait_until(lambda: assignments(honest) == EPOCH_1, honest, timeout=30)
        threads.append(start(rogue))
        everyone = [*honest, rogue]
        # the rogue is in the group once a leader composed for four members
        wait_until(
            lambda: any(len(c.assignment) == 4 for m in honest for _, c in m.compositions),
            everyone,
            timeout=30,
        )
        time.sleep(3)  # a few more heartbeats: nothing moves
        assert assignments(honest) == EPOCH_1
        assert all(not a for a in rogue.history), rogue.history
        led = [c for m in honest for _, c in m.compositions if len(c.assignment) == 4]
        assert all(c.epoch == 1 and not c.assignment[_id(c, rogue)] for c in led), led
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)


def _id(composition: Composition, rogue: Member) -> str:
    """The rogue's member id in a composition (kafka-python's member ids start with the
    client id, the pod name)."""
    return next(m for m in composition.assignment if m.startswith(rogue.pod))


class Producing:
    """Records into every partition from a thread, about `rate` per partition per second, until
    stopped; then `produced` is (topic, partition) -> end offset (offsets 0..end-1 written)."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 10.0) -> None:
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self.topic, self.rate = topic, rate
        self.stop = threading.Event()
        self.futures: list[Any] = []
        self.thread = threading.Thread(target=self._run, name="producing", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(1 / self.rate):
            for partition in range(PARTITIONS):
                self.futures.append(self.producer.send(self.topic, b"x", partition=partition))

    def finish(self) -> dict[tuple[str, int], int]:
        self.stop.set()
        self.thread.join(10)
        self.producer.flush(30)
        self.producer.close(10)
        ends: dict[tuple[str, int], int] = {}
        for future in self.futures:
            meta = future.get(timeout=30)
            key = (meta.topic, meta.partition)
            ends[key] = max(ends.get(key, 0), meta.offset + 1)
        return ends


def test_a_member_on_a_deleted_incarnation_gets_nothing_beyond_the_new_plan_from_a_sidecar_leader(
    kafka: str, tmp_path: Path
) -> None:
    """Issue 34, the sidecar's end: the policy was deleted and created again (a new `policyUid`).
    pod-1 and pod-2 follow the new incarnation's documents at epoch 2 (pod-0's share, partitions
    0 and 1, is unclaimed while pod-0 is away); pod-0 joins still holding the old incarnation's
    document, also at epoch 2, claiming every partition. It is first in the tie order (the
    lowest instance id), so only the incarnation tells its claim apart: the leader ignores it
    and pod-0 never owns partition 2 or 3. Then pod-0 reads the new incarnation's document and
    the group follows the new plan exactly. Every record is counted: lost 0, concurrent owners
    0."""
    topic = f"plan-following-{uuid.uuid4().hex[:8]}"
    group = f"plan-following-group-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=kafka, client_id="plan-following-admin")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    new_uid, old_uid = str(uuid.uuid4()), str(uuid.uuid4())
    plan = {"pod-0": [0, 1], "pod-1": [2], "pod-2": [3]}
    members = []
    for pod in PODS:
        tracker = AssignmentTracker(group=group, member=pod)
        text = (
            document(group, pod, 2, list(range(PARTITIONS)), topic, old_uid)
            if pod == "pod-0"
            else document(group, pod, 2, plan[pod], topic, new_uid)
        )
        assert tracker.offer(text, "test").accepted
        member = Member(pod, tracker, PlanFollowingAssignor(tracker))
        record_compositions(member)
        members.append(member)
    stale, honest = members[0], members[1:]
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    stop = threading.Event()
    producing = Producing(kafka, topic)

    def start(member: Member) -> threading.Thread:
        thread = threading.Thread(
            target=run_consumer,
            args=(member, kafka, group, topic, stop, ledger),
            name=member.pod,
            daemon=True,
        )
        thread.start()
        return thread

    threads = [start(m) for m in honest]
    try:
        wait_until(
            lambda: set().union(*(m.snapshot() for m in honest)) == set(range(PARTITIONS)),
            honest,
            timeout=30,
        )
        threads.append(start(stale))
        wait_until(
            lambda: any(len(c.assignment) == 3 for m in honest for _, c in m.compositions),
            members,
            timeout=30,
        )
        time.sleep(4)  # a few more heartbeats and polls
        beyond = [sorted(a - set(plan["pod-0"])) for a in stale.history if a - set(plan["pod-0"])]
        assert beyond == [], f"pod-0 owned partitions beyond its plan {plan['pod-0']}: {beyond}"
        led = [c for m in honest for _, c in m.compositions if len(c.assignment) == 3]
        # only the new incarnation's claims placed partitions (2 and 3); pod-0's went to none
        assert all(c.epoch == 2 and c.claimed_partitions == 2 for c in led), led
        assert stale.assignor.last_claim_epoch == -1  # the leader told pod-0 it saw no claim

        # pod-0's document becomes the new incarnation's; the sidecar rejoins for it
        renewed = document(group, "pod-0", 2, [0, 1], topic, new_uid)
        assert stale.tracker.offer(renewed, "test").accepted
        stale.rejoin.set()
        wait_until(lambda: assignments(members) == plan, members, timeout=30)
        wait_until(lambda: stale.assignor.last_claim_epoch == 2, members, timeout=30)
        produced = producing.finish()
        wanted = {(t, p, o) for (t, p), end in produced.items() for o in range(end)}

        def drained() -> bool:
            seen = {
                (e["t"], e["p"], e["o"])
                for f in ledger.glob("*.jsonl")
                for e in map(json.loads, f.read_text().splitlines())
            }
            return wanted <= seen

        wait_until(drained, members, timeout=30)
    finally:
        producing.stop.set()
        with contextlib.suppress(Exception):  # finish() closed it already, unless it failed first
            producing.producer.close(5)
        stop.set()
        for thread in threads:
            thread.join(15)
    report = reconcile(produced, ledger)
    print(
        f"\n{report.summary()}; per member {report.per_member}; compositions with pod-0: {len(led)}"
    )
    assert report.lost == 0, report.lost_examples
    assert report.overlaps == (), report.overlaps[:5]
    assert report.per_member.get("pod-0"), report.per_member
