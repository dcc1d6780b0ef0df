"""Old-version compatibility: texts exactly as the encoders wrote them before the wire module
existed (captured at commit 74a3846 from `MemberDocument.to_json`, `runner.commit_metadata`,
`user_data.encode_claim` / `encode_composed` and `planning.plan_hash`) must keep decoding to the
same content, and the wire encoders must still write them byte for byte (a sidecar of that
release reads what the operator writes now)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
from kafka_rebalance_common import wire

# -- assignment documents (version 1, no "version" key) ------------------------------------

DOC_WITH_REVOKING = (
    '{"epoch":12,"generatedAt":"2026-11-21T10:00:00Z","group":"orders-processor",'
    '"member":"orders-0","partitions":{"audit":[5],"orders":[0,2]},'
    '"planHash":"0123456789abcdef0123","revoking":{"payments":[0,1]}}'
)
DOC_EMPTY = (
    '{"epoch":12,"generatedAt":"2026-11-21T10:00:00Z","group":"orders-processor",'
    '"member":"orders-1","partitions":{},"planHash":"0123456789abcdef0123","revoking":{}}'
)
DOC_ESCAPED = (
    '{"epoch":0,"generatedAt":"","group":"g-\\u00e9","member":"pod/\\u00fc",'
    '"partitions":{"t\\"x":[0]},"planHash":"","revoking":{}}'
)

DOCUMENTS = [
    (
        DOC_WITH_REVOKING,
        wire.AssignmentDocument(
            group="orders-processor",
            member="orders-0",
            epoch=12,
            partitions={"audit": (5,), "orders": (0, 2)},
            revoking={"payments": (0, 1)},
            plan_hash="0123456789abcdef0123",
            generated_at="2026-11-21T10:00:00Z",
        ),
    ),
    (
        DOC_EMPTY,
        wire.AssignmentDocument(
            "orders-processor",
            "orders-1",
            12,
            {},
            {},
            "0123456789abcdef0123",
            "2026-11-21T10:00:00Z",
        ),
    ),
    (DOC_ESCAPED, wire.AssignmentDocument("g-é", "pod/ü", 0, {'t"x': (0,)}, {}, "", "")),
]


@pytest.mark.parametrize(("text", "document"), DOCUMENTS)
def test_documents_of_the_previous_release_decode_and_encode_unchanged(
    text: str, document: wire.AssignmentDocument
) -> None:
    decoded = wire.decode_document(text)
    assert decoded == document
    assert decoded.generated_at == document.generated_at  # not compared by ==, still carried
    assert wire.decode_document(text.encode()) == document
    assert wire.encode_document(document) == text  # what fits is still written as version 1
    assert wire.encode_document(document, version=1) == text


# -- commit metadata -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metadata"),
    [
        ('{"member":"orders-0","epoch":12}', wire.CommitMetadata("orders-0", 12)),
        ('{"member":"\\u00fc pod","epoch":0}', wire.CommitMetadata("ü pod", 0)),
    ],
)
def test_commit_metadata_of_the_previous_release(text: str, metadata: wire.CommitMetadata) -> None:
    assert wire.decode_commit_metadata(text) == metadata
    assert wire.encode_commit_metadata(metadata) == text


# -- assignor user_data --------------------------------------------------------------------


def test_claims_of_the_previous_release() -> None:
    text = b'{"epoch":12,"partitions":{"audit":[5],"orders":[0,2]}}'
    claim = wire.Claim(12, {"audit": (5,), "orders": (0, 2)})
    assert wire.parse_claim(text) == claim
    assert wire.decode_claim(text.decode()) == claim  # as describe_groups returns it
    document = wire.decode_document(DOC_WITH_REVOKING)
    assert wire.encode_claim(document) == text
    assert wire.parse_claim(b'{"epoch":12,"partitions":{}}') == wire.Claim(12, {})
    assert wire.encode_claim(wire.decode_document(DOC_EMPTY)) == b'{"epoch":12,"partitions":{}}'
    assert wire.encode_claim(None) == b""


@pytest.mark.parametrize(
    ("raw", "composed", "claim_epoch"),
    [
        (b'{"claimEpoch":4,"composedEpoch":5}', 5, 4),
        (b'{"claimEpoch":-1,"composedEpoch":5}', 5, -1),
        (b'{"claimEpoch":-1,"composedEpoch":-1}', -1, -1),
    ],
)
def test_composed_user_data_of_the_previous_release(
    raw: bytes, composed: int, claim_epoch: int
) -> None:
    assert wire.parse_composed(raw) == wire.Composed(composed, claim_epoch)
    assert wire.decode_composed(raw) == composed and wire.decode_claim_epoch(raw) == claim_epoch
    assert wire.encode_composed(composed, claim_epoch) == raw


def test_composed_user_data_of_a_leader_before_claim_epochs() -> None:
    # leaders before a0cd2bd wrote only the composed epoch
    assert wire.parse_composed(b'{"composedEpoch":7}') == wire.Composed(7, None)
    assert wire.decode_claim_epoch(b'{"composedEpoch":7}') is None


# -- the plan hash -------------------------------------------------------------------------


def test_plan_hash_and_canonical_assignment_of_the_previous_release() -> None:
    assignment = {"b": {"t": [3, 1], "u": []}, "a": {}}
    assert wire.encode_assignment(assignment) == '{"a":{},"b":{"t":[1,3]}}'
    assert wire.assignment_hash(assignment) == "ab69722435a364b8340a"


@pytest.mark.parametrize("seed", range(20))
def test_the_canonical_text_is_the_sorted_copy_whatever_the_partitions_are_held_in(
    seed: int,
) -> None:
    """One-partition lists are written as they are (no copy); every shape still gives the text
    of the fully sorted plain copy: lists of any length and order, tuples, sets, empties."""
    rng = random.Random(seed)
    assignment: dict[str, dict[str, Any]] = {}
    for member in rng.sample([f"m{i}" for i in range(8)], rng.randint(0, 8)):
        topics: dict[str, Any] = {}
        for topic in rng.sample([f"t{i}" for i in range(6)], rng.randint(0, 6)):
            parts = rng.sample(range(20), rng.choice([0, 1, 1, 2, 5]))
            topics[topic] = rng.choice([list, tuple, set])(parts)
        assignment[member] = topics
    plain = {
        m: {t: sorted(p) for t, p in sorted(ts.items()) if p}
        for m, ts in sorted(assignment.items())
    }
    assert wire.encode_assignment(assignment) == json.dumps(
        plain, sort_keys=True, separators=(",", ":")
    )


# -- leaderTerm (an optional key: absent, the text is what earlier releases wrote) ----------


def test_a_document_without_a_leader_term_is_written_as_before() -> None:
    document = wire.decode_document(DOC_WITH_REVOKING)
    assert document.leader_term is None
    assert wire.encode_document(document) == DOC_WITH_REVOKING


def test_a_leader_term_round_trips_and_is_not_part_of_the_plan() -> None:
    document = replace(wire.decode_document(DOC_WITH_REVOKING), leader_term=7)
    text = wire.encode_document(document)
    # keys sorted: leaderTerm between group and member, nothing else changed
    assert text == DOC_WITH_REVOKING.replace('"member"', '"leaderTerm":7,"member"')
    back = wire.decode_document(text)
    assert back.leader_term == 7 and back == wire.decode_document(DOC_WITH_REVOKING)
    v2 = wire.decode_document(wire.encode_document(document, version=2))
    assert v2.leader_term == 7


@pytest.mark.parametrize("term", ['"7"', "-1", "true", "1.5"])
def test_a_malformed_leader_term_is_refused_naming_it(term: str) -> None:
    text = DOC_EMPTY[:-1] + f',"leaderTerm":{term}}}'
    with pytest.raises(wire.DocumentError, match="leaderTerm"):
        wire.decode_document(text)
