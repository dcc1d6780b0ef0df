"""The share-group messages as the operator defines them (kip848_messages/*.json, KIP-932):
ShareGroupDescribe (API 77), DescribeShareGroupOffsets (API 90) and ShareGroupHeartbeat
(API 76), encoded and decoded against bytes built here by hand from Kafka's flexible-version
wire rules, so a schema file that lost, reordered or retyped a field fails here rather than on
a broker; and the pure backlog rule."""

from __future__ import annotations

import uuid

import pytest
from kafka_rebalance_operator.kafka import share_group
from kafka_rebalance_operator.kafka.share_group import (
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupError,
    ShareGroupHeartbeatRequest,
    SharePartitionOffset,
)

from tests.unit.operator.test_streams_messages import TAGS, arr, i8, i16, i32, i64, s

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def topic_partitions(name: str, partitions: list[int]) -> bytes:
    return TOPIC_ID.bytes + s(name) + arr([i32(p) for p in partitions]) + TAGS


def member(member_id: str, rack: str | None, assignment: bytes) -> bytes:
    return (
        s(member_id)
        + s(rack)
        + i32(5)  # MemberEpoch
        + s("worker-1")  # ClientId
        + s("/10.0.0.7")  # ClientHost
        + arr([s("jobs")])  # SubscribedTopicNames
        + assignment
        + TAGS
    )


def described(error: int = 0) -> bytes:
    return (
        i16(error)
        + s(None)
        + s("queue")
        + s("Stable")
        + i32(9)  # GroupEpoch
        + i32(9)  # AssignmentEpoch
        + s("kafka-rebalance-plan")
        + arr(
            [
                member("m-b", None, arr([topic_partitions("jobs", [2, 0])]) + TAGS),
                member("m-a", None, arr([topic_partitions("jobs", [0])]) + TAGS),
                member("m-t", share_group.TRIGGER_RACK, arr([]) + TAGS),
            ]
        )
        + i32(-(2**31))
        + TAGS
    )


def test_the_describe_request_encodes_to_the_hand_built_bytes() -> None:
    request = ShareGroupDescribeRequest(group_ids=["queue"], include_authorized_operations=False)
    assert bytes(request.encode(version=1)) == arr([s("queue")]) + b"\x00" + TAGS


def test_a_describe_response_decodes_members_assignments_epochs_and_assignor() -> None:
    decoded = ShareGroupDescribeResponse.decode(i32(0) + arr([described()]) + TAGS, version=1)
    group = share_group.decode_group(decoded.groups[0])
    assert group is not None
    assert (group.group_id, group.state, group.group_epoch, group.assignment_epoch) == (
        "queue",
        "Stable",
        9,
        9,
    )
    assert group.assignor == "kafka-rebalance-plan"
    assert [m.member_id for m in group.members] == ["m-a", "m-b", "m-t"]
    assert group.member_ids() == ["m-a", "m-b"]  # the trigger member is no consumer
    assert group.members[1].assignment == {"jobs": (0, 2)}
    assert group.members[1].client_id == "worker-1" and group.members[1].rack_id is None
    assert group.subscribed_topics() == ("jobs",)
    assert group.holders() == {("jobs", 0): ["m-a", "m-b"], ("jobs", 2): ["m-b"]}
    assert group.members_off_plan({"m-a": {"jobs": [0]}, "m-b": {"jobs": [0, 2]}}) == []
    assert group.members_off_plan({"m-a": {"jobs": [0, 1]}}) == ["m-a"]


def test_no_such_group_is_none_and_other_errors_raise_with_the_code_name() -> None:
    missing = ShareGroupDescribeResponse.decode(i32(0) + arr([described(69)]) + TAGS, version=1)
    assert share_group.decode_group(missing.groups[0]) is None
    wrong = ShareGroupDescribeResponse.decode(i32(0) + arr([described(115)]) + TAGS, version=1)
    with pytest.raises(ShareGroupError, match=r"\(115\)"):
        share_group.decode_group(wrong.groups[0])


