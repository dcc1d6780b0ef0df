"""KIP-932 share groups through kafka-python 3.0: describe one (`ShareGroupDescribe`, API 77),
read its share-partition start offsets and lag (`DescribeShareGroupOffsets`, API 90), and make
its coordinator recompute the target assignment (`trigger`: a join and a leave,
`ShareGroupHeartbeat`, API 76).

kafka-python speaks none of these messages; like `kip848` and `streams_group`, they are defined
by schema files in `kip848_messages/` (facts of Kafka 4.4's message schemas) and sent with the
admin client's own connection manager to the group's coordinator.

Backlog of a share-partition: the records the group has not finished with. The coordinator's
share-partition start offset (SPSO) is the first offset not yet in a terminal state
(acknowledged, rejected or archived), so `log end - SPSO` counts every record from there on;
version 1 of DescribeShareGroupOffsets also reports `Lag`, which the broker computes as
`log end - SPSO - records past the SPSO already completed` (KIP-1226). `share_backlog` takes
`Lag` where the broker reports it and `log end - SPSO` otherwise; both still count in-flight
(acquired, not yet acknowledged) records, which no admin call reports apart.

The trigger: a share group's coordinator runs the assignor only when the group epoch has moved
past the assignment epoch, and in Kafka 4.4 only a member joining or leaving, a subscription
change, a change of the subscribed topics' metadata, or newly initialized share-partitions move
it; no group config does (docs/share-groups.md). So `trigger` joins one member, subscribed to
the group's own topics with the rack id `TRIGGER_RACK` (the broker plug-in gives such a member
nothing and hides it from its `simple` fallback), and makes it leave at once: two epoch bumps,
no real member gains or loses a partition but by the plan. The join must name topics: the
coordinator refuses a first share heartbeat without a subscription.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import errors
from kafka.errors import GroupIdNotFoundError
from kafka.protocol.api_message import ApiMessage
from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance_operator.kafka import group_leave, kip848_messages

TRIGGER_RACK = "kafka-rebalance-trigger"  # PlanFollowingShareAssignor.TRIGGER_RACK
PLAN_ASSIGNOR = "kafka-rebalance-plan"  # PlanFollowingShareAssignor.NAME
LEAVE_EPOCH = -1
JOIN_EPOCH = 0

TopicPartition = tuple[str, int]


# kafka-python is untyped: mypy takes ApiMessage's class keyword for object.__init_subclass__.
class ShareGroupDescribeRequest(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class ShareGroupHeartbeatRequest(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class ShareGroupError(RuntimeError):
    """The coordinator refused a call: its error code and message, or why it could not be made."""


@dataclass(frozen=True)
class ShareMember:
    """One member of a share group as its coordinator describes it. `assignment` is topic ->
    sorted partitions; in a share group several members may hold the same partition."""

    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: tuple[str, ...]
    assignment: Mapping[str, tuple[int, ...]]

    @property
    def is_trigger(self) -> bool:
        """The operator's own short-lived trigger member, not a consumer."""
        return self.rack_id == TRIGGER_RACK


@dataclass(frozen=True)
class ShareGroup:
    """A share group: `assignor` is the cluster-wide share assignor's name (the same for every
    group, so it cannot tell a planned group from one the plug-in delegates to `simple`)."""

    group_id: str
    state: str  # "Empty", "Stable", "Dead"
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMember, ...] = field(default_factory=tuple)

    def consumers(self) -> tuple[ShareMember, ...]:
        """The members that consume (the operator's trigger member left out)."""
        return tuple(m for m in self.members if not m.is_trigger)

    def member_ids(self) -> list[str]:
        return sorted(m.member_id for m in self.consumers())

    def subscribed_topics(self) -> tuple[str, ...]:
        """Every topic some consumer subscribes to, sorted."""
        return tuple(sorted({t for m in self.consumers() for t in m.subscribed_topics}))

    def assignment(self) -> Assignment:
        """member id -> topic -> partitions it holds now (members without partitions kept)."""
        return Assignment(
            {m.member_id: {t: list(p) for t, p in m.assignment.items()} for m in self.consumers()}
        )

    def holders(self) -> dict[TopicPartition, list[str]]:
        """(topic, partition) -> the member ids holding it, sorted."""
        out: dict[TopicPartition, list[str]] = {}
        for m in self.consumers():
            for topic, partitions in m.assignment.items():
                for p in partitions:
                    out.setdefault((topic, p), []).append(m.member_id)
        return {tp: sorted(ids) for tp, ids in sorted(out.items())}

    def members_off_plan(self, plan: Assignment) -> list[str]:
        """Member ids whose current partitions differ from `plan` (member id -> topic ->
        partitions): empty when every planned member holds exactly its planned partitions."""
        held = self.assignment()
        differ = []
        for member, topics in sorted(plan.items()):
            want = {t: sorted(p) for t, p in topics.items() if p}
            have = {t: sorted(p) for t, p in (held.get(member) or {}).items() if p}
            if want != have:
                differ.append(member)
        return differ


