"""A group's own heartbeat interval: the group config `consumer.heartbeat.interval.ms` of a
KIP-848 consumer group, `streams.heartbeat.interval.ms` of a streams group or
`share.heartbeat.interval.ms` of a share group (Kafka 4.x group configs, IncrementalAlterConfigs
on the GROUP resource).

Members learn a new target assignment only at their heartbeats, and a partition or task that
changes owner reaches its new owner at that owner's heartbeat after the old owner released it,
so a plan is followed one to two heartbeat intervals after its trigger (docs/kip848.md, "How
fast a plan is followed"). The brokers bound the interval a group may set by their static
`group.consumer.min.heartbeat.interval.ms` / `group.streams.min.heartbeat.interval.ms` (5 s in
Kafka's defaults) and the matching `max` (15 s); members take a new interval from the
coordinator's answer to their next heartbeat.

Invariant: only the one key of the group's configs is written (an incremental SET, or DELETE
to fall back to the brokers' default); a refusal raises `HeartbeatConfigRefused` with the
brokers' reason on one line, and nothing else of the group's configs changes.
"""

from __future__ import annotations

from typing import Any

from kafka_rebalance_operator.kafka import streams_group

HEARTBEAT_CONFIGS = {
    "consumer": "consumer.heartbeat.interval.ms",
    "streams": "streams.heartbeat.interval.ms",
    "share": "share.heartbeat.interval.ms",
}


class HeartbeatConfigRefused(RuntimeError):
    """The brokers refused the group's heartbeat interval (one line: which group, which value,
    and the brokers' reason, e.g. a value under their minimum)."""


def heartbeat_config(kind: str) -> str:
    """The group config holding the heartbeat interval of a group of `kind`."""
    try:
        return HEARTBEAT_CONFIGS[kind]
    except KeyError:
        known = ", ".join(sorted(HEARTBEAT_CONFIGS))
        raise ValueError(f"group kind {kind!r} has no heartbeat config (known: {known})") from None


def set_heartbeat_interval(admin: Any, group_id: str, kind: str, interval_ms: int | None) -> None:
    """Set the heartbeat interval of group `group_id` (of `kind`: consumer, streams, share) to
    `interval_ms`, or remove the group's own value when None (the brokers' default applies)."""
    key = heartbeat_config(kind)
    if interval_ms is not None and interval_ms <= 0:
        raise ValueError(f"{key} of group {group_id}: {interval_ms} ms is not a positive interval")
    try:
        streams_group.alter(admin, group_id, key, None if interval_ms is None else str(interval_ms))
    except streams_group.StreamsGroupError as error:
        raise HeartbeatConfigRefused(str(error)) from None
