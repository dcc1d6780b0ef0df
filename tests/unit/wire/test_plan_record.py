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


def test_the_tombstone_signature_matches_the_plugins_test_vector() -> None:
    # the plug-in's tombstone test holds the same value (issue 34's contract)
    assert plan_record.sign_tombstone(b"key-a-0123456789abcdef", "orders", "3f0c1a52-uid", 7) == (
        b"hmac-sha256:53ead61ec16f6953e1fe7f3fed772f8da4582b1c9bd0596622e76e438e77b13d"
    )


def test_a_signature_binds_the_group_the_value_and_a_tombstones_incarnation_and_epoch() -> None:
    key = b"k" * 16
    signatures = {
        plan_record.sign(key, "orders", b"{}"),
        plan_record.sign(key, "billing", b"{}"),
        plan_record.sign(key, "orders", b"{ }"),
        plan_record.sign(key, "orders", b""),
        plan_record.sign(b"j" * 16, "orders", b"{}"),
        plan_record.sign_tombstone(key, "orders", "uid-1", 7),
        plan_record.sign_tombstone(key, "orders", "uid-2", 7),
        plan_record.sign_tombstone(key, "orders", "uid-1", 8),
        plan_record.sign_tombstone(key, "billing", "uid-1", 7),
        plan_record.sign_tombstone(key, "orders", "", 0),
        # framing: the group's and the incarnation's bytes cannot trade places
        plan_record.sign_tombstone(key, "ordersu", "id-1", 7),
        plan_record.sign_tombstone(b"j" * 16, "orders", "uid-1", 7),
    }
    assert len(signatures) == 12


def test_a_tombstone_is_never_signed_as_a_value_and_carries_its_incarnation_and_epoch() -> None:
    with pytest.raises(TypeError, match="sign_tombstone"):
        plan_record.sign(b"k" * 16, "orders", None)  # type: ignore[arg-type]
    assert plan_record.tombstone_headers("3f0c1a52-uid", 12) == [
        ("kafka-rebalance-incarnation", b"3f0c1a52-uid"),
        ("kafka-rebalance-epoch", b"12"),
    ]


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
    with pytest.raises(ValueError, match="plan kind: one of consumer, streams, share, got 'queue'"):
        plan_record.encode_plan("g", 1, "h", "x", {}, kind="queue")


def test_standbys_are_written_for_streams_plans_only_and_absent_unless_given() -> None:
    value = plan_record.encode_plan("g", 1, "h", "x", {"a": {"0": [0]}}, kind="streams")
    assert b"standbys" not in value  # the bytes of records before planned standbys
    with_standbys = plan_record.encode_plan(
        "g", 1, "h", "x", {"a": {"0": [0]}}, kind="streams", standbys={"a": {}, "b": {"0": [0]}}
    )
    assert json.loads(with_standbys)["standbys"] == {"b": {"0": "0"}}
    with pytest.raises(ValueError, match="only a streams plan has standbys, not a consumer plan"):
        plan_record.encode_plan("g", 1, "h", "x", {}, standbys={})


PLUGIN_VECTORS = Path(__file__).parents[2] / "data" / "wire" / "streams_plan_vectors.json"


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
            standbys=given.get("standbys"),
        )
        assert value == vector["value"].encode(), given["group"]
        assert plan_record.sign(key, given["group"], value) == vector["signature"].encode()


SHARE_VECTORS = Path(__file__).parents[2] / "data" / "wire" / "share_plan_vectors.json"


def test_the_plugins_share_vectors_are_what_the_operator_encodes_and_signs() -> None:
    # SharePlanVectorsTest (broker-plugin) decodes and verifies the same file
    vectors = json.loads(SHARE_VECTORS.read_text())
    key = vectors["key"].encode()
    assert vectors["records"]
    for vector in vectors["records"]:
        given = vector["input"]
        value = plan_record.encode_plan(
            given["group"],
            given["epoch"],
            given["plan_hash"],
            given["generated_at"],
            given["members"],
            incarnation=given["incarnation"],
            member_ids=given["member_ids"],
            kind="share",
        )
        assert value == vector["value"].encode(), given["group"]
        assert plan_record.sign(key, given["group"], value) == vector["signature"].encode()
        assert json.loads(value)["kind"] == "share"
