"""The kafka-python assignor, driven through kafka-python's own wire encodings (no broker: the
real-broker run is tests/integration/test_sidecar_assignor_kafka.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.structs import TopicPartition
from kafka_rebalance_sidecar.assignor import ASSIGNOR_NAME, PlanFollowingAssignor
from kafka_rebalance_sidecar.document import AssignmentTracker


def tracker_at(epoch: int, partitions: dict[str, list[int]], member: str) -> AssignmentTracker:
    tracker = AssignmentTracker(group="g", member=member)
    text = json.dumps({"group": "g", "member": member, "epoch": epoch, "partitions": partitions})
    assert tracker.offer(text, "test").accepted
    return tracker


class Cluster:
    """The one method assignors use from kafka-python's ClusterMetadata."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.counts.get(topic)
        return None if n is None else set(range(n))


def over_the_wire(member_id: str, instance_id: str | None, subscription: object) -> object:
    """A JoinGroup response member as kafka-python hands it to `assign`: the subscription
    encoded by the member and decoded by the leader."""
    raw = subscription.encode()  # type: ignore[attr-defined]
    return SimpleNamespace(
        member_id=member_id,
        group_instance_id=instance_id,
        metadata=ConsumerProtocolSubscription.decode(raw),
    )


def received(assignment: ConsumerProtocolAssignment) -> ConsumerProtocolAssignment:
    return ConsumerProtocolAssignment.decode(assignment.encode())


def test_name_and_protocols() -> None:
    tracker = AssignmentTracker()
    assert PlanFollowingAssignor(tracker).name == ASSIGNOR_NAME == "kafka-rebalance-plan"
    assert PlanFollowingAssignor(tracker).supported_protocols() == [RebalanceProtocol.COOPERATIVE]
    eager = PlanFollowingAssignor(tracker, cooperative=False)
    assert eager.supported_protocols() == [RebalanceProtocol.EAGER]


def test_metadata_carries_the_claim_and_owned_partitions() -> None:
    assignor = PlanFollowingAssignor(tracker_at(7, {"orders": [1, 0]}, "pod-0"))
    first = ConsumerProtocolSubscription.decode(assignor.metadata({"orders"}).encode())
    assert first.version == 1
    assert first.topics == ["orders"]
    assert first.user_data == b'{"epoch":7,"partitions":{"orders":[0,1]}}'
    assert first.owned_partitions == []

    # after an assignment the member reports what it owns, only for topics it still subscribes to
    assignor.on_assignment(
        received(ConsumerProtocolAssignment(1, [("orders", [3, 1]), ("old", [0])], b"")), 4
    )
    later = ConsumerProtocolSubscription.decode(assignor.metadata({"orders"}).encode())
    assert [(tp.topic, tp.partitions) for tp in later.owned_partitions] == [("orders", [1, 3])]


def test_owned_source_overrides_the_last_assignment() -> None:
    """After a lost membership kafka-python empties the subscription state: the consumer's
    view, not the stale last assignment, is what the member owns."""
    owned: set[TopicPartition] = {TopicPartition("orders", 2)}
    assignor = PlanFollowingAssignor(AssignmentTracker(), owned_source=lambda: owned)
    assignor.on_assignment(received(ConsumerProtocolAssignment(1, [("orders", [5])], b"")), 1)
    subscription = assignor.metadata({"orders"})
    assert [(tp.topic, tp.partitions) for tp in subscription.owned_partitions] == [("orders", [2])]
    assert subscription.user_data == b""  # no document yet: no claim
    owned.clear()
    assert assignor.metadata({"orders"}).owned_partitions == []


