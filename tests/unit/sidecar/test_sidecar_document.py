"""The assignment document, the tracker that only moves forward, and the user_data encodings."""

from __future__ import annotations

import json
import logging
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_rebalance_common.wire.user_data import (
    Claim,
    decode_claim,
    decode_claim_epoch,
    decode_composed,
    encode_claim,
    encode_composed,
)
from kafka_rebalance_sidecar.document import (
    AssignmentDocument,
    AssignmentTracker,
    DocumentError,
    OfferStatus,
    parse_document,
)


def doc_text(**overrides: object) -> str:
    """A valid document as the operator writes it, with fields replaced or removed (None)."""
    raw: dict[str, object] = {
        "group": "orders-processor",
        "member": "orders-0",
        "epoch": 12,
        "partitions": {"orders": [2, 0]},
        "revoking": {},
        "planHash": "abc",
        "generatedAt": "2026-11-21T10:00:00Z",
    }
    for key, value in overrides.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return json.dumps(raw)


# -- parse_document ------------------------------------------------------------------------


def test_parse_valid_document_normalises_partitions() -> None:
    text = doc_text(partitions={"orders": [3, 1], "payments": [], "audit": [0]})
    doc = parse_document(text, group="orders-processor", member="orders-0")
    assert doc == AssignmentDocument(
        group="orders-processor",
        member="orders-0",
        epoch=12,
        partitions={"audit": (0,), "orders": (1, 3)},
        revoking={},
        plan_hash="abc",
    )
    assert list(doc.partitions) == ["audit", "orders"]
    assert doc.owned() == frozenset({("audit", 0), ("orders", 1), ("orders", 3)})
    assert doc.revoking_set() == frozenset()


