"""The streams recompute trigger on the group config `streams.rack.aware.assignment.tags`:
toggle the reserved tag (`streams_group.TRIGGER_TAG`) in or out, or remove it, changing
nothing else in the list.

Invariants:
- Nothing is written unless the current value was read: DescribeConfigs is sent and decoded
  here, and a per-resource error in its answer (kafka-python's `describe_configs` drops those
  and returns an empty result, which once made the list look empty) raises `TriggerFailed`
  with nothing written.
- Only the reserved tag changes: the value written is the value read with that one tag added
  or removed (`streams_group.toggled_tags`, `streams_group.without_trigger`).
- The write is a compare-and-set loop: read, write, read back (until the brokers' metadata
  shows a change: a read right after the write may still show the old value); a read-back that
  differs from what was written means another writer came after ours, and the change is
  computed again from what is there (jittered backoff between rounds). Kafka 4.4 has no
  conditional config write, and it refuses APPEND/SUBTRACT on group configs ("Can't APPEND to
  key ... because its type is not LIST": its controller validates list operations against
  broker and topic configs only), so a write landing between our read and our write (one round
  trip) is the one case left undetected.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafka import errors
from kafka.admin import ConfigResourceType
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from kafka_rebalance_operator.kafka import streams_group
from kafka_rebalance_operator.kafka.streams_group import TRIGGER_CONFIG

ATTEMPTS = 5  # compare-and-set rounds before giving up (each a read, a write and a read-back)
SETTLE_S = 3.0  # how long a read-back may still show the value before the write


class TriggerFailed(RuntimeError):
    """The trigger could not be made safely (the config could not be read, or other writers
    kept changing it): the message says what, and that the app's own tags were not touched."""


class _Raced(Exception):
    """The read-back differs from the value written: another writer came after ours."""


def read_tags(admin: Any, group_id: str) -> str | None:
    """The group's `streams.rack.aware.assignment.tags` as the brokers report it (None: the
    config has no value). Raises TriggerFailed when the brokers answer with an error for the
    group's resource or leave the config out of the answer."""
    resource = streams_group.group_resource(group_id, {TRIGGER_CONFIG: None})

    async def call() -> Any:
        request = admin._describe_configs_request([resource])
        return await admin._manager.send(request)

    response = admin._manager.run(call)
    return tags_in(response, group_id)


def tags_in(response: Any, group_id: str) -> str | None:
    """The value of `streams.rack.aware.assignment.tags` for `group_id` in a decoded
    DescribeConfigs response; raises TriggerFailed on a per-resource error or when the group's
    resource or the config is missing from it."""
    for result in response.results or []:
        if result.resource_type != ConfigResourceType.GROUP.value or (
            result.resource_name != group_id
        ):
            continue
        if result.error_code:
            name = errors.for_code(result.error_code).__name__
            detail = f": {result.error_message}" if result.error_message else ""
            raise TriggerFailed(
                f"reading {TRIGGER_CONFIG} of group {group_id}: {name} ({result.error_code})"
                f"{detail}; nothing was changed"
            )
        for entry in result.configs or []:
            if entry.name == TRIGGER_CONFIG:
                value: str | None = entry.value
                return value
        raise TriggerFailed(
            f"reading {TRIGGER_CONFIG} of group {group_id}: the brokers do not know the "
            "config (a streams-capable broker, Kafka 4.1 or later, reports it); nothing was "
            "changed"
        )
    raise TriggerFailed(
        f"reading {TRIGGER_CONFIG} of group {group_id}: the brokers' answer has no entry for "
        "the group; nothing was changed"
    )


def _same(a: str | None, b: str | None) -> bool:
    """Two values of the list config mean the same tags (None and "" are both no tags)."""
    return streams_group.tag_list(a) == streams_group.tag_list(b)


def swap(
    admin: Any,
    group_id: str,
    change: Callable[[str | None], str | None],
    *,
    attempts: int = ATTEMPTS,
    wait_max_s: float = 2.0,
    settle_s: float = SETTLE_S,
) -> tuple[str | None, str | None]:
    """Compare-and-set the group's tags to `change(current)`: read, write (nothing when the
    change leaves the tags as they are), read back; a read-back other than the value written is
    a race lost to another writer, and the round starts again from the new value, after a
    jittered backoff, at most `attempts` rounds. Returns (value read, value written: None when
    the config was deleted or nothing needed writing, check with `_same`). Raises
    TriggerFailed (read refused, rounds exhausted) and streams_group.StreamsGroupError (the
    write refused)."""

    def one_round() -> tuple[str | None, str | None]:
        current = read_tags(admin, group_id)
        wanted = change(current)
        if _same(current, wanted):
            return current, current
        streams_group.alter(admin, group_id, TRIGGER_CONFIG, wanted)
        if not _same(_read_back(admin, group_id, current, settle_s), wanted):
            raise _Raced
        return current, wanted

    retrying = Retrying(
        retry=retry_if_exception_type(_Raced),
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=0.05, max=wait_max_s),
        reraise=False,
    )
    try:
        result: tuple[str | None, str | None] = retrying(one_round)
    except RetryError:
        raise TriggerFailed(
            f"setting {TRIGGER_CONFIG} of group {group_id}: another writer changed it in each "
            f"of {attempts} compare-and-set rounds; the app's own tags were left as that "
            "writer set them"
        ) from None
    return result


def _read_back(admin: Any, group_id: str, before: str | None, settle_s: float) -> str | None:
    """The tags after our write, as the brokers report them once they show it: a broker
    answers DescribeConfigs from its metadata image, which applies the controller's record a
    moment after the write was acknowledged, so a read that still shows `before` is read again
    (every 50 ms, up to `settle_s`). Returns the last value read."""
    deadline = time.monotonic() + settle_s
    while True:
        seen = read_tags(admin, group_id)
        if not _same(seen, before) or time.monotonic() >= deadline:
            return seen
        time.sleep(0.05)


def trigger(admin: Any, group_id: str) -> str:
    """Make the group's coordinator recompute its target assignment: toggle the reserved tag
    in the group's tags, keeping the app's own (`swap`). Returns the value set ("" when the
    config was deleted)."""
    _, written = swap(admin, group_id, streams_group.toggled_tags)
    return written or ""


def remove(admin: Any, group_id: str) -> bool:
    """Take the reserved tag out of the group's tags, keeping the app's own (for a policy
    deleted, or no longer managing the group as a streams group in broker mode). Returns
    whether it was there."""
    current, written = swap(admin, group_id, streams_group.without_trigger)
    return not _same(current, written)
