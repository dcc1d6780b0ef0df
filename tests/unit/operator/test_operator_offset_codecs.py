"""The operator's offset codecs (`offset_codecs`) against kafka-python's own encoding and
decoding of the same messages: responses built and encoded by kafka-python's protocol classes
decode to the same offsets, leaders and commit metadata; requests the codecs build decode, in
kafka-python, to the request meant."""

from __future__ import annotations

import random

import numpy as np
import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka_rebalance_operator.kafka import offset_codecs

LIST = ListOffsetsResponse.ListOffsetsTopicResponse


def _list_offsets_response(version: int, rng: random.Random) -> ListOffsetsResponse:
    topics = []
    for t in range(3):
        count = rng.choice([1, 7, 300])
        order = list(range(count))
        rng.shuffle(order)  # brokers need not answer in partition order
        partitions = [
            LIST.ListOffsetsPartitionResponse(
                partition_index=p,
                error_code=rng.choice([0, 0, 0, 0, 6, 3]),
                timestamp=-1,
                offset=rng.randrange(0, 2**62),
                leader_epoch=rng.randrange(0, 5),
            )
            for p in order
        ]
        topics.append(LIST(name=f"topic-{t}-é", partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics, version=version)


@pytest.mark.parametrize("version", range(6, 10))
def test_list_offsets_decoder_matches_kafka_python(version: int) -> None:
    rng = random.Random(version)
    response = _list_offsets_response(version, rng)
    body = response.encode(version=version)
    theirs = ListOffsetsResponse.decode(body, version=version)
    into = {t.name: np.full(len(t.partitions), -7, np.int64) for t in theirs.topics}
    failed = offset_codecs.decode_list_offsets(body, into)
    for topic in theirs.topics:
        for p in topic.partitions:
            expected = p.offset if p.error_code == 0 else -1
            assert into[topic.name][p.partition_index] == expected
        errors = sorted((p.partition_index, p.error_code) for p in topic.partitions if p.error_code)
        assert sorted(failed.get(topic.name, [])) == errors


@pytest.mark.parametrize("version", range(6, 10))
def test_list_offsets_request_decodes_in_kafka_python(version: int) -> None:
    wanted = {"orders": np.array([0, 5, 2], np.int32), "b": np.arange(40, dtype=np.int32)}
    body = offset_codecs.list_offsets_request(version, wanted, offset_codecs.EARLIEST)
    request = ListOffsetsRequest.decode(body, version=version)
    assert request.replica_id == -1
    assert {t.name: [p.partition_index for p in t.partitions] for t in request.topics} == {
        k: v.tolist() for k, v in wanted.items()
    }
    assert {p.timestamp for t in request.topics for p in t.partitions} == {offset_codecs.EARLIEST}
    assert {p.current_leader_epoch for t in request.topics for p in t.partitions} == {-1}


def _metadata_response(version: int, rng: random.Random, shape: str) -> MetadataResponse:
    topic_class = MetadataResponse.MetadataResponseTopic
    partition_class = topic_class.MetadataResponsePartition
    broker_class = MetadataResponse.MetadataResponseBroker
    topics = []
    for t in range(4):
        count = rng.choice([0, 1, 12, 250])
        order = list(range(count))
        rng.shuffle(order)
        partitions = []
        for p in order:
            if shape == "same-replicas":
                replicas = [1, 2, 3]
            elif shape == "same-counts":  # one replica each, on different brokers
                replicas = [rng.randrange(7)]
            else:
                replicas = rng.sample(range(10), rng.randrange(1, 4))
            partitions.append(
                partition_class(
                    error_code=0,
                    partition_index=p,
                    leader_id=rng.choice([-1, 1, 2, 3]),
                    leader_epoch=rng.randrange(9),
                    replica_nodes=replicas,
                    isr_nodes=replicas[:1] if shape == "mixed-replicas" else replicas,
                    offline_replicas=[],
                )
            )
        topics.append(
            topic_class(
                error_code=rng.choice([0, 0, 3]),
                name=f"t{t}",
                topic_id=None,
                is_internal=t == 3,
                partitions=partitions,
                authorized_operations=None,
            )
        )
    kwargs = {"authorized_operations": None} if version <= 10 else {}
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[broker_class(node_id=n, host=f"h{n}", port=9092, rack=None) for n in (1, 2)],
        cluster_id="c",
        controller_id=1,
        topics=topics,
        version=version,
        **kwargs,
    )


@pytest.mark.parametrize("shape", ["same-replicas", "same-counts", "mixed-replicas"])
@pytest.mark.parametrize("version", range(10, 13))
def test_metadata_decoder_matches_kafka_python(version: int, shape: str) -> None:
    rng = random.Random(f"{version}{shape}")
    body = _metadata_response(version, rng, shape).encode(version=version)
    theirs = MetadataResponse.decode(body, version=version)
    ours = offset_codecs.decode_metadata(version, body)
    assert [t.name for t in ours] == [t.name for t in theirs.topics]
    for mine, topic in zip(ours, theirs.topics, strict=True):
        assert (mine.error, mine.internal) == (topic.error_code, topic.is_internal)
        leaders = {p.partition_index: p.leader_id for p in topic.partitions}
        assert mine.leaders.tolist() == [leaders[p] for p in range(len(leaders))]


