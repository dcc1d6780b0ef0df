"""StreamsGroupDescribe (API 89) as the operator defines it (kip848_messages/*.json): encoded
and decoded against bytes built here by hand from Kafka's flexible-version wire rules (compact
strings and arrays carry length + 1 as an unsigned varint, a nullable struct a -1/1 byte, every
struct ends with an empty tagged-field section), so a schema file that lost, reordered or
retyped a field fails here rather than on a broker."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
from kafka.admin import ConfigResourceType
from kafka_rebalance_operator.kafka import streams_group, streams_trigger, trigger_cleanup
from kafka_rebalance_operator.kafka.streams_group import (
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    StreamsGroupError,
)
from kafka_rebalance_operator.kafka.streams_trigger import TriggerFailed


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def s(text: str | None) -> bytes:
    if text is None:
        return uvarint(0)
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def arr(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


TAGS = uvarint(0)


def task_ids(subtopology: str, partitions: list[int]) -> bytes:
    return s(subtopology) + arr([i32(p) for p in partitions]) + TAGS


def topic_info(name: str, partitions: int = 0) -> bytes:
    return s(name) + i32(partitions) + i16(0) + arr([]) + TAGS


def member(member_id: str, process: str, active: bytes, standby: bytes) -> bytes:
    assignment = arr([active]) + arr([standby] if standby else []) + arr([]) + TAGS
    return (
        s(member_id)
        + i32(7)  # MemberEpoch
        + s(None)  # InstanceId
        + s("rack-a")  # RackId
        + s("app-client")  # ClientId
        + s("/10.0.0.9")  # ClientHost
        + i32(1)  # TopologyEpoch
        + s(process)  # ProcessId
        + i8(1)
        + s("h")
        + struct.pack(">H", 8080)
        + TAGS  # UserEndpoint
        + arr([s("zone") + s("z1") + TAGS])  # ClientTags
        + arr([s("1") + i32(0) + i64(40) + TAGS])  # TaskOffsets
        + arr([s("1") + i32(0) + i64(50) + TAGS])  # TaskEndOffsets
        + assignment  # Assignment
        + assignment  # TargetAssignment
        + b"\x00"  # IsClassic
        + TAGS
    )


def described_group(version: int, error: int = 0) -> bytes:
    subtopologies = arr(
        [
            s("0") + arr([s("words")]) + arr([s("app-repartition")]) + arr([]) + arr([]) + TAGS,
            s("1")
            + arr([])
            + arr([])
            + arr([topic_info("app-counts-changelog")])
            + arr([topic_info("app-repartition", 4)])
            + TAGS,
        ]
    )
    body = (
        i16(error)
        + s(None)
        + s("app")
        + s("Stable")
        + i32(12)  # GroupEpoch
        + i32(11)  # AssignmentEpoch
        + i8(1)
        + i32(3)
        + subtopologies
        + TAGS  # Topology
        + arr(
            [
                member("m-1", "p-1", task_ids("0", [0, 1]), task_ids("1", [2])),
                member("m-0", "p-0", task_ids("1", [0, 1]), b""),
            ]
        )
        + i32(-(2**31))  # AuthorizedOperations
    )
    if version >= 1:
        body += i8(-1) + i8(0) + s("kafka-rebalance-plan")
    return body + TAGS


def response(version: int, error: int = 0) -> bytes:
    return i32(0) + arr([described_group(version, error)]) + TAGS


def test_the_request_encodes_to_the_hand_built_bytes() -> None:
    request = StreamsGroupDescribeRequest(
        group_ids=["app"], include_authorized_operations=False, include_topology_description=False
    )
    assert bytes(request.encode(version=1)) == arr([s("app")]) + b"\x00" + b"\x00" + TAGS
    assert bytes(request.encode(version=0)) == arr([s("app")]) + b"\x00" + TAGS


def test_a_version_1_response_decodes_members_tasks_topology_and_assignor() -> None:
    decoded = StreamsGroupDescribeResponse.decode(response(1), version=1)
    group = streams_group.decode_group(decoded.groups[0])
    assert group is not None
    assert (group.group_id, group.state, group.group_epoch, group.assignment_epoch) == (
        "app",
        "Stable",
        12,
        11,
    )
    assert group.topology_epoch == 3
    assert group.assignor == "kafka-rebalance-plan"
    first, second = group.subtopologies
    assert (first.subtopology_id, first.source_topics, first.stateful) == ("0", ("words",), False)
    # repartition source topics are source topics of their subtopology; changelogs make it
    # stateful
    assert second.source_topics == ("app-repartition",)
    assert second.changelog_topics == ("app-counts-changelog",)
    assert second.stateful
    assert [m.member_id for m in group.members] == ["m-0", "m-1"]  # sorted by member id
    m1 = group.members[1]
    assert (m1.process_id, m1.client_id, m1.client_host, m1.instance_id, m1.rack_id) == (
        "p-1",
        "app-client",
        "/10.0.0.9",
        None,
        "rack-a",
    )
    assert m1.active == {"0": [0, 1]}
    assert m1.standby == {"1": [2]}
    assert m1.warmup == {}
    assert m1.target_active == {"0": [0, 1]}
    assert group.active() == {"m-0": {"1": [0, 1]}, "m-1": {"0": [0, 1]}}


def test_a_version_0_response_has_no_assignor_name() -> None:
    decoded = StreamsGroupDescribeResponse.decode(response(0), version=0)
    group = streams_group.decode_group(decoded.groups[0])
    assert group is not None
    assert group.assignor is None
    assert len(group.members) == 2


def test_group_not_found_is_none_and_other_errors_raise_with_the_code_name() -> None:
    missing = StreamsGroupDescribeResponse.decode(response(1, error=69), version=1)
    assert streams_group.decode_group(missing.groups[0]) is None
    refused = StreamsGroupDescribeResponse.decode(response(1, error=30), version=1)
    with pytest.raises(StreamsGroupError, match=r"GroupAuthorizationFailedError \(30\)"):
        streams_group.decode_group(refused.groups[0])


def test_the_trigger_toggles_its_reserved_tag_and_keeps_the_users_tags() -> None:
    tag = streams_group.TRIGGER_TAG
    assert streams_group.toggled_tags(None) == tag
    assert streams_group.toggled_tags("") == tag
    assert streams_group.toggled_tags(tag) is None  # the group had no tags: delete the config
    assert streams_group.toggled_tags(f"zone, {tag}") == "zone"
    assert streams_group.toggled_tags("zone,cluster") == f"zone,cluster,{tag}"


def test_removing_the_reserved_tag_keeps_the_users_tags_in_order() -> None:
    tag = streams_group.TRIGGER_TAG
    assert streams_group.without_trigger(f"zone,{tag},cluster") == "zone,cluster"
    assert streams_group.without_trigger("zone,cluster") == "zone,cluster"
    assert streams_group.without_trigger(tag) is None
    assert streams_group.without_trigger(None) is None


def _described(*results: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(results=list(results))


def _result(group: str, error: int = 0, **configs: str | None) -> SimpleNamespace:
    entries = [SimpleNamespace(name=k.replace("_", "."), value=v) for k, v in configs.items()]
    return SimpleNamespace(
        resource_type=ConfigResourceType.GROUP.value,
        resource_name=group,
        error_code=error,
        error_message="denied" if error else None,
        configs=entries,
    )


def test_the_tags_read_refuses_a_per_resource_error_and_a_missing_answer() -> None:
    key = streams_group.TRIGGER_CONFIG.replace(".", "_")
    ok = _described(_result("other", **{key: "x"}), _result("g", **{key: "zone"}))
    assert streams_trigger.tags_in(ok, "g") == "zone"
    assert streams_trigger.tags_in(_described(_result("g", **{key: None})), "g") is None
    with pytest.raises(TriggerFailed, match=r"GroupAuthorizationFailedError \(30\): denied"):
        streams_trigger.tags_in(_described(_result("g", error=30)), "g")
    with pytest.raises(TriggerFailed, match="do not know the config"):
        streams_trigger.tags_in(_described(_result("g")), "g")
    with pytest.raises(TriggerFailed, match="no entry for the group"):
        streams_trigger.tags_in(_described(_result("other", **{key: "x"})), "g")


def test_the_clean_up_takes_only_streams_policies_group() -> None:
    assert trigger_cleanup.streams_group_of({"groupType": "streams", "groupId": "g"}) == "g"
    assert trigger_cleanup.streams_group_of({"groupId": "g"}) is None  # consumer (default)
    assert trigger_cleanup.streams_group_of({"groupType": "streams"}) is None
    assert trigger_cleanup.streams_group_of(None) is None
