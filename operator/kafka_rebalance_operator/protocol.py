"""Can this group follow the plan the way `spec.apply.mode` says? (ProtocolMismatch)

The operator only writes ConfigMaps; the consumers decide whether they follow them. Two setups
silently defeat a policy, and the operator can see both in Kafka:

- `group` mode needs every member on the classic protocol with the sidecar's assignor
  (`kafka-rebalance-plan`). Members that joined with another assignor (Kafka's default `range`,
  `cooperative-sticky`, ...) are assigned by that assignor; a group on the KIP-848 `consumer`
  protocol has no client-side assignors at all. The plan is still written (it is harmless, and
  it is ready the moment the consumers are fixed), but the condition must say it is not followed.
- `assign` mode needs nobody in the group: Kafka refuses manual commits (generation -1) while
  any member has joined, so the sidecars can neither commit progress nor acknowledge a
  hand-over. New plans are held: their revokes could never be acknowledged.

Pure: works on the describe_groups dict kafka-python returns and the group type from
ListGroups (Kafka 4.0+), which is the only way to see a KIP-848 group (DescribeGroups does not
describe them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_rebalance_common import wire

PLAN_ASSIGNOR = wire.ASSIGNOR_NAME  # the protocol name the sidecar's assignor joins with
# the name the brokers' plan-following KIP-848 assignor goes by (broker-plugin/, docs/kip848.md)
SERVER_ASSIGNOR = "kafka-rebalance-plan"


def _member_names(group: Mapping[str, Any], limit: int = 5) -> str:
    names = sorted(
        str(m.get("group_instance_id") or m.get("member_id") or "?")
        for m in group.get("members") or []
    )
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def mismatch(
    apply_mode: str,
    group_id: str,
    group: Mapping[str, Any] | None,
    group_type: str | None,
    group_type_state: str | None = None,
    server_assignor: str | None = None,
) -> str | None:
    """None when the group can follow the plan; else what is wrong and what to do about it.

    `group`: describe_groups' entry for the group (None when it could not be read: nothing is
    claimed then). `group_type`: "consumer" for a KIP-848 group, from ListGroups, with its state.
    `server_assignor`: the assignor a KIP-848 group's coordinator used (broker mode).
    """
    kip848 = group_type == "consumer" and (group_type_state or "").lower() not in ("empty", "dead")
    if apply_mode == "broker":
        return _broker_mismatch(group_id, group, kip848, server_assignor)
    if apply_mode == "group":
        if kip848:
            return (
                f"group {group_id} uses the KIP-848 consumer protocol, which has no client-side "
                f"assignors: the plan is written but not followed. Run the consumers with "
                f"group.protocol=classic and the {PLAN_ASSIGNOR} assignor (the sidecar does), "
                "or set spec.apply.mode: assign"
            )
        if group is None or not group.get("members"):
            return None
        protocol_type = group.get("protocol_type") or ""
        assignor = group.get("protocol_data") or ""
        if protocol_type and protocol_type != "consumer":
            return (
                f"group {group_id} is a {protocol_type!r} group, not a consumer group: the plan "
                "is written but not followed. Point the policy at the consumers' group.id"
            )
        if assignor and assignor != PLAN_ASSIGNOR:
            return (
                f"members of group {group_id} ({_member_names(group)}) use the assignor "
                f"{assignor!r}, not {PLAN_ASSIGNOR!r}: the plan is written but not followed. "
                f"Run every member with the kafka-rebalance sidecar (partition.assignment."
                f"strategy {PLAN_ASSIGNOR}), or set spec.apply.mode: assign and stop the "
                "subscribing consumers"
            )
        return None
    # assign mode
    if kip848:
        return (
            f"consumers joined group {group_id} with the KIP-848 consumer protocol: Kafka "
            "refuses the sidecars' manual commits while they are members, so hand-overs cannot "
            "be acknowledged; new plans are held. Stop the subscribing consumers or give them "
            "another group.id"
        )
    joined = _classic_members(group)
    if joined:
        return (
            f"{joined} joined group {group_id} with subscribe(): Kafka refuses the sidecars' "
            "manual commits while they are members, so hand-overs cannot be acknowledged; new "
            "plans are held. Stop those consumers or give them another group.id, or set "
            "spec.apply.mode: group"
        )
    return None


def _broker_mismatch(
    group_id: str, group: Mapping[str, Any] | None, kip848: bool, server_assignor: str | None
) -> str | None:
    """Broker mode: the group must be a KIP-848 group whose coordinator assigns with the
    brokers' plan-following assignor."""
    if kip848:
        if server_assignor and server_assignor != SERVER_ASSIGNOR:
            return (
                f"group {group_id}'s coordinator assigns with the server-side assignor "
                f"{server_assignor!r}, not {SERVER_ASSIGNOR!r}: the plan is published but not "
                "followed. Load the kafka-rebalance broker plug-in on every broker "
                "(group.consumer.assignors, docs/kip848.md) as the default assignor, or set "
                f"group.remote.assignor={SERVER_ASSIGNOR} on the consumers"
            )
        return None
    joined = _classic_members(group)
    if joined:
        return (
            f"{joined} joined group {group_id} with the classic protocol: broker mode needs "
            "KIP-848 consumers (group.protocol=consumer), whose assignment the brokers compute. "
            "Switch the consumers, or set spec.apply.mode: group and run them with the sidecar"
        )
    return None


def _classic_members(group: Mapping[str, Any] | None) -> str:
    """`N consumers (assignor 'x': a, b)` for a classic group with members, else ""."""
    if group is None or not group.get("members"):
        return ""
    assignor = group.get("protocol_data") or "?"
    return f"{len(group['members'])} consumers (assignor {assignor!r}: {_member_names(group)})"
