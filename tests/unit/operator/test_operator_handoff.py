"""assign mode: revoke first, grant after the old owner's acknowledgement or the timeout."""

from __future__ import annotations

import json

from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_operator.handoff import acknowledged, first_step, pending
from kafka_rebalance_operator.kube.assignment_doc import document_text, render_documents
from kafka_rebalance_operator.lag import PartitionOffsets


def test_moves_between_present_members_are_revoked_first() -> None:
    current = render_documents(
        "g", {"a": {"t": [0, 1]}, "b": {"t": [2]}, "gone": {"t": [3]}}, 4, "h", "T"
    )
    target = {"a": {"t": [0]}, "b": {"t": [1, 2, 3]}}
    step = first_step(
        {m: d for m, d in current.items() if m != "gone"} | {"gone": current["gone"]}, target
    )
    # 1 moves a -> b: revoked from a, held by nobody; 3's owner left: granted at once
    assert step.assignment == {"a": {"t": [0]}, "b": {"t": [2, 3]}}
    assert step.revoking == {"a": {"t": [1]}}
    assert not step.complete
    # nothing moves between present members: the target as is
    settled = first_step(current, {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}})
    assert settled.complete and settled.assignment == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}


def test_acknowledgement_needs_the_member_and_at_least_the_epoch() -> None:
    assert acknowledged(json.dumps({"member": "a", "epoch": 5}), "a", 5)
    assert acknowledged(json.dumps({"member": "a", "epoch": 6}), "a", 5)
    assert not acknowledged(json.dumps({"member": "a", "epoch": 4}), "a", 5)
    assert not acknowledged(json.dumps({"member": "b", "epoch": 5}), "a", 5)
    assert not acknowledged("not json", "a", 5)
    assert not acknowledged(None, "a", 5)


def _offsets(metadata: str | None) -> PartitionOffsets:
    return PartitionOffsets(0, 10, 5, metadata)


def test_pending_until_acknowledged_or_timed_out_or_owner_gone() -> None:
    docs = render_documents(
        "g", {"a": {"t": [0]}, "b": {"t": [2]}}, 5, "h", "T", revoking=Assignment({"a": {"t": [1]}})
    )
    waiting = pending(
        docs, ["a", "b"], {("t", 1): _offsets(None)}, now=10, started_at=0, timeout_s=60
    )
    assert waiting is not None and not waiting.done and waiting.waiting == {"a": [("t", 1)]}
    ack = json.dumps({"member": "a", "epoch": 5})
    assert pending(docs, ["a", "b"], {("t", 1): _offsets(ack)}, 10, 0, 60).done
    assert pending(docs, ["a", "b"], {("t", 1): _offsets(None)}, 61, 0, 60).timed_out
    assert pending(docs, ["b"], {("t", 1): _offsets(None)}, 10, 0, 60).done  # a left
    assert (
        pending(render_documents("g", {"a": {"t": [0]}}, 5, "h", "T"), ["a"], {}, 0, 0, 1) is None
    )


def test_revoking_round_trips_through_the_configmap() -> None:
    from kafka_rebalance_operator.kube.assignment_doc import parse_document

    docs = render_documents(
        "g", {"a": {"t": [0]}}, 5, "h", "T", revoking=Assignment({"a": {"t": [3, 1]}})
    )
    assert json.loads(document_text(docs["a"]))["revoking"] == {"t": [1, 3]}
    assert parse_document(document_text(docs["a"])).revoking == {"t": [1, 3]}


def test_a_timed_out_revoke_goes_back_to_its_owner_and_nobody_else_gets_it() -> None:
    from kafka_rebalance_operator.handoff import settle_timed_out

    # a revoked t-1 and t-4 (epoch E); a acknowledged t-4 only; c left holding t-5; t-6 is new
    holdings = Assignment({"a": {"t": [0]}, "b": {"t": [2, 3]}})
    plan = Assignment({"a": {"t": [0, 3]}, "b": {"t": [1, 2, 4, 5]}, "d": {"t": [6]}})
    settled = settle_timed_out(holdings, plan, {"a": [("t", 1)]})
    # a keeps what it holds and gets back what it did not acknowledge; b keeps t-3 although
    # the plan wants it on a (no partition moves between present members in this epoch);
    # the acknowledged t-4, the orphaned t-5 and the new t-6 go where the plan puts them
    assert settled == {"a": {"t": [0, 1]}, "b": {"t": [2, 3, 4, 5]}, "d": {"t": [6]}}
    owners = [p for ts in settled.values() for ps in ts.values() for p in ps]
    assert sorted(owners) == list(range(7)), "every partition exactly once"


def test_a_timed_out_revoke_never_reaches_a_member_that_holds_other_partitions() -> None:
    from kafka_rebalance_operator.handoff import settle_timed_out

    # the plan moves everything of a's to b: only acknowledged partitions may follow it
    holdings = Assignment({"a": {"x": [0]}, "b": {"y": [0]}})
    plan = Assignment({"a": {}, "b": {"x": [0, 1, 2], "y": [0]}})
    settled = settle_timed_out(holdings, plan, {"a": [("x", 1)]})
    assert settled == {"a": {"x": [0, 1]}, "b": {"x": [2], "y": [0]}}
    # partitions of a topic that no longer exists are dropped, not handed back
    gone = settle_timed_out(
        Assignment({"a": {"old": [0]}}), Assignment({"a": {"t": [0]}}), {"a": [("old", 1)]}
    )
    assert gone == {"a": {"t": [0]}}


def test_describe_waiting_names_members_and_partitions() -> None:
    from kafka_rebalance_operator.handoff import describe_waiting

    text = describe_waiting({"b": [("t", 2)], "a": [("t", p) for p in range(12)]}, limit=3)
    assert text == "a: t-0, t-1, t-2 and 9 more; b: t-2"