@pytest.mark.parametrize("version", range(10, 13))
def test_metadata_request_decodes_in_kafka_python(version: int) -> None:
    request = MetadataRequest.decode(
        offset_codecs.metadata_request(version, ["a", "b"]), version=version
    )
    assert [t.name for t in request.topics] == ["a", "b"]
    assert request.allow_auto_topic_creation is False
    every = MetadataRequest.decode(offset_codecs.metadata_request(version, None), version=version)
    assert every.topics is None


def test_offset_fetch_decoder_matches_kafka_python() -> None:
    rng = random.Random(8)
    group_class = OffsetFetchResponse.OffsetFetchResponseGroup
    topic_class = group_class.OffsetFetchResponseTopics
    partition_class = topic_class.OffsetFetchResponsePartitions
    notes = [None, "", '{"member":"a","epoch":3}', '{"member":"b","epoch":3}', "ünï"]
    topics = [
        topic_class(
            name=f"topic-{t}",
            partitions=[
                partition_class(
                    partition_index=p,
                    committed_offset=rng.choice([-1, rng.randrange(2**40)]),
                    committed_leader_epoch=-1,
                    metadata=rng.choice(notes),
                    error_code=rng.choice([0, 0, 0, 9]),
                )
                for p in rng.sample(range(400), rng.choice([1, 50, 400]))
            ],
        )
        for t in range(3)
    ]
    response = OffsetFetchResponse(
        throttle_time_ms=0,
        groups=[group_class(group_id="g", topics=topics, error_code=0)],
        version=8,
    )
    body = response.encode(version=8)
    theirs = OffsetFetchResponse.decode(body, version=8)
    ours = offset_codecs.decode_offset_fetch(body)
    for topic in theirs.groups[0].topics:
        for p in topic.partitions:
            expected = p.committed_offset if p.error_code == 0 else -1
            assert ours.offsets[topic.name][p.partition_index] == expected
            note = p.metadata if p.error_code == 0 and p.metadata else None
            assert ours.metadata.get(topic.name, {}).get(p.partition_index) == note
        missing = set(range(len(ours.offsets[topic.name]))) - {
            p.partition_index for p in topic.partitions
        }
        assert all(ours.offsets[topic.name][p] == -1 for p in missing)


def test_offset_fetch_group_error_raises() -> None:
    group_class = OffsetFetchResponse.OffsetFetchResponseGroup
    response = OffsetFetchResponse(
        throttle_time_ms=0, groups=[group_class(group_id="g", topics=[], error_code=16)]
    )
    with pytest.raises(offset_codecs.GroupError):
        offset_codecs.decode_offset_fetch(response.encode(version=8))


def test_offset_fetch_request_decodes_in_kafka_python() -> None:
    request = OffsetFetchRequest.decode(
        offset_codecs.offset_fetch_request(8, "my-group"), version=8
    )
    assert [(g.group_id, g.topics) for g in request.groups] == [("my-group", None)]


def test_truncated_response_is_a_wire_error() -> None:
    body = _list_offsets_response(9, random.Random(1)).encode(version=9)
    with pytest.raises(offset_codecs.WireError):
        offset_codecs.decode_list_offsets(body[: len(body) // 2], {})


def test_uniform_metadata_is_read_at_once_and_mixed_entry_by_entry(monkeypatch) -> None:
    """The vectorised path is the one taken when shapes agree (and only then)."""
    calls = []
    real = offset_codecs._uniform_partitions

    def spy(*args):
        result = real(*args)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(offset_codecs, "_uniform_partitions", spy)
    for shape, expected in (("same-counts", True), ("mixed-replicas", False)):
        calls.clear()
        body = _metadata_response(12, random.Random(3), shape).encode(version=12)
        offset_codecs.decode_metadata(12, body)
        assert any(c is expected for c in calls), (shape, calls)


@pytest.mark.parametrize("cut", [7, 40, 200])
def test_any_truncated_response_is_a_wire_error(cut: int) -> None:
    bodies = [
        (
            offset_codecs.decode_metadata,
            (12,),
            _metadata_response(12, random.Random(2), "mixed-replicas"),
        ),
        (offset_codecs.decode_offset_fetch, (), None),
    ]
    group_class = OffsetFetchResponse.OffsetFetchResponseGroup
    topic_class = group_class.OffsetFetchResponseTopics
    partition_class = topic_class.OffsetFetchResponsePartitions
    fetch = OffsetFetchResponse(
        throttle_time_ms=0,
        groups=[
            group_class(
                group_id="g",
                topics=[
                    topic_class(
                        name="t",
                        partitions=[
                            partition_class(
                                partition_index=p,
                                committed_offset=p,
                                committed_leader_epoch=-1,
                                metadata="m" * p,
                                error_code=0,
                            )
                            for p in range(30)
                        ],
                    )
                ],
                error_code=0,
            )
        ],
    )
    for decode, args, response in bodies:
        body = (response or fetch).encode(version=args[0] if args else 8)
        with pytest.raises(offset_codecs.WireError):
            decode(*args, body[:cut])