def test_the_offsets_request_encodes_all_topics_as_null_and_named_ones_as_a_list() -> None:
    every = share_group.offsets_request("queue")
    assert bytes(every.encode(version=1)) == arr([s("queue") + b"\x00" + TAGS]) + TAGS
    named = share_group.offsets_request("queue", {"jobs": [1, 0, 1]})
    topic = s("jobs") + arr([i32(0), i32(1)]) + TAGS
    assert bytes(named.encode(version=1)) == arr([s("queue") + arr([topic]) + TAGS]) + TAGS


def offsets_response(version: int, partition_error: int = 0) -> bytes:
    def partition(index: int, start: int, lag: int) -> bytes:
        body = i32(index) + i64(start) + i32(0)
        if version >= 1:
            body += i64(lag)
        return body + i16(partition_error if index == 1 else 0) + s(None) + TAGS

    topic = s("jobs") + TOPIC_ID.bytes + arr([partition(0, 40, 55), partition(1, -1, -1)]) + TAGS
    return i32(0) + arr([s("queue") + arr([topic]) + i16(0) + s(None) + TAGS]) + TAGS


def test_offsets_decode_with_lag_in_version_1_and_without_in_version_0() -> None:
    v1 = share_group.decode_offsets(
        DescribeShareGroupOffsetsResponse.decode(offsets_response(1), version=1).groups[0]
    )
    assert v1[("jobs", 0)] == SharePartitionOffset("jobs", 0, 40, 0, 55)
    assert v1[("jobs", 1)].start_offset == -1 and v1[("jobs", 1)].lag is None
    v0 = share_group.decode_offsets(
        DescribeShareGroupOffsetsResponse.decode(offsets_response(0), version=0).groups[0]
    )
    assert v0[("jobs", 0)].lag is None
    refused = DescribeShareGroupOffsetsResponse.decode(offsets_response(1, 3), version=1)
    with pytest.raises(ShareGroupError, match=r"jobs-1: UnknownTopicOrPartitionError \(3\)"):
        share_group.decode_offsets(refused.groups[0])


def test_backlog_is_the_brokers_lag_else_log_end_minus_start_and_unknown_is_left_out() -> None:
    offsets = {
        ("jobs", 0): SharePartitionOffset("jobs", 0, 40, 0, 12),  # lag reported: it wins
        ("jobs", 1): SharePartitionOffset("jobs", 1, 40, 0, None),
        ("jobs", 2): SharePartitionOffset("jobs", 2, -1, 0, None),  # not initialized
        ("jobs", 3): SharePartitionOffset("jobs", 3, 90, 0, None),  # end not known
        ("jobs", 4): SharePartitionOffset("jobs", 4, 80, 0, None),
    }
    ends = {("jobs", 0): 100, ("jobs", 1): 100, ("jobs", 2): 100, ("jobs", 4): 70}
    assert share_group.share_backlog(offsets, ends) == {
        ("jobs", 0): 12,
        ("jobs", 1): 60,
        ("jobs", 4): 0,
    }


def test_the_trigger_join_names_its_rack_and_topics() -> None:
    join = ShareGroupHeartbeatRequest(
        group_id="queue",
        member_id="m",
        member_epoch=0,
        rack_id=share_group.TRIGGER_RACK,
        subscribed_topic_names=["jobs"],
    )
    assert bytes(join.encode(version=1)) == (
        s("queue") + s("m") + i32(0) + s(share_group.TRIGGER_RACK) + arr([s("jobs")]) + TAGS
    )
    leave = ShareGroupHeartbeatRequest(
        group_id="queue", member_id="m", member_epoch=-1, rack_id=None, subscribed_topic_names=None
    )
    assert (
        bytes(leave.encode(version=1)) == s("queue") + s("m") + i32(-1) + s(None) + b"\x00" + TAGS
    )
    assert len(share_group._member_id()) == 22


def test_unused_helpers_stay_in_use() -> None:
    assert i8(1) == b"\x01"


def test_a_group_on_another_share_assignor_names_it_and_the_way_out() -> None:
    decoded = ShareGroupDescribeResponse.decode(i32(0) + arr([described()]) + TAGS, version=1)
    group = share_group.decode_group(decoded.groups[0])
    assert group is not None
    assert share_group.plugin_missing(group) is None
    plain = share_group.ShareGroup("queue", "Stable", 1, 1, "simple")
    reason = share_group.plugin_missing(plain)
    assert reason is not None and "'simple'" in reason and "group.share.assignors" in reason