def plugin_missing(group: ShareGroup) -> str | None:
    """Why the brokers cannot follow a share plan for `group`, or None: a share group reports the
    cluster's one share assignor, and only the plug-in's follows plans. The message names the
    assignor the coordinator uses and the broker setting that loads the plug-in."""
    if group.assignor == PLAN_ASSIGNOR:
        return None
    return (
        f"the brokers assign share group {group.group_id} with the share assignor "
        f"'{group.assignor}', which follows no plan: load the plug-in with "
        "group.share.assignors=dev.kafkarebalance.broker.PlanFollowingShareAssignor "
        "(a cluster-wide broker setting, docs/share-groups.md)"
    )


@dataclass(frozen=True)
class SharePartitionOffset:
    """One share-partition's state in the share coordinator. `start_offset` is the SPSO (-1: not
    initialized yet); `lag` is the broker's count of records not yet completed (None when it
    does not report one: DescribeShareGroupOffsets version 0, or -1 in the answer)."""

    topic: str
    partition: int
    start_offset: int
    leader_epoch: int
    lag: int | None


def _error(answer: Any) -> str:
    name = errors.for_code(answer.error_code).__name__
    message = f": {answer.error_message}" if answer.error_message else ""
    return f"{name} ({answer.error_code}){message}"


def _assignment(assignment: Any) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for tp in (assignment.topic_partitions if assignment is not None else None) or []:
        if tp.partitions:
            out[tp.topic_name] = tuple(sorted(tp.partitions))
    return dict(sorted(out.items()))


def decode_group(group: Any) -> ShareGroup | None:
    """A decoded DescribedGroup as a `ShareGroup`; None when there is no share group of that id.
    Raises ShareGroupError for other errors (a group of another type among them)."""
    if group.error_code == GroupIdNotFoundError.errno:
        return None
    if group.error_code:
        raise ShareGroupError(f"describing share group {group.group_id}: {_error(group)}")
    return ShareGroup(
        group_id=group.group_id,
        state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        members=tuple(
            ShareMember(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                rack_id=m.rack_id,
                subscribed_topics=tuple(sorted(m.subscribed_topic_names or [])),
                assignment=_assignment(m.assignment),
            )
            for m in sorted(group.members or [], key=lambda m: m.member_id)
        ),
    )


def describe(admin: Any, group_id: str) -> ShareGroup | None:
    """The share group as its coordinator describes it; None when there is none."""

    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        request = ShareGroupDescribeRequest(
            group_ids=[group_id], include_authorized_operations=False
        )
        return await admin._manager.send(request, node_id=coordinator)

    response = admin._manager.run(call)
    (group,) = response.groups
    return decode_group(group)


def decode_offsets(group: Any) -> dict[TopicPartition, SharePartitionOffset]:
    """A DescribeShareGroupOffsets group answer as (topic, partition) -> offset. Raises
    ShareGroupError on a group-level error or a partition-level one."""
    if group.error_code:
        raise ShareGroupError(f"share offsets of {group.group_id}: {_error(group)}")
    out: dict[TopicPartition, SharePartitionOffset] = {}
    for topic in group.topics or []:
        for p in topic.partitions or []:
            if p.error_code:
                where = f"{topic.topic_name}-{p.partition_index}"
                raise ShareGroupError(f"share offsets of {group.group_id} {where}: {_error(p)}")
            lag = getattr(p, "lag", -1)
            out[(topic.topic_name, p.partition_index)] = SharePartitionOffset(
                topic=topic.topic_name,
                partition=p.partition_index,
                start_offset=p.start_offset,
                leader_epoch=p.leader_epoch,
                lag=None if lag is None or lag < 0 else int(lag),
            )
    return dict(sorted(out.items()))


