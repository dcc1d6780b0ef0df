"""A broker-assigned group's own heartbeat interval, kept as its policy says
(`spec.apply.heartbeatInterval`).

A member learns a new target assignment only at its heartbeats, so the group's heartbeat
interval is how long a published plan waits for each member (docs/kip848.md, "A shorter
heartbeat"); the brokers bound it by their `group.*.min.heartbeat.interval.ms` / `max`.

Invariants: the group config is written only when the policy's value differs from the one this
operator last wrote for the group (`PolicyMemory.heartbeat_written`), so a steady policy costs no
call per poll; a value the policy stops naming, or the value of a group the policy no longer
names, is removed (the brokers' default applies again) only when this operator wrote it; a
refusal stalls the policy with reason `HeartbeatIntervalRefused` and the brokers' reason, and the
poll plans and publishes nothing.
"""

from __future__ import annotations

from kafka_rebalance_operator.kafka.group_heartbeat import HeartbeatConfigRefused
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.context import PollFailure
from kafka_rebalance_operator.policy import PolicySpec
from kafka_rebalance_operator.ports import Observer

REFUSED_REASON = "HeartbeatIntervalRefused"


def keep_heartbeat(spec: PolicySpec, observer: Observer, memory: PolicyMemory) -> None:
    """Bring the group's own heartbeat interval to the policy's (a no-op while it is there)."""
    wanted = spec.heartbeat_interval_ms
    written = memory.heartbeat_written
    if written is None and wanted is None:
        return
    if written == (spec.group_id, wanted):
        return
    try:
        if written is not None and written[0] != spec.group_id:
            # the policy moved to another group: the old one gets the brokers' default back
            observer.set_heartbeat_interval(written[0], spec.group_type, None)
            memory.heartbeat_written = written = None
        if written is None and wanted is None:
            return
        observer.set_heartbeat_interval(spec.group_id, spec.group_type, wanted)
    except HeartbeatConfigRefused as error:
        raise PollFailure(REFUSED_REASON, f"spec.apply.heartbeatInterval: {error}") from None
    except KafkaUnavailable as error:
        raise PollFailure("KafkaUnreachable", str(error), stalled=False) from None
    memory.heartbeat_written = None if wanted is None else (spec.group_id, wanted)
