"""ProtocolMismatch: when a group cannot follow the plan the way spec.apply.mode says."""

from __future__ import annotations

from typing import Any

from kafka_rebalance_operator.protocol import PLAN_ASSIGNOR, mismatch


def described(assignor: str, *members: str, protocol_type: str = "consumer") -> dict[str, Any]:
    """The describe_groups entry kafka-python returns (only the fields the check reads)."""
    return {
        "group_state": "Stable" if members else "Empty",
        "protocol_type": protocol_type if members else "",
        "protocol_data": assignor if members else "",
        "error": None,
        "members": [
            {"member_id": f"{m}-uuid", "group_instance_id": m, "member_assignment": {}}
            for m in members
        ],
    }


def test_group_mode_followed_only_with_the_plan_assignor() -> None:
    assert mismatch("group", "g", described(PLAN_ASSIGNOR, "c-0", "c-1"), None) is None
    message = mismatch("group", "g", described("range", "c-1", "c-0"), None)
    assert message is not None
    assert "'range'" in message and "c-0, c-1" in message and PLAN_ASSIGNOR in message
    assert "not followed" in message and "spec.apply.mode: assign" in message


def test_group_mode_nobody_joined_or_unknown_is_not_a_mismatch() -> None:
    assert mismatch("group", "g", described(""), None) is None
    assert mismatch("group", "g", None, None) is None
    # mid-rebalance the selected assignor is not known yet
    rebalancing = described("", "c-0")
    rebalancing["group_state"] = "PreparingRebalance"
    assert mismatch("group", "g", rebalancing, None) is None


def test_kip848_groups_cannot_follow_a_client_side_assignor() -> None:
    dead = {"group_state": "Dead", "members": [], "error": None}
    message = mismatch("group", "orders", dead, "consumer", "Stable")
    assert message is not None and "KIP-848" in message and "group.protocol=classic" in message
    # an empty KIP-848 group converts to classic when the sidecars join: nothing to report
    assert mismatch("group", "orders", dead, "consumer", "Empty") is None
    assigned = mismatch("assign", "orders", dead, "consumer", "Stable")
    assert assigned is not None and "held" in assigned


def test_other_protocol_types_are_named() -> None:
    message = mismatch("group", "g", described("", "w-0", protocol_type="connect"), None)
    assert message is not None and "'connect'" in message


def test_assign_mode_needs_a_group_nobody_joined() -> None:
    assert mismatch("assign", "g", described(""), None) is None
    assert mismatch("assign", "g", None, None) is None
    message = mismatch("assign", "g", described("range", *[f"c-{i}" for i in range(7)]), None)
    assert message is not None
    assert message.startswith("7 consumers (assignor 'range': ")
    assert "joined group g with subscribe()" in message
    assert "c-0, c-1, c-2, c-3, c-4 and 2 more" in message and "held" in message
    # even members using the plan assignor block manual commits
    assert mismatch("assign", "g", described(PLAN_ASSIGNOR, "c-0"), None) is not None


def test_broker_mode_needs_kip848_consumers_assigned_by_the_plan_plugin() -> None:
    from kafka_rebalance_operator.protocol import SERVER_ASSIGNOR

    following = mismatch("broker", "g", None, "consumer", "Stable", server_assignor=SERVER_ASSIGNOR)
    assert following is None
    absent = mismatch("broker", "g", None, "consumer", "Stable", server_assignor="uniform")
    assert absent is not None
    assert "'uniform'" in absent and "group.consumer.assignors" in absent
    assert "not followed" in absent and "docs/kip848.md" in absent
    classic = mismatch("broker", "g", described("range", "c-0"), None)
    assert classic is not None and "group.protocol=consumer" in classic
    assert (
        mismatch(
            "broker",
            "g",
            described(
                "",
            ),
            "consumer",
            "Empty",
        )
        is None
    )
