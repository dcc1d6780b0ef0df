"""Commit metadata: the sidecar's `{"member","epoch"}` round-trips, and anything else is refused
naming the field (the operator then counts it as no acknowledgement)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_rebalance_common import wire
from kafka_rebalance_operator.handoff import acknowledged
from kafka_rebalance_sidecar.runner import commit_metadata


@given(st.text(), st.integers(0, 2**62))
def test_commit_metadata_round_trips(member: str, epoch: int) -> None:
    metadata = wire.CommitMetadata(member, epoch)
    text = wire.encode_commit_metadata(metadata)
    assert wire.decode_commit_metadata(text) == metadata
    assert commit_metadata(member, epoch) == text  # what the sidecar commits
    assert acknowledged(text, member, epoch) and not acknowledged(text, member, epoch + 1)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (None, "input"),
        ("", "input"),
        ("\x00", "input"),
        ("not json", "input"),
        ("[1]", "input"),
        ('{"epoch": 3}', "member"),
        ('{"member": 3, "epoch": 3}', "member"),
        ('{"member": "m"}', "epoch"),
        ('{"member": "m", "epoch": "3"}', "epoch"),
        ('{"member": "m", "epoch": true}', "epoch"),
        ('{"member": "m", "epoch": -1}', "epoch"),
        ('{"member": "m", "epoch": 1.0}', "epoch"),
    ],
)
def test_other_metadata_is_refused_naming_the_field(text: str | None, field: str) -> None:
    with pytest.raises(wire.MetadataError) as caught:
        wire.decode_commit_metadata(text)
    assert caught.value.field == field and str(caught.value).startswith(f"{field}: ")
    assert not acknowledged(text, "m", 0)


def test_the_c_clients_string_terminator_is_ignored() -> None:
    """confluent-kafka stores the metadata with its NUL terminator (seen on a real broker)."""
    text = commit_metadata("m", 5, "uid") + "\x00"
    assert wire.decode_commit_metadata(text) == wire.CommitMetadata("m", 5, "uid")
    assert acknowledged(text, "m", 5, "uid")


def test_later_keys_are_ignored() -> None:
    text = '{"member":"m","epoch":4,"note":"a later sidecar may add keys"}'
    assert wire.decode_commit_metadata(text) == wire.CommitMetadata("m", 4)


def test_an_incarnation_acknowledges_only_its_own_revokes() -> None:
    named = commit_metadata("m", 7, "uid-new")
    assert json.loads(named) == {"member": "m", "epoch": 7, "policy": "uid-new"}
    assert wire.decode_commit_metadata(named) == wire.CommitMetadata("m", 7, "uid-new")
    assert acknowledged(named, "m", 7, "uid-new")
    assert not acknowledged(named, "m", 7, "uid-old"), "another incarnation's commit"
    unnamed = commit_metadata("m", 7)
    assert "policy" not in json.loads(unnamed)
    assert acknowledged(unnamed, "m", 7, "uid-new")  # an older sidecar: judged by epoch
    assert not acknowledged(unnamed, "m", 8, "uid-new")
    with pytest.raises(wire.MetadataError, match=r"^policy: "):
        wire.decode_commit_metadata('{"member":"m","epoch":1,"policy":3}')