def test_assign_follows_claims_and_tags_the_composed_epoch() -> None:
    a = PlanFollowingAssignor(tracker_at(5, {"orders": [0, 1]}, "pod-a"))
    b = PlanFollowingAssignor(tracker_at(4, {"orders": [1, 2, 3]}, "pod-b"))  # one epoch behind
    c = PlanFollowingAssignor(AssignmentTracker())  # no document yet
    members = [
        over_the_wire("id-a", "pod-a", a.metadata({"orders"})),
        over_the_wire("id-b", "pod-b", b.metadata({"orders"})),
        over_the_wire("id-c", "pod-c", c.metadata({"orders", "payments"})),
    ]
    result = a.assign(Cluster({"orders": 5, "payments": 1}), members)
    assert set(result) == {"id-a", "id-b", "id-c"}
    got = {m: sorted(received(x).partitions()) for m, x in result.items()}
    assert got["id-a"] == [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    assert got["id-b"] == [TopicPartition("orders", 2), TopicPartition("orders", 3)]
    # orders-4 and payments-0 are claimed by nobody: the fallback gives them to the member with
    # the fewest partitions that subscribes (only c subscribes to payments)
    assert got["id-c"] == [TopicPartition("orders", 4), TopicPartition("payments", 0)]
    # composed from epoch 5 for everyone; each member is told which of its claims the leader saw
    assert {m: received(x).user_data for m, x in result.items()} == {
        "id-a": b'{"claimEpoch":5,"composedEpoch":5}',
        "id-b": b'{"claimEpoch":4,"composedEpoch":5}',
        "id-c": b'{"claimEpoch":-1,"composedEpoch":5}',
    }
    assert a.last_composition is not None and a.last_composition.fallback_partitions == 2

    b.on_assignment(received(result["id-b"]), 9)
    assert b.last_assignment == frozenset({("orders", 2), ("orders", 3)})
    assert b.last_composed_epoch == 5
    assert b.last_claim_epoch == 4
    assert b.last_generation == 9
    assert c.last_assignment is None and c.last_composed_epoch is None
    assert c.last_claim_epoch is None


def test_assign_withholds_a_moving_partition_when_cooperative() -> None:
    a = PlanFollowingAssignor(tracker_at(3, {"orders": [0, 1]}, "pod-a"))
    b = PlanFollowingAssignor(tracker_at(3, {"orders": [2]}, "pod-b"))
    b.on_assignment(received(ConsumerProtocolAssignment(1, [("orders", [1, 2])], b"")), 2)
    a.on_assignment(received(ConsumerProtocolAssignment(1, [("orders", [0])], b"")), 2)

    def round_() -> dict[str, list[int]]:
        members = [
            over_the_wire("id-a", "pod-a", a.metadata({"orders"})),
            over_the_wire("id-b", "pod-b", b.metadata({"orders"})),
        ]
        result = a.assign(Cluster({"orders": 3}), members)
        a.on_assignment(received(result["id-a"]), 3)
        b.on_assignment(received(result["id-b"]), 3)
        return {
            m: sorted(tp.partition for tp in received(x).partitions()) for m, x in result.items()
        }

    assert round_() == {"id-a": [0], "id-b": [2]}  # orders-1 revoked from b, not yet granted
    assert round_() == {"id-a": [0, 1], "id-b": [2]}


def test_assign_tolerates_foreign_user_data_and_unknown_topics() -> None:
    assignor = PlanFollowingAssignor(AssignmentTracker())
    stranger = ConsumerProtocolSubscription(
        version=0, topics=["orders", "nope"], user_data=b"\x00\xff"
    )
    result = assignor.assign(Cluster({"orders": 2}), [over_the_wire("x", None, stranger)])
    assert sorted(received(result["x"]).partitions()) == [
        TopicPartition("orders", 0),
        TopicPartition("orders", 1),
    ]
    assert received(result["x"]).user_data == b'{"claimEpoch":-1,"composedEpoch":-1}'


def test_assign_gives_a_huge_claim_nothing_and_ignores_owned_of_an_old_generation() -> None:
    """The leader (epoch 5) against a member claiming every partition at Long.MAX_VALUE, sent as a
    Java client would (subscription v3, with its generation), and one reporting the partitions
    it owned two generations ago."""
    leader = PlanFollowingAssignor(tracker_at(5, {"orders": [0, 1]}, "pod-a"))
    b = PlanFollowingAssignor(tracker_at(5, {"orders": [2, 3]}, "pod-b"))
    rogue = ConsumerProtocolSubscription(
        version=3,
        topics=["orders"],
        user_data=b'{"epoch":9223372036854775807,"partitions":{"orders":[0,1,2,3]}}',
        owned_partitions=[],
        generation_id=9,
    )
    stale = ConsumerProtocolSubscription(
        version=3,
        topics=["orders"],
        user_data=b.metadata({"orders"}).user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic="orders", partitions=[0])
        ],
        generation_id=7,
    )
    members = [
        over_the_wire("id-a", "pod-a", leader.metadata({"orders"})),
        over_the_wire("id-b", "pod-b", stale),
        over_the_wire("id-r", "pod-r", rogue),
    ]
    result = leader.assign(Cluster({"orders": 5}), members)
    got = {m: sorted(tp.partition for tp in received(x).partitions()) for m, x in result.items()}
    # b's stale report of partition 0 does not hold it back from a's claim
    assert got == {"id-a": [0, 1], "id-b": [2, 3], "id-r": [4]}
    assert received(result["id-r"]).user_data == b'{"claimEpoch":-1,"composedEpoch":5}'
