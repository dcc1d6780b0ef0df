"""The shared retry helper: Kafka's retriable errors are ridden out within a budget, others are
raised at once, and an exhausted budget names the call, its attempts and the last error."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import (
    CoordinatorLoadInProgressError,
    GroupAuthorizationFailedError,
    NotCoordinatorError,
    TopicAlreadyExistsError,
)
from kafka_rebalance_common.kafka_retry import (
    RetryBudgetExhausted,
    RetryingAdmin,
    call_with_retry,
    is_retriable,
)


class Script:
    """A call that raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append((args, kwargs))
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_kafka_flags_decide_what_is_retriable() -> None:
    assert is_retriable(NotCoordinatorError())
    assert is_retriable(CoordinatorLoadInProgressError())
    assert not is_retriable(GroupAuthorizationFailedError())
    assert not is_retriable(TopicAlreadyExistsError())
    assert not is_retriable(ValueError("not a Kafka error"))


def test_not_coordinator_then_success_returns_the_result() -> None:
    call = Script(NotCoordinatorError("moving"), CoordinatorLoadInProgressError("loading"))
    pauses: list[float] = []
    assert call_with_retry(call, {"g": None}, timeout_ms=5, sleep=pauses.append) == "ok"
    assert len(call.calls) == 3
    assert call.calls[-1] == (({"g": None},), {"timeout_ms": 5})
    assert len(pauses) == 2 and all(0 < p <= 2.0 for p in pauses)


def test_a_non_retriable_error_is_raised_at_once_unchanged() -> None:
    call = Script(GroupAuthorizationFailedError("denied"))
    with pytest.raises(GroupAuthorizationFailedError):
        call_with_retry(call, sleep=lambda _s: None)
    assert len(call.calls) == 1


def test_an_exhausted_budget_names_the_call_attempts_and_last_error() -> None:
    call = Script(*[NotCoordinatorError(f"attempt {i}") for i in range(1000)])
    with pytest.raises(RetryBudgetExhausted) as raised:
        call_with_retry(call, what="admin.list_group_offsets", budget_s=0.3)
    message = str(raised.value)
    assert message.startswith("admin.list_group_offsets: still failing after ")
    assert f"after {len(call.calls)} attempts" in message
    assert "NotCoordinatorError" in message
    assert isinstance(raised.value.__cause__, NotCoordinatorError)
    assert 2 <= len(call.calls) < 1000


class FakeClient:
    """Stands in for KafkaAdminClient: one method that fails once, one plain attribute."""

    def __init__(self) -> None:
        self.config = {"client_id": "x"}
        self.list_group_offsets = Script(NotCoordinatorError("fresh broker"))
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_retrying_admin_wraps_every_method_and_forwards_attributes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[dict[str, Any]] = []

    def factory(**config: Any) -> FakeClient:
        made.append(config)
        if len(made) == 1:
            raise NotCoordinatorError("listener not up")  # the constructor retries too
        return FakeClient()

    monkeypatch.setattr("kafka_rebalance_common.kafka_retry.KafkaAdminClient", factory)
    with RetryingAdmin(budget_s=5, bootstrap_servers="127.0.0.1:1") as admin:
        assert admin.list_group_offsets({"g": None}) == "ok"
        assert len(admin.client.list_group_offsets.calls) == 2
        assert admin.config == {"client_id": "x"}
        assert admin.within(0.5).budget_s == 0.5 and admin.within(0.5).client is admin.client
    assert admin.client.closed
    assert made == [{"bootstrap_servers": "127.0.0.1:1"}] * 2
