"""The standby count a streams group's task assignor is given: the group config
`streams.num.standby.replicas` (KIP-1071 groups read it from the group, not from the client's
`num.standby.replicas`), as DescribeConfigs reports it (the broker default when the group sets
none).

Invariant: `standby_replicas_in` returns a count only when the brokers reported one for this
group; any error or absence is a one-line `StandbyConfigUnknown`, and the caller plans no
standbys (the plug-in then places them itself), never a guessed count.
"""

from __future__ import annotations

from typing import Any

from kafka import errors
from kafka.admin import ConfigResourceType

from kafka_rebalance_operator.kafka import streams_group

STANDBY_CONFIG = "streams.num.standby.replicas"


class StandbyConfigUnknown(RuntimeError):
    """The group's standby count could not be read (one line: which group, and why)."""


def read_standby_replicas(admin: Any, group_id: str) -> int:
    """The group's `streams.num.standby.replicas` as the brokers report it."""
    resource = streams_group.group_resource(group_id, {STANDBY_CONFIG: None})

    async def call() -> Any:
        request = admin._describe_configs_request([resource])
        return await admin._manager.send(request)

    return standby_replicas_in(admin._manager.run(call), group_id)


def standby_replicas_in(response: Any, group_id: str) -> int:
    """`streams.num.standby.replicas` of `group_id` in a decoded DescribeConfigs response;
    raises StandbyConfigUnknown on a per-resource error, a missing entry or a value that is not
    a count."""
    for result in response.results or []:
        if result.resource_type != ConfigResourceType.GROUP.value or (
            result.resource_name != group_id
        ):
            continue
        if result.error_code:
            name = errors.for_code(result.error_code).__name__
            raise StandbyConfigUnknown(
                f"reading {STANDBY_CONFIG} of group {group_id}: {name} ({result.error_code})"
            )
        for entry in result.configs or []:
            if entry.name == STANDBY_CONFIG:
                value = str(entry.value or "").strip()
                if not value.isdigit():
                    raise StandbyConfigUnknown(
                        f"{STANDBY_CONFIG} of group {group_id}: {entry.value!r} is not a count"
                    )
                return int(value)
        raise StandbyConfigUnknown(
            f"reading {STANDBY_CONFIG} of group {group_id}: the brokers do not report it"
        )
    raise StandbyConfigUnknown(
        f"reading {STANDBY_CONFIG} of group {group_id}: the answer has no entry for the group"
    )
