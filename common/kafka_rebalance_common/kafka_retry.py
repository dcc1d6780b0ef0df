"""Kafka calls that ride out a broker's retriable errors, within a bounded budget.

A broker that has just started answers its first group and offset calls with errors Kafka itself
calls retriable: NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS while `__consumer_offsets` is
created and its coordinators move, LEADER_NOT_AVAILABLE while a new topic elects leaders, plain
connection errors while the listener comes up. kafka-python marks each such error class with
`retriable = True`; that flag is the whole classification here, so a non-retriable error (an
authorization failure, an unknown group, TOPIC_ALREADY_EXISTS) is raised at once, unchanged.

Retries back off exponentially with jitter and stop when the budget (wall time) is spent; then
`RetryBudgetExhausted` names the call, the attempts, the seconds and the last error. Every admin
call of the development harness, the demo, the benchmarks and the integration tests goes through
`RetryingAdmin` (or `call_with_retry` for one-off calls), so none of them fails on a fresh broker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
    wait_random,
)

T = TypeVar("T")

DEFAULT_BUDGET_S = 30.0
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0
JITTER_S = 0.2  # up to this much added to each pause, so parallel callers spread out


class RetryBudgetExhausted(RuntimeError):
    """A retriable Kafka error persisted for the whole budget; `__cause__` is the last one."""


def is_retriable(error: BaseException) -> bool:
    """Kafka's own classification: kafka-python error classes carry `retriable`."""
    return isinstance(error, KafkaError) and bool(getattr(error, "retriable", False))


def call_with_retry(
    call: Callable[..., T],
    *args: Any,
    what: str | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    sleep: Callable[[float], None] = time.sleep,
    **kwargs: Any,
) -> T:
    """`call(*args, **kwargs)`, retried while it raises a retriable Kafka error.

    Raises the first non-retriable error unchanged, or `RetryBudgetExhausted` once retriable
    errors have lasted `budget_s` seconds (at least one attempt is always made)."""
    name = what or getattr(call, "__name__", "Kafka call")
    started = time.monotonic()
    retrying = Retrying(
        retry=retry_if_exception(is_retriable),
        stop=stop_after_delay(budget_s),
        wait=wait_exponential(multiplier=FIRST_BACKOFF_S, max=MAX_BACKOFF_S)
        + wait_random(0, JITTER_S),
        sleep=sleep,
        reraise=False,
    )
    try:
        return retrying(call, *args, **kwargs)
    except RetryError as exhausted:
        last = exhausted.last_attempt.exception()
        raise RetryBudgetExhausted(
            f"{name}: still failing after {exhausted.last_attempt.attempt_number} attempts in "
            f"{time.monotonic() - started:.1f} s: {type(last).__name__}: {last}"
        ) from last


class RetryingAdmin:
    """A `KafkaAdminClient` whose every public method retries retriable errors.

    Attribute access is forwarded: methods come back wrapped in `call_with_retry`, anything else
    (the `_client`, configuration) unchanged. Building the client retries too, since the first
    connection to a broker that is still starting fails with a retriable error."""

    def __init__(self, budget_s: float = DEFAULT_BUDGET_S, **config: Any) -> None:
        self.budget_s = budget_s
        self.client: KafkaAdminClient = call_with_retry(
            KafkaAdminClient, what="connecting the admin client", budget_s=budget_s, **config
        )

    def within(self, budget_s: float) -> RetryingAdmin:
        """The same client under another budget (a live view that must not block for long)."""
        view = object.__new__(RetryingAdmin)
        view.budget_s, view.client = budget_s, self.client
        return view

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.client, name)
        if name.startswith("_") or not callable(value):
            return value

        def retried(*args: Any, **kwargs: Any) -> Any:
            return call_with_retry(
                value, *args, what=f"admin.{name}", budget_s=self.budget_s, **kwargs
            )

        return retried

    def __enter__(self) -> RetryingAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()


def ensure_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    client_id: str = "kafka-rebalance",
    budget_s: float = DEFAULT_BUDGET_S,
    **config: Any,
) -> None:
    """Create `topic` (replication 1, `partitions`) unless it exists; an existing topic is left
    as it is, whatever its partition count."""
    with (
        RetryingAdmin(
            budget_s=budget_s, bootstrap_servers=bootstrap, client_id=client_id, **config
        ) as admin,
        contextlib.suppress(TopicAlreadyExistsError),
    ):
        admin.create_topics([NewTopic(topic, partitions, 1)])
