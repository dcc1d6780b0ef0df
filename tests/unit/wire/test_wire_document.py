"""The assignment document's wire format: both versions round-trip, version 2 keeps a member
owning 500k partitions far below a ConfigMap's 1 MiB, and bad input is refused naming the field."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_rebalance_common import wire
from kafka_rebalance_common.wire import document as wire_document
from kafka_rebalance_common.wire import partitions as codec

topics = st.text(min_size=1, max_size=12)
partition_sets = st.frozensets(st.integers(0, 5_000), min_size=1, max_size=60).map(
    lambda s: tuple(sorted(s))
)
partition_maps = st.dictionaries(topics, partition_sets, max_size=6)


def document(
    partitions: wire.Partitions, revoking: wire.Partitions | None = None
) -> wire.AssignmentDocument:
    return wire.AssignmentDocument(
        group="orders-processor",
        member="orders-0",
        epoch=12,
        partitions=partitions,
        revoking=revoking or {},
        plan_hash="0123456789abcdef0123",
        generated_at="2026-11-23T22:00:00+00:00",
    )


@given(partition_maps, partition_maps, st.sampled_from([1, 2]))
def test_both_versions_round_trip(
    partitions: wire.Partitions, revoking: wire.Partitions, version: int
) -> None:
    revoking = {
        t: tuple(p for p in parts if p not in partitions.get(t, ()))
        for t, parts in revoking.items()
    }
    doc = document(codec.normalise(partitions), codec.normalise(revoking))
    text = wire.encode_document(doc, version=version)
    back = wire.decode_document(text)
    assert back == doc and back.generated_at == doc.generated_at
    assert ('"version":2' in text) == (version == 2)
    assert text.isascii()


@given(partition_sets)
def test_a_partition_set_is_written_in_its_shorter_form(parts: tuple[int, ...]) -> None:
    text = codec.encode_set(parts)
    assert codec.decode_set(text, "partitions.t") == parts
    ranges = codec._ranges_text(parts)
    bitmap = codec._bitmap_text(parts)
    assert len(text) == min(len(ranges), len(bitmap))


def test_ranges_and_bitmaps_read_as_documented() -> None:
    assert codec.encode_set((0, 1, 2, 3, 150, 152, 153)) == "0-3,150,152-153"
    assert codec.encode_set(tuple(range(500))) == "0-499"
    # bit p % 8 of byte p // 8: partitions 0, 2, 4, 6 -> 0b01010101 = 0x55
    assert codec.decode_set("bits:VQ==", "t") == (0, 2, 4, 6)
    assert codec.encode_set(tuple(range(0, 64, 2))) == "bits:VVVVVVVVVVU="


def test_the_operator_writes_version_1_while_it_fits_and_version_2_beyond() -> None:
    small = document({"orders": tuple(range(1000))})
    assert '"version"' not in wire.encode_document(small)
    big = document({f"topic-{i:04d}": tuple(range(500)) for i in range(1000)})
    v1 = wire.encode_document(big, version=1)
    assert len(v1) > wire_document.V1_MAX_BYTES  # about 1.9 MB: refused by the API server
    assert wire.encode_document(big) == wire.encode_document(big, version=2)


def padded_to(length: int) -> wire.AssignmentDocument:
    """A document whose version-1 text is exactly `length` bytes (padding in generatedAt)."""
    doc = document({"orders": tuple(range(0, 100, 2))})
    short = len(wire.encode_document(doc, version=1))
    return dataclasses.replace(doc, generated_at="x" * (length - short + len(doc.generated_at)))


def test_version_1_is_written_up_to_the_api_servers_limit_exactly() -> None:
    limit = wire_document.CONFIGMAP_LIMIT  # the API server sums the values' bytes
    at_limit = wire.encode_document(padded_to(limit))
    assert len(at_limit) == limit and '"version"' not in at_limit
    beyond = wire.encode_document(padded_to(limit + 1))
    assert json.loads(beyond)["version"] == 2


@pytest.mark.parametrize(
    ("name", "partitions", "most"),
    [
        # 1,000 topics x 500 partitions, whole topics: runs compress to "0-499"
        ("whole topics", {f"topic-{i:04d}": tuple(range(500)) for i in range(1000)}, 32 * 1024),
        # the worst pattern for ranges: every other partition of 1,000 topics x 1,000
        ("alternating", {f"topic-{i:04d}": tuple(range(0, 1000, 2)) for i in range(1000)}, 200_000),
        # every other partition of one topic with a million
        ("one huge topic", {"orders": tuple(range(0, 1_000_000, 2))}, 200_000),
    ],
)
def test_a_member_owning_500k_partitions_fits_far_below_a_configmap(
    name: str, partitions: wire.Partitions, most: int
) -> None:
    doc = document(partitions)
    assert len(doc.owned()) == 500_000
    text = wire.encode_document(doc)
    assert len(text) <= most < wire_document.CONFIGMAP_LIMIT // 5, name
    assert wire.decode_document(text) == doc


def v2_text(**overrides: object) -> str:
    raw: dict[str, object] = {
        "version": 2,
        "group": "g",
        "member": "m",
        "epoch": 3,
        "partitions": {"orders": "0-9"},
        "revoking": {},
    }
    raw.update(overrides)
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (v2_text(version=3), "version", "3 is not one this reader knows (1, 2)"),
        (v2_text(version="2"), "version", "not an integer"),
        (v2_text(version=True), "version", "not an integer"),
        (v2_text(partitions={"orders": [0, 1]}), "partitions.orders", "not a string"),
        (v2_text(partitions={"orders": ""}), "partitions.orders", "empty"),
        (v2_text(partitions={"orders": "0-x"}), "partitions.orders", "'0-x' is not a partition"),
        (v2_text(partitions={"orders": "01"}), "partitions.orders", "not a partition number"),
        (v2_text(partitions={"orders": "-1"}), "partitions.orders", "not a partition number"),
        (v2_text(partitions={"orders": "9-3"}), "partitions.orders", "runs backwards"),
        (v2_text(partitions={"orders": "5,3"}), "partitions.orders", "'3' is not above"),
        (v2_text(partitions={"orders": "0-5,5"}), "partitions.orders", "'5' is not above"),
        (v2_text(partitions={"orders": "٣"}), "partitions.orders", "not a partition number"),
        (v2_text(partitions={"orders": "2147483648"}), "partitions.orders", "int32"),
        (v2_text(partitions={"orders": "0-2147483646"}), "partitions.orders", "more than"),
        (v2_text(partitions={"orders": "bits:!!"}), "partitions.orders", "not base64"),
        (v2_text(partitions={"orders": "bits:AAA="}), "partitions.orders", "no partition"),
        (v2_text(revoking={"orders": "3"}), "revoking.orders", "partition 3 is also in"),
        (v2_text(revoking="0-3"), "revoking", "not an object"),
    ],
)
def test_version_2_errors_name_the_field(text: str, field: str, problem: str) -> None:
    with pytest.raises(wire.DocumentError) as caught:
        wire.decode_document(text)
    assert caught.value.field == field
    assert problem in caught.value.problem
    assert "\n" not in str(caught.value)


def test_one_document_cannot_expand_past_the_partition_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(codec, "MAX_PARTITIONS", 100)
    fits = wire.decode_document(v2_text(partitions={"a": "0-49", "b": "0-49"}))
    assert len(fits.owned()) == 100
    too_many = [
        {"a": "0-49", "b": "0-50"},
        {"a": "0-49", "b": codec._bitmap_text(tuple(range(56)))},
    ]
    for partitions in too_many:
        with pytest.raises(wire.DocumentError, match=r"^partitions\.b: more than 100 partitions"):
            wire.decode_document(v2_text(partitions=partitions))


def test_a_version_1_document_may_say_so() -> None:
    text = json.dumps(
        {"version": 1, "group": "g", "member": "m", "epoch": 1, "partitions": {"t": [1]}}
    )
    assert wire.decode_document(text).partitions == {"t": (1,)}


def test_operator_and_sidecar_use_the_same_data_key() -> None:
    from kafka_rebalance_operator import names
    from kafka_rebalance_sidecar import source

    assert names.DATA_KEY == source.DATA_KEY == wire_document.DATA_KEY


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 3000) | st.text(alphabet="0123456789-,bits:AQ=x"),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.sampled_from([None, 1, 2]), json_values, json_values)
def test_any_json_is_a_document_or_a_document_error(
    version: int | None, partitions: object, revoking: object
) -> None:
    raw = {"group": "g", "member": "m", "epoch": 1, "partitions": partitions, "revoking": revoking}
    if version is not None:
        raw["version"] = version
    try:
        doc = wire.decode_document(json.dumps(raw))
    except wire.DocumentError as error:
        assert "\n" not in str(error) and error.field.split(".")[0] in ("partitions", "revoking")
    else:
        assert wire.decode_document(wire.encode_document(doc, version=version or 1)) == doc
