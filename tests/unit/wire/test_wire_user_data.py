"""Assignor user_data: claims and composed epochs round-trip (as bytes and as the text
describe_groups returns), strict parsing names the field, lenient decoding never raises."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_rebalance_common import wire
from kafka_rebalance_operator import protocol
from kafka_rebalance_sidecar import assignor

topics = st.text(min_size=1, max_size=10)
partition_sets = st.frozensets(st.integers(0, 100_000), min_size=1, max_size=30).map(
    lambda s: tuple(sorted(s))
)


def test_both_ends_name_the_same_assignor() -> None:
    assert protocol.PLAN_ASSIGNOR == assignor.ASSIGNOR_NAME == wire.ASSIGNOR_NAME


@given(
    st.integers(0, 2**62),
    st.dictionaries(topics, partition_sets, max_size=5),
    st.one_of(st.just(""), st.uuids().map(str), st.text(max_size=20)),
)
def test_claims_round_trip(epoch: int, partitions: dict[str, tuple[int, ...]], policy: str) -> None:
    doc = wire.AssignmentDocument(
        "g", "m", epoch, dict(sorted(partitions.items())), policy_uid=policy
    )
    raw = wire.encode_claim(doc)
    assert (b'"policy"' in raw) == bool(policy)  # left out when the document names none
    claim = wire.Claim(epoch, doc.partitions, policy)
    assert wire.parse_claim(raw) == claim
    assert wire.decode_claim(raw.decode("utf-8", errors="backslashreplace")) == claim


@given(st.integers(-1, 2**62), st.integers(-1, 2**62))
def test_composed_round_trips(composed: int, claim_epoch: int) -> None:
    raw = wire.encode_composed(composed, claim_epoch)
    assert wire.parse_composed(raw) == wire.Composed(composed, claim_epoch)
    assert wire.decode_composed(raw) == composed
    assert wire.decode_claim_epoch(raw) == claim_epoch


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (None, "input"),
        (b"", "input"),
        (b"\xff", "input"),
        (b"[]", "input"),
        (12, "input"),
        (b'{"partitions":{}}', "epoch"),
        (b'{"epoch":-1,"partitions":{}}', "epoch"),
        (b'{"epoch":1}', "partitions"),
        (b'{"epoch":1,"partitions":[]}', "partitions"),
        (b'{"epoch":1,"partitions":{"t":3}}', "partitions.t"),
        (b'{"epoch":1,"partitions":{"t":[0,"1"]}}', "partitions.t[1]"),
        (b'{"epoch":1,"partitions":{},"policy":7}', "policy"),
    ],
)
def test_claim_errors_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(wire.UserDataError) as caught:
        wire.parse_claim(raw)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert wire.decode_claim(raw) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"claimEpoch":1}', "composedEpoch"),
        (b'{"composedEpoch":-2}', "composedEpoch"),
        (b'{"composedEpoch":"3"}', "composedEpoch"),
        (b'{"composedEpoch":3,"claimEpoch":-2}', "claimEpoch"),
        (b'{"composedEpoch":3,"claimEpoch":false}', "claimEpoch"),
    ],
)
def test_composed_errors_name_the_field(raw: bytes, field: str) -> None:
    with pytest.raises(wire.UserDataError) as caught:
        wire.parse_composed(raw)
    assert caught.value.field == field
