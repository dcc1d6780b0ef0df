"""KIP-848 consumer groups through kafka-python 3.0: describe one (`ConsumerGroupDescribe`, API
69) and make its coordinator recompute the target assignment (`nudge`, two
`ConsumerGroupHeartbeat` calls, API 68).

kafka-python speaks neither message; it builds message classes from schema files, so the two
are defined by the files in `kip848_messages/` and sent with the admin client's own connection
manager (its coordinator lookup and request routing). Those are kafka-python 3.0 internals:
`pyproject.toml` pins kafka-python 3.0.x, and the integration tests exercise this module against
the real broker.

Why `nudge` exists: a KIP-848 coordinator recomputes a group's target assignment only when the
group epoch moves (a member joins or leaves, a subscription or the topics change); no admin call
asks for it. So a new plan takes effect when one extra member joins the group *subscribed to
nothing* and leaves again: two epoch bumps, during which the assignor sees that member but has
nothing to give it, so no real member loses or gains a partition because of the nudge itself.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kafka import errors
from kafka.errors import GroupIdNotFoundError
from kafka.protocol.api_message import ApiMessage
from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance_operator.kafka import group_leave, kip848_messages

NUDGE_REBALANCE_TIMEOUT_MS = 10_000
LEAVE_EPOCH = -1  # MemberEpoch that leaves the group
JOIN_EPOCH = 0  # MemberEpoch that joins it


# kafka-python is untyped: mypy takes ApiMessage's class keyword for object.__init_subclass__.
class ConsumerGroupDescribeRequest(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class Kip848Error(RuntimeError):
    """The coordinator refused a call: its error code and message, or why it could not be made."""


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    member_epoch: int
    assignment: dict[str, list[int]]  # topic -> partitions the member holds now
    target: dict[str, list[int]]  # ... the coordinator's target for it


@dataclass(frozen=True)
class ConsumerGroup:
    group_id: str
    state: str  # "Empty", "Assigning", "Reconciling", "Stable", "Dead"
    group_epoch: int
    assignment_epoch: int
    assignor: str  # the server-side assignor the coordinator used
    members: list[Member] = field(default_factory=list)

    def as_describe_groups(self) -> dict[str, Any]:
        """The shape kafka-python's describe_groups gives a classic group, so the plan is
        verified against either kind by one check (`verify.verify`), plus each member's
        `target_assignment` (`verify.target_differs`) and the group and assignment epochs
        (`verify.recompute_pending`)."""
        return {
            "group_id": self.group_id,
            "group_state": self.state,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "protocol_type": "consumer",
            "protocol": self.assignor,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.instance_id,
                    "member_assignment": {
                        "assigned_partitions": [
                            {"topic": t, "partitions": p} for t, p in sorted(m.assignment.items())
                        ]
                    },
                    "target_assignment": {
                        "assigned_partitions": [
                            {"topic": t, "partitions": p} for t, p in sorted(m.target.items())
                        ]
                    },
                }
                for m in self.members
            ],
        }

    def members_off_plan(self, plan: Assignment) -> list[str]:
        """Instance ids whose current assignment differs from `plan` (instance id -> topic ->
        partitions): empty when every planned member holds exactly its planned partitions."""
        held = {m.instance_id: m.assignment for m in self.members if m.instance_id}
        differ = []
        for instance, topics in sorted(plan.items()):
            want = {t: sorted(p) for t, p in topics.items() if p}
            have = {t: sorted(p) for t, p in (held.get(instance) or {}).items() if p}
            if want != have:
                differ.append(instance)
        return differ


def _error(answer: Any) -> str:
    """`NAME (code): message` of an error code in a response."""
    name = errors.for_code(answer.error_code).__name__
    message = f": {answer.error_message}" if answer.error_message else ""
    return f"{name} ({answer.error_code}){message}"


def _topics(assignment: Any) -> dict[str, list[int]]:
    return {
        tp.topic_name: sorted(tp.partitions)
        for tp in (assignment.topic_partitions if assignment is not None else [])
        if tp.partitions
    }


def describe(admin: Any, group_id: str) -> ConsumerGroup | None:
    """The group as its coordinator describes it; None when it is not a KIP-848 group (no such
    group, or a classic one)."""

    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        request = ConsumerGroupDescribeRequest(
            group_ids=[group_id], include_authorized_operations=False
        )
        return await admin._manager.send(request, node_id=coordinator)

    response = admin._manager.run(call)
    (group,) = response.groups
    if group.error_code == GroupIdNotFoundError.errno:  # none, or a classic group
        return None
    if group.error_code:
        raise Kip848Error(f"describing {group_id}: {_error(group)}")
    return ConsumerGroup(
        group_id=group.group_id,
        state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        members=[
            Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                member_epoch=m.member_epoch,
                assignment=_topics(m.assignment),
                target=_topics(m.target_assignment),
            )
            for m in group.members
        ],
    )


class NudgeLeftBehind(Kip848Error):
    """The nudge member joined but could not leave: it stays a member (with nothing assigned)
    until it leaves or its session times out, so the caller retries `leave` later."""

    def __init__(self, group_id: str, member_id: str, reason: str) -> None:
        super().__init__(
            f"nudging {group_id}: the nudge member {member_id} did not leave after "
            f"{group_leave.LEAVE_ATTEMPTS} attempts: {reason}"
        )
        self.group_id, self.member_id = group_id, member_id


async def _heartbeat(
    admin: Any,
    coordinator: int,
    group_id: str,
    member_id: str,
    epoch: int,
    topics: list[str] | None,
) -> Any:
    request = ConsumerGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=NUDGE_REBALANCE_TIMEOUT_MS if epoch == JOIN_EPOCH else -1,
        subscribed_topic_names=topics,
        topic_partitions=[] if epoch == JOIN_EPOCH else None,  # a joiner owns nothing
    )
    return await admin._manager.send(request, node_id=coordinator)


def leave(admin: Any, group_id: str, member_id: str) -> None:
    """Make `member_id` leave the group (a leave heartbeat, member epoch -1), retried with
    jittered waits (`group_leave`). Raises NudgeLeftBehind."""

    def heartbeat(coordinator: int) -> Any:
        return _heartbeat(admin, coordinator, group_id, member_id, LEAVE_EPOCH, None)

    reason = group_leave.leave(admin, group_id, heartbeat, _error)
    if reason is not None:
        raise NudgeLeftBehind(group_id, member_id, reason)


def nudge(admin: Any, group_id: str) -> int:
    """Join the group with an empty subscription and leave it again, so its coordinator
    recomputes the target assignment. Returns the group epoch the join produced. The leave is
    retried (`leave`); NudgeLeftBehind names the member when it still did not leave."""
    member_id = uuid.uuid4().hex  # version 1 wants the member to name itself

    async def call() -> int:
        coordinator = await admin._find_coordinator_id(group_id)
        joined = await _heartbeat(admin, coordinator, group_id, member_id, JOIN_EPOCH, [])
        if joined.error_code:
            raise Kip848Error(f"nudging {group_id}: the join was refused: {_error(joined)}")
        return int(joined.member_epoch)

    epoch = int(admin._manager.run(call))
    leave(admin, group_id, member_id)
    return epoch
