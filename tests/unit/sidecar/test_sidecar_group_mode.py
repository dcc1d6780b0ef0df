"""When a group-mode sidecar must rejoin although no new document arrived, and how often it
heartbeats (pure decisions)."""

from __future__ import annotations

from kafka_rebalance_common.wire import AssignmentDocument
from kafka_rebalance_sidecar.group_mode import (
    heartbeat_interval_ms,
    new_document_reason,
    stale_reason,
)


def test_an_assignment_composed_from_the_documents_epoch_with_this_claim_is_current() -> None:
    assert stale_reason(3, composed=3, claim_seen=3) is None
    # a newer round (another member already has epoch 4): this member's document will follow
    assert stale_reason(3, composed=4, claim_seen=3) is None


def test_an_assignment_composed_from_an_older_epoch_is_stale() -> None:
    # KAFKA-12759: a static member restarting into a Stable group gets its old assignment back
    assert stale_reason(3, composed=2, claim_seen=2) == (
        "assignment composed from epoch 2, document is at 3"
    )


def test_a_round_at_the_right_epoch_that_missed_this_members_claim_is_stale() -> None:
    # The CI case: the JoinGroup was already in flight with no claim when the document arrived;
    # the other members' claims made the round epoch 1, this member got the fallback.
    assert stale_reason(1, composed=1, claim_seen=-1) == (
        "the leader saw no claim from this member, document is at 1"
    )
    assert stale_reason(5, composed=5, claim_seen=4) == (
        "the leader saw the claim of epoch 4 from this member, document is at 5"
    )


def test_a_leader_that_does_not_say_is_trusted() -> None:
    # another assignor, or an older sidecar as leader: no composed or claim epoch in user_data
    assert stale_reason(3, composed=None, claim_seen=None) is None
    assert stale_reason(3, composed=3, claim_seen=None) is None


def test_the_heartbeat_interval_is_a_fifth_of_the_session_at_most_kafkas_default() -> None:
    # a long session (static members restarting without a rebalance) keeps Kafka's 3 s, so a
    # follower notices a rebalance within 3 s, not within a fifth of 45 s (9 s)
    assert heartbeat_interval_ms(45_000) == 3_000
    assert heartbeat_interval_ms(15_000) == 3_000
    # below 15 s a fifth is shorter than the default and is kept
    assert heartbeat_interval_ms(10_000) == 2_000
    assert heartbeat_interval_ms(6_000) == 1_200
    # never below half a second
    assert heartbeat_interval_ms(1_000) == 500


def _document(epoch: int, uid: str, partitions: list[int]) -> AssignmentDocument:
    return AssignmentDocument("g", "m-0", epoch, {"t": partitions}, policy_uid=uid)


def test_a_new_policy_incarnation_asks_for_a_rejoin_even_at_the_same_epoch_and_plan() -> None:
    """The claim names its incarnation and leaders ignore another one's claims, so a member
    must rejoin with the new incarnation's claim even when nothing else changed."""
    joined = _document(1, "uid-old", [0, 1])
    assert new_document_reason(_document(1, "uid-old", [0, 1]), 1, joined) is None
    assert new_document_reason(_document(1, "uid-new", [0, 1]), 1, joined) == (
        "new policy incarnation uid-new at epoch 1"
    )
    assert new_document_reason(_document(1, "uid-old", [0]), 1, joined) == (
        "document epoch 1 re-written"
    )
    assert new_document_reason(_document(2, "uid-old", [0]), 1, joined) == "new document epoch 2"
    assert new_document_reason(_document(1, "", [0, 1]), None, None) == "new document epoch 1"