def test_parse_accepts_bytes_and_revoking() -> None:
    doc = parse_document(doc_text(revoking={"orders": [5]}).encode())
    assert doc.revoking == {"orders": (5,)}
    assert doc.revoking_set() == frozenset({("orders", 5)})


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{not json", "input"),
        (b"\xff\xfe", "input"),
        ("[1, 2]", "input"),
        (doc_text(group=None), "group"),
        (doc_text(group=7), "group"),
        (doc_text(member=None), "member"),
        (doc_text(epoch=None), "epoch"),
        (doc_text(epoch="12"), "epoch"),
        (doc_text(epoch=True), "epoch"),
        (doc_text(epoch=-1), "epoch"),
        (doc_text(epoch=1.5), "epoch"),
        (doc_text(partitions=None), "partitions"),
        (doc_text(partitions=[0, 1]), "partitions"),
        (doc_text(partitions={"orders": 3}), "partitions.orders"),
        (doc_text(partitions={"orders": [0, "1"]}), "partitions.orders[1]"),
        (doc_text(partitions={"orders": [0, -2]}), "partitions.orders[1]"),
        (doc_text(partitions={"orders": [1, 1]}), "partitions.orders"),
        (doc_text(revoking={"orders": [2]}), "revoking.orders"),
        (doc_text(revoking={"orders": [True]}), "revoking.orders[0]"),
        (doc_text(planHash=5), "planHash"),
    ],
)
def test_parse_errors_name_the_field(text: str | bytes, field: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_document(text)
    assert caught.value.field == field
    message = str(caught.value)
    assert message.startswith(f"{field}: ")
    assert "\n" not in message


def test_wrong_group_or_member_is_refused() -> None:
    with pytest.raises(DocumentError, match=r"^group: 'orders-processor' is not"):
        parse_document(doc_text(), group="billing")
    with pytest.raises(DocumentError, match=r"^member: 'orders-0' is not"):
        parse_document(doc_text(), member="orders-1")


def test_error_message_stays_one_line_with_newlines_in_names() -> None:
    with pytest.raises(DocumentError) as caught:
        parse_document(doc_text(partitions={"bad\ntopic": "x"}))
    assert str(caught.value) == "partitions.bad\\ntopic: not a list (str)"


def test_version_2_documents_parse_to_the_same_content() -> None:
    text = doc_text(version=2, partitions={"orders": "0-2,5", "audit": "bits:BQ=="})
    doc = parse_document(text, group="orders-processor", member="orders-0")
    assert doc.partitions == {"audit": (0, 2), "orders": (0, 1, 2, 5)}


def test_a_newer_version_is_refused_naming_it() -> None:
    with pytest.raises(DocumentError, match=r"^version: 3 is not one this reader knows"):
        parse_document(doc_text(version=3))


# -- AssignmentTracker --------------------------------------------------------------------


def test_tracker_moves_forward_only(caplog: pytest.LogCaptureFixture) -> None:
    tracker = AssignmentTracker(group="orders-processor", member="orders-0")
    seen: list[AssignmentDocument] = []
    tracker.subscribe(seen.append)
    assert tracker.current is None

    first = tracker.offer(doc_text(epoch=3), "file")
    assert first.status is OfferStatus.ACCEPTED and first.accepted
    assert tracker.current is not None and tracker.current.epoch == 3

    with caplog.at_level(logging.WARNING, logger="kafka_rebalance_sidecar.document"):
        lower = tracker.offer(doc_text(epoch=2, partitions={"orders": [1]}), "file")
    assert lower.status is OfferStatus.REJECTED
    assert lower.reason.startswith("epoch: 2 is lower than the current 3")
    assert tracker.current.epoch == 3
    assert tracker.current.partitions == {"orders": (0, 2)}
    assert any("rejected assignment from file" in r.getMessage() for r in caplog.records)

    same = tracker.offer(doc_text(epoch=3, generatedAt="later"), "configmap")
    assert same.status is OfferStatus.UNCHANGED

    conflicting = tracker.offer(doc_text(epoch=3, partitions={"orders": [1]}), "configmap")
    assert conflicting.status is OfferStatus.REJECTED
    assert "rewritten with different content" in conflicting.reason
    assert tracker.current.partitions == {"orders": (0, 2)}

    higher = tracker.offer(doc_text(epoch=4, partitions={"orders": [1]}), "configmap")
    assert higher.accepted
    assert [d.epoch for d in seen] == [3, 4]
    assert seen[-1].partitions == {"orders": (1,)}
    assert tracker.rejected == 2


def test_tracker_sees_a_version_change_of_the_same_plan_as_unchanged() -> None:
    tracker = AssignmentTracker(group="orders-processor", member="orders-0")
    assert tracker.offer(doc_text(epoch=3, partitions={"orders": [0, 1, 2]}), "file").accepted
    again = tracker.offer(doc_text(epoch=3, version=2, partitions={"orders": "0-2"}), "file")
    assert again.status is OfferStatus.UNCHANGED
    newer = tracker.offer(doc_text(epoch=4, version=3), "file")
    assert newer.status is OfferStatus.REJECTED and newer.reason.startswith("version: 3")
    assert tracker.current is not None and tracker.current.epoch == 3


def test_tracker_keeps_last_good_on_corrupt_and_foreign_documents() -> None:
    tracker = AssignmentTracker(group="orders-processor", member="orders-0")
    calls: list[int] = []
    tracker.subscribe(lambda d: calls.append(d.epoch))
    assert tracker.offer("", "file").status is OfferStatus.REJECTED  # nothing yet, stays None
    assert tracker.current is None
    tracker.offer(doc_text(epoch=5), "file")
    for bad in ('{"group": "orders-pro', doc_text(member="orders-9", epoch=6), b"\x00\xff"):
        result = tracker.offer(bad, "file")
        assert result.status is OfferStatus.REJECTED
        assert result.current is not None and result.current.epoch == 5
    assert tracker.current.epoch == 5
    assert calls == [5]


def test_subscriber_errors_do_not_stop_others_and_unsubscribe_works() -> None:
    tracker = AssignmentTracker()
    got: list[int] = []

    def broken(_: AssignmentDocument) -> None:
        raise RuntimeError("boom")

    tracker.subscribe(broken)
    unsubscribe = tracker.subscribe(lambda d: got.append(d.epoch))
    assert tracker.offer(doc_text(epoch=1), "f").accepted
    unsubscribe()
    assert tracker.offer(doc_text(epoch=2), "f").accepted
    assert got == [1]


def test_subscriber_is_called_without_the_state_lock() -> None:
    """A subscriber may read `.current` (which takes the lock) from another thread."""
    tracker = AssignmentTracker()
    read: list[int | None] = []

    def reader(_: AssignmentDocument) -> None:
        thread = threading.Thread(
            target=lambda: read.append(tracker.current.epoch if tracker.current else None)
        )
        thread.start()
        thread.join(5)
        assert not thread.is_alive()

    tracker.subscribe(reader)
    tracker.offer(doc_text(epoch=7), "f")
    assert read == [7]


def test_concurrent_offers_notify_in_epoch_order() -> None:
    tracker = AssignmentTracker()
    seen: list[int] = []
    tracker.subscribe(lambda d: seen.append(d.epoch))
    threads = [
        threading.Thread(target=tracker.offer, args=(doc_text(epoch=e), f"t{e}")) for e in range(50)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == sorted(seen)
    assert len(set(seen)) == len(seen)
    # 49 is accepted whatever the order (nothing is higher), and it is the last one notified
    assert tracker.current is not None and tracker.current.epoch == 49
    assert seen[-1] == 49


# -- user_data ----------------------------------------------------------------------------


def test_claim_encoding_is_compact_json_text() -> None:
    doc = parse_document(doc_text(partitions={"orders": [2, 0], "audit": [1]}))
    raw = encode_claim(doc)
    assert raw == b'{"epoch":12,"partitions":{"audit":[1],"orders":[0,2]}}'
    assert encode_claim(None) == b""
    assert decode_claim(b"") is None
    assert decode_claim(None) is None


def test_claim_round_trips_as_bytes_and_as_describe_groups_text() -> None:
    doc = parse_document(doc_text(partitions={"orders": [5, 1], "payments": [0]}))
    expected = Claim(12, {"orders": (1, 5), "payments": (0,)})
    raw = encode_claim(doc)
    assert decode_claim(raw) == expected
    # describe_groups hands user_data back as str decoded with errors="backslashreplace"
    assert decode_claim(raw.decode("utf-8", errors="backslashreplace")) == expected


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x01\xff",
        b"\x00\x01\xff".decode("utf-8", errors="backslashreplace"),
        b"[1,2]",
        b'{"epoch":"3","partitions":{}}',
        b'{"epoch":-1,"partitions":{}}',
        b'{"epoch":3}',
        b'{"epoch":3,"partitions":{"t":[1,"2"]}}',
        b'{"epoch":3,"partitions":{"t":[-1]}}',
        b'{"epoch":3,"partitions":[]}',
        b"[" * 100_000,
        12,
    ],
)
def test_decode_claim_never_raises(garbage: object) -> None:
    assert decode_claim(garbage) is None  # type: ignore[arg-type]


