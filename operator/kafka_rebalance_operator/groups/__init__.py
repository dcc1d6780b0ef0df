"""Group kinds behind one seam (`kind.GroupKind`): consumer, streams and share groups, and the
plan-topic delivery the streams and share kinds share (`plan_topic`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_rebalance_operator.groups import consumer, share, streams
from kafka_rebalance_operator.groups.kind import GroupKind

__all__ = ["GroupKind", "kind_for"]


def kind_for(spec: Mapping[str, Any]) -> GroupKind[Any, Any, Any]:
    """The kind a policy's `spec.groupType` names (consumer when absent; parse_spec refuses
    any other value before a kind is used)."""
    kinds: dict[Any, GroupKind[Any, Any, Any]] = {"streams": streams.KIND, "share": share.KIND}
    return kinds.get(spec.get("groupType"), consumer.KIND)
