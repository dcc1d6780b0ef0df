"""Leaving a group through its heartbeat API (KIP-848 consumer groups, KIP-932 share groups):
the member the operator joins to make a coordinator recompute must leave again.

Invariant: a leave is retried up to LEAVE_ATTEMPTS times, the coordinator looked up again each
time (it may have moved), with full-jitter exponential waits (tenacity), so operators or
policies that failed together after a broker restart do not retry in step. A member the
coordinator no longer knows has left.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from kafka import errors
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

LEAVE_ATTEMPTS = 4
LEAVE_WAIT_S = 0.2  # the first wait's scale; each later one up to twice the last
LEAVE_WAIT_MAX_S = 1.0


class _StillMember(Exception):
    """One leave attempt that did not confirm the member gone (the reason as its message)."""


def leave(
    admin: Any,
    group_id: str,
    heartbeat: Callable[[int], Awaitable[Any]],
    error_text: Callable[[Any], str],
    *,
    sleep: Callable[[float], None] | None = None,
) -> str | None:
    """Send the leave heartbeat (`heartbeat(coordinator id)`, through kafka-python's admin
    client) until the coordinator confirms it; None once the member is gone, else the last
    attempt's reason (`error_text` of a refusal, or the exception). `sleep`: how to wait
    (time.sleep)."""

    def once() -> None:
        async def call() -> Any:
            coordinator = await admin._find_coordinator_id(group_id)
            return await heartbeat(coordinator)

        try:
            left = admin._manager.run(call)
        except Exception as error:  # a timeout, a lost connection: try again
            raise _StillMember(f"{type(error).__name__}: {error}") from error
        if left.error_code and left.error_code != errors.UnknownMemberIdError.errno:
            raise _StillMember(error_text(left))

    retrying = Retrying(
        stop=stop_after_attempt(LEAVE_ATTEMPTS),
        wait=wait_random_exponential(multiplier=LEAVE_WAIT_S, max=LEAVE_WAIT_MAX_S),
        retry=retry_if_exception_type(_StillMember),
        sleep=sleep or time.sleep,
        reraise=True,
    )
    try:
        retrying(once)
    except _StillMember as still:
        return str(still)
    return None
