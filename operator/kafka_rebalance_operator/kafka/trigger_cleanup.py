"""Taking the streams recompute trigger's reserved tag back out of a group's tags when the
operator stops managing the group as a streams group (the policy deleted, or its groupType or
apply mode changed).

Invariant: best effort and harmless. Only the reserved tag is removed (the app's own tags
stay, `streams_trigger.remove`); when it is not there nothing is written; a failure is logged
with the group and the reason and never raised (the tag left behind changes no assignment: the
broker plug-in strips it, and Kafka's own assignor finds no client tag of that key).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable
from kafka_rebalance_operator.kafka.streams_group import (
    TRIGGER_CONFIG,
    TRIGGER_TAG,
    StreamsGroupError,
)
from kafka_rebalance_operator.ports import Observer

log = logging.getLogger(__name__)


def streams_group_of(spec: Mapping[str, Any] | None) -> str | None:
    """The group id a policy spec manages as a streams group, or None (another group type, or
    no group id)."""
    if not spec or spec.get("groupType") != "streams":
        return None
    group = spec.get("groupId")
    return group if isinstance(group, str) and group else None


def clear_trigger(observer: Observer | None, group_id: str | None, where: str) -> bool:
    """Remove the reserved tag from `group_id`'s tags through `observer`; returns whether it was
    removed (False: nothing to do, not there, or it failed: logged)."""
    if observer is None or not group_id:
        return False
    try:
        removed = observer.clear_streams_trigger(group_id)
    except (KafkaUnavailable, StreamsGroupError) as error:
        log.warning(
            "%s: the tag %s stays in %s of group %s (harmless: the plug-in ignores it): %s",
            where,
            TRIGGER_TAG,
            TRIGGER_CONFIG,
            group_id,
            error,
        )
        return False
    if removed:
        log.info(
            "%s: tag %s removed from %s of group %s", where, TRIGGER_TAG, TRIGGER_CONFIG, group_id
        )
    return removed
