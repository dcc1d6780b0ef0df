"""The broker-mode plan record (`plan_record`): encoding, signing and the key file. The plug-in's
side (`PlanKeys.java`, `PlanCodec.java`) checks the same test vector and wire forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_rebalance_common.wire import partitions, plan_record


def test_the_signature_matches_the_plugins_test_vector() -> None:
    # PlanTrustTest.theSignatureMatchesTheOperatorsEncoderByteForByte holds the same value
    assert plan_record.sign(b"key-a-0123456789abcdef", "orders", b"{}") == (
        b"hmac-sha256:612b3edb81313e26d4693e52dff13d87c71f6ae6606594aae5ea48b7b54a37c5"
    )


def test_a_signature_binds_the_group_the_value_and_tombstones() -> None:
    key = b"k" * 16
    signatures = {
        plan_record.sign(key, "orders", b"{}"),
        plan_record.sign(key, "billing", b"{}"),
        plan_record.sign(key, "orders", b"{ }"),
        plan_record.sign(key, "orders", None),
        plan_record.sign(key, "orders", b""),
        plan_record.sign(b"j" * 16, "orders", b"{}"),
    }
    assert len(signatures) == 6


def test_plans_are_written_as_ranges_or_bitmaps_with_incarnation_and_member_ids() -> None:
    assignment = {"c-1": {"t": [5, 3, 4], "u": []}, "c-0": {"t": [0, 1, 2, 7]}}
    value = plan_record.encode_plan(
        "g", 4, "h", "2026-11-26T12:00:00Z", assignment, incarnation="uid", member_ids=["b", "a"]
    )
    record = json.loads(value)
    assert record == {
        "version": 2,
        "group": "g",
        "incarnation": "uid",
        "epoch": 4,
        "planHash": "h",
        "generatedAt": "2026-11-26T12:00:00Z",
        "memberIds": ["a", "b"],
        "members": {"c-0": {"t": "0-2,7"}, "c-1": {"t": "3-5"}},
    }
    assert value == plan_record.encode_plan(
        "g", 4, "h", "2026-11-26T12:00:00Z", assignment, incarnation="uid", member_ids=["a", "b"]
    )
    scattered = {"c-0": {"t": list(range(0, 4000, 3))}}
    text = json.loads(plan_record.encode_plan("g", 1, "h", "x", scattered))["members"]["c-0"]["t"]
    assert text.startswith(partitions.BITMAP_PREFIX)
    assert partitions.decode_set(text, "t") == tuple(range(0, 4000, 3))


def test_the_key_file_keeps_order_skips_comments_and_refuses_short_or_no_keys(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys"
    path.write_text("# new key first\nnew-key-0123456789\n\n  old-key-0123456789  \n")
    assert plan_record.load_keys(path) == (b"new-key-0123456789", b"old-key-0123456789")
    path.write_text("short\n")
    with pytest.raises(plan_record.PlanKeyError, match="shorter than 16"):
        plan_record.load_keys(path)
    path.write_text("# nothing\n")
    with pytest.raises(plan_record.PlanKeyError, match="holds no key"):
        plan_record.load_keys(path)
    with pytest.raises(plan_record.PlanKeyError, match="cannot read"):
        plan_record.load_keys(tmp_path / "missing")


def test_a_consumer_record_has_no_kind_and_an_unknown_kind_is_refused() -> None:
    value = plan_record.encode_plan("g", 1, "h", "x", {"c-0": {"t": [0]}})
    assert b'"kind"' not in value
    assert value == plan_record.encode_plan("g", 1, "h", "x", {"c-0": {"t": [0]}}, kind="consumer")
    with pytest.raises(ValueError, match="plan kind: one of consumer, streams, got 'share'"):
        plan_record.encode_plan("g", 1, "h", "x", {}, kind="share")


PLUGIN_VECTORS = Path(__file__).parent / "data" / "wire" / "streams_plan_vectors.json"


def test_the_plugins_streams_vectors_are_what_the_operator_encodes_and_signs() -> None:
    # StreamsPlanVectorsTest (broker-plugin) decodes and verifies the same file
    vectors = json.loads(PLUGIN_VECTORS.read_text())
    key = vectors["key"].encode()
    assert vectors["records"]
    for vector in vectors["records"]:
        given = vector["input"]
        value = plan_record.encode_plan(
            given["group"],
            given["epoch"],
            given["plan_hash"],
            given["generated_at"],
            given["tasks"],
            incarnation=given["incarnation"],
            member_ids=given["member_ids"],
            kind="streams",
        )
        assert value == vector["value"].encode(), given["group"]
        assert plan_record.sign(key, given["group"], value) == vector["signature"].encode()