def test_composed_epoch_round_trips() -> None:
    for epoch in (-1, 0, 17):
        for claim_epoch in (-1, 3):
            raw = encode_composed(epoch, claim_epoch)
            for form in (raw, raw.decode("utf-8", errors="backslashreplace")):
                assert decode_composed(form) == epoch
                assert decode_claim_epoch(form) == claim_epoch
    assert encode_composed(4, 2) == b'{"claimEpoch":2,"composedEpoch":4}'
    assert encode_composed(4) == b'{"claimEpoch":-1,"composedEpoch":4}'
    for other in (b"", None, b"\x00\x00", b'{"epoch":4}', b'{"composedEpoch":-2}'):
        assert decode_composed(other) is None
    # an older leader's user_data says nothing about this member's claim
    assert decode_claim_epoch(b'{"composedEpoch":4}') is None
    assert decode_claim_epoch(b'{"claimEpoch":-2,"composedEpoch":4}') is None


topics = st.text(alphabet="abcxyz-._", min_size=1, max_size=8)
partition_lists = st.lists(st.integers(0, 10_000), max_size=20, unique=True)


@given(st.integers(0, 2**40), st.dictionaries(topics, partition_lists, max_size=5))
def test_claim_round_trip_property(epoch: int, partitions: dict[str, list[int]]) -> None:
    doc = AssignmentDocument(
        group="g",
        member="m",
        epoch=epoch,
        partitions={t: tuple(sorted(p)) for t, p in sorted(partitions.items()) if p},
    )
    claim = decode_claim(encode_claim(doc))
    assert claim == Claim(epoch, dict(doc.partitions))


def test_a_new_incarnation_of_the_policy_is_accepted_whatever_its_epoch() -> None:
    tracker = AssignmentTracker(group="orders-processor", member="orders-0")
    assert tracker.offer(doc_text(epoch=9, policyUid="uid-a"), "file").accepted
    lower_same = tracker.offer(doc_text(epoch=3, policyUid="uid-a"), "file")
    assert lower_same.status is OfferStatus.REJECTED  # epochs count within an incarnation
    recreated = tracker.offer(doc_text(epoch=2, policyUid="uid-b", partitions={"orders": [5]}), "f")
    assert recreated.accepted and tracker.current is not None
    assert (tracker.current.policy_uid, tracker.current.epoch) == ("uid-b", 2)
    stale = tracker.offer(doc_text(epoch=10, policyUid="uid-a"), "file")
    assert stale.status is OfferStatus.REJECTED and "deleted incarnation" in stale.reason
    assert tracker.current.partitions == {"orders": (5,)}


def test_a_document_that_names_no_incarnation_is_judged_by_epoch_and_named_later() -> None:
    tracker = AssignmentTracker(group="orders-processor", member="orders-0")
    assert tracker.offer(doc_text(epoch=4), "file").accepted  # an operator from before policyUid
    assert tracker.offer(doc_text(epoch=3, policyUid="uid-a"), "file").status is (
        OfferStatus.REJECTED
    )
    named = tracker.offer(doc_text(epoch=4, policyUid="uid-a"), "file")
    assert named.status is OfferStatus.UNCHANGED
    assert tracker.current is not None and tracker.current.policy_uid == "uid-a"
    assert tracker.offer(doc_text(epoch=1, policyUid="uid-b"), "file").accepted
