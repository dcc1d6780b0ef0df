"""The assignor user_data vectors both ends are held to (tests/data/wire/user_data_vectors.json):
the Java client assignor (client-assignor/, `UserDataVectorsTest`, run by its Maven build) checks
the same file, so a Java member and a Python sidecar put and read the same bytes in one group, and
either, as the group's leader, places claimed partitions the same way."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka_rebalance_common import wire
from kafka_rebalance_sidecar.assignor import PlanFollowingAssignor
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.plan_following import MemberView, compose

VECTORS = json.loads(
    (Path(__file__).parents[2] / "data" / "wire" / "user_data_vectors.json").read_text()
)


def _raw(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(entry["base64"]) if "base64" in entry else entry["text"].encode()


@pytest.mark.parametrize("entry", VECTORS["encode_claim"])
def test_claims_encode_to_the_shared_bytes(entry: dict[str, Any]) -> None:
    source = entry["document"]
    document = (
        None
        if source is None
        else wire.AssignmentDocument(
            "g",
            "m",
            source["epoch"],
            wire.partitions.normalise(source["partitions"]),
            policy_uid=source.get("policyUid", ""),
        )
    )
    assert wire.encode_claim(document) == entry["text"].encode("ascii")


@pytest.mark.parametrize("entry", VECTORS["encode_composed"])
def test_composed_encodes_to_the_shared_bytes(entry: dict[str, Any]) -> None:
    encoded = wire.encode_composed(entry["composedEpoch"], entry["claimEpoch"])
    assert encoded == entry["text"].encode("ascii")


@pytest.mark.parametrize("entry", VECTORS["decode_claim"])
def test_claims_decode_to_the_shared_values(entry: dict[str, Any]) -> None:
    partitions = {t: tuple(p) for t, p in entry["partitions"].items()}
    expected = wire.Claim(entry["epoch"], partitions, entry.get("policy", ""))
    assert wire.parse_claim(_raw(entry)) == expected


@pytest.mark.parametrize("entry", VECTORS["decode_composed"])
def test_composed_decodes_to_the_shared_values(entry: dict[str, Any]) -> None:
    expected = wire.Composed(entry["composedEpoch"], entry["claimEpoch"])
    assert wire.parse_composed(_raw(entry)) == expected


@pytest.mark.parametrize("entry", VECTORS["reject_claim"])
def test_bad_claims_are_refused_naming_the_shared_field(entry: dict[str, Any]) -> None:
    with pytest.raises(wire.UserDataError) as caught:
        wire.parse_claim(_raw(entry))
    assert caught.value.field == entry["field"]
    assert wire.decode_claim(_raw(entry)) is None


@pytest.mark.parametrize("entry", VECTORS["reject_composed"])
def test_bad_composed_are_refused_naming_the_shared_field(entry: dict[str, Any]) -> None:
    with pytest.raises(wire.UserDataError) as caught:
        wire.parse_composed(_raw(entry))
    assert caught.value.field == entry["field"]


@pytest.mark.parametrize("case", VECTORS["compose"], ids=lambda c: c["about"][:40])
def test_a_sidecar_leader_composes_the_shared_assignment(case: dict[str, Any]) -> None:
    views = [
        MemberView(
            m["id"],
            m["instance"],
            tuple(m["topics"]),
            wire.decode_claim(m["claim"].encode()),
            m["owned"],
        )
        for m in case["members"]
    ]
    composition = compose(views, case["partitions"], cooperative=True)
    assert composition.assignment == case["assignment"]
    assert [list(w) for w in composition.withheld] == case["withheld"]
    assert composition.ignored_claims == case["ignored"]
    seen = {v.member_id: v.claim.epoch if v.claim else wire.NO_EPOCH for v in views}
    assert {
        m: wire.encode_composed(composition.epoch, seen[m]).decode() for m in composition.assignment
    } == case["userData"]


class _Cluster:
    """The one method assignors use from kafka-python's ClusterMetadata."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.counts.get(topic)
        return None if n is None else set(range(n))


@pytest.mark.parametrize("case", VECTORS["lead"], ids=lambda c: c["about"][:40])
def test_a_sidecar_leader_trusts_claims_as_the_shared_vectors_say(case: dict[str, Any]) -> None:
    """The whole leader, over kafka-python's own encodings: its document at `leaderEpoch` (of
    incarnation `leaderPolicy` when the case names one), each
    member's subscription v3 with its generation, as a Java client sends it."""
    tracker = AssignmentTracker(group="g", member="pod-leader")
    document = {
        "group": "g",
        "member": "pod-leader",
        "epoch": case["leaderEpoch"],
        "partitions": {},
    }
    if "leaderPolicy" in case:
        document["policyUid"] = case["leaderPolicy"]
    assert tracker.offer(json.dumps(document), "test").accepted
    leader = PlanFollowingAssignor(tracker)
    members = []
    for m in case["members"]:
        subscription = ConsumerProtocolSubscription(
            version=3,
            topics=m["topics"],
            user_data=m["claim"].encode(),
            owned_partitions=[
                ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
                for t, ps in sorted(m["owned"].items())
            ],
            generation_id=m["generation"],
        )
        members.append(
            SimpleNamespace(
                member_id=m["id"],
                group_instance_id=m["instance"],
                metadata=ConsumerProtocolSubscription.decode(subscription.encode()),
            )
        )
    result = leader.assign(_Cluster(case["partitions"]), members)
    assignment = {
        member_id: {topic: sorted(parts) for topic, parts in a.assigned_partitions}
        for member_id, a in result.items()
    }
    assert assignment == case["assignment"]
    assert {m: a.user_data.decode() for m, a in result.items()} == case["userData"]
    assert leader.last_composition is not None
    assert [list(w) for w in leader.last_composition.withheld] == case["withheld"]