def offsets_request(
    group_id: str, topics: Mapping[str, Iterable[int]] | None = None
) -> DescribeShareGroupOffsetsRequest:
    """The DescribeShareGroupOffsets request for `topics` (None: all the group's topics)."""
    group_type = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    wanted = (
        None
        if topics is None
        else [
            group_type.DescribeShareGroupOffsetsRequestTopic(
                topic_name=t, partitions=sorted(set(p))
            )
            for t, p in sorted(topics.items())
        ]
    )
    return DescribeShareGroupOffsetsRequest(groups=[group_type(group_id=group_id, topics=wanted)])


def start_offsets(
    admin: Any, group_id: str, topics: Mapping[str, Iterable[int]] | None = None
) -> dict[TopicPartition, SharePartitionOffset]:
    """The group's share-partition start offsets (and lag, where reported) for `topics` (topic ->
    partitions; None: every share-partition the group has)."""
    request = offsets_request(group_id, topics)

    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        return await admin._manager.send(request, node_id=coordinator)

    response = admin._manager.run(call)
    (group,) = response.groups
    return decode_offsets(group)


def share_backlog(
    offsets: Mapping[TopicPartition, SharePartitionOffset],
    end_offsets: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Records each share-partition still has to get through: the broker's lag where it reports
    one, else `log end - start offset` (never negative). A partition whose state is not
    initialized (start offset -1) or whose log end is unknown is left out: its backlog is not
    known, not zero."""
    out: dict[TopicPartition, int] = {}
    for tp, offset in sorted(offsets.items()):
        if offset.lag is not None:
            out[tp] = offset.lag
        elif offset.start_offset >= 0 and tp in end_offsets:
            out[tp] = max(0, end_offsets[tp] - offset.start_offset)
    return out


def _member_id() -> str:
    """A new member id as Kafka's clients make them (a random UUID, URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


async def _heartbeat(
    admin: Any,
    coordinator: int,
    group_id: str,
    member_id: str,
    epoch: int,
    topics: list[str] | None,
) -> Any:
    request = ShareGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=epoch,
        rack_id=TRIGGER_RACK if epoch == JOIN_EPOCH else None,
        subscribed_topic_names=topics,
    )
    return await admin._manager.send(request, node_id=coordinator)


def leave(admin: Any, group_id: str, member_id: str) -> None:
    """Make `member_id` leave the share group (member epoch -1), retried with jittered waits
    (`group_leave`). Raises ShareGroupError when it did not."""

    def heartbeat(coordinator: int) -> Any:
        return _heartbeat(admin, coordinator, group_id, member_id, LEAVE_EPOCH, None)

    reason = group_leave.leave(admin, group_id, heartbeat, _error)
    if reason is not None:
        raise ShareGroupError(
            f"triggering {group_id}: the trigger member {member_id} did not leave after "
            f"{group_leave.LEAVE_ATTEMPTS} attempts ({reason}); its session times out"
        )


def trigger(admin: Any, group_id: str, topics: Iterable[str]) -> int:
    """Make the share group's coordinator recompute its target assignment: a member with rack id
    TRIGGER_RACK, subscribed to `topics` (the group's own, so its subscription type stays as it
    was), joins and leaves. Returns the group epoch the join produced. Costs two epoch bumps."""
    names = sorted(set(topics))
    if not names:
        raise ShareGroupError(
            f"triggering {group_id}: the trigger member must subscribe to a topic"
        )
    member_id = _member_id()

    async def call() -> int:
        coordinator = await admin._find_coordinator_id(group_id)
        joined = await _heartbeat(admin, coordinator, group_id, member_id, JOIN_EPOCH, names)
        if joined.error_code:
            raise ShareGroupError(f"triggering {group_id}: the join was refused: {_error(joined)}")
        return int(joined.member_epoch)

    epoch = int(admin._manager.run(call))
    leave(admin, group_id, member_id)
    return epoch
