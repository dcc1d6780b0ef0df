"""The nudge's leave is retried with jittered waits (`kip848.leave`, `group_leave`): a
coordinator that refuses or drops the leave heartbeat does not leave the nudge member in the
group until its session times out. The
requests go to a scripted stand-in for kafka-python's connection manager; the real-broker
proof of the nudge is tests/integration/test_broker_mode.py."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.errors import NotCoordinatorError, UnknownMemberIdError
from kafka_rebalance_operator.kafka import group_leave, kip848, share_group


class ScriptedAdmin:
    """Answers each ConsumerGroupHeartbeat with the next scripted error code (or raises)."""

    def __init__(self, answers: list[int | Exception]) -> None:
        self.answers = answers
        self.sent: list[Any] = []
        self._manager = self

    async def _find_coordinator_id(self, group_id: str) -> int:
        return 1

    async def send(self, request: Any, node_id: int) -> Any:
        self.sent.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return SimpleNamespace(error_code=answer, error_message=None, member_epoch=7)

    def run(self, call: Callable[[], Any]) -> Any:
        return asyncio.run(call())


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits between leave attempts, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(group_leave.time, "sleep", slept.append)
    return slept


def test_a_refused_or_lost_leave_is_retried_until_the_member_is_gone() -> None:
    admin = ScriptedAdmin([0, NotCoordinatorError.errno, TimeoutError("lost"), 0])
    assert kip848.nudge(admin, "g") == 7
    join, *leaves = admin.sent
    assert join.member_epoch == kip848.JOIN_EPOCH
    assert [r.member_epoch for r in leaves] == [kip848.LEAVE_EPOCH] * 3
    assert {r.member_id for r in admin.sent} == {join.member_id}


def test_a_member_the_coordinator_no_longer_knows_has_left() -> None:
    admin = ScriptedAdmin([0, UnknownMemberIdError.errno])
    kip848.nudge(admin, "g")
    assert len(admin.sent) == 2


def test_a_member_that_never_leaves_is_named_for_a_later_retry() -> None:
    admin = ScriptedAdmin([0] + [NotCoordinatorError.errno] * group_leave.LEAVE_ATTEMPTS)
    with pytest.raises(kip848.NudgeLeftBehind) as raised:
        kip848.nudge(admin, "g")
    assert raised.value.group_id == "g"
    assert raised.value.member_id == admin.sent[0].member_id
    assert "did not leave" in str(raised.value)


def test_the_waits_between_attempts_are_jittered_and_bounded(waits: list[float]) -> None:
    """Full jitter: each wait is drawn from [0, min(max, scale x 2^attempt)], so policies that
    failed together do not retry in step; two draws of the same failures wait differently."""
    drawn = []
    for seed in (1, 2):
        random.seed(seed)
        waits.clear()
        admin = ScriptedAdmin([0] + [NotCoordinatorError.errno] * group_leave.LEAVE_ATTEMPTS)
        with pytest.raises(kip848.NudgeLeftBehind):
            kip848.nudge(admin, "g")
        assert len(waits) == group_leave.LEAVE_ATTEMPTS - 1
        for attempt, wait in enumerate(waits, start=1):
            bound = min(group_leave.LEAVE_WAIT_MAX_S, group_leave.LEAVE_WAIT_S * 2**attempt)
            assert 0 <= wait <= bound, (attempt, wait, bound)
        drawn.append(list(waits))
    assert drawn[0] != drawn[1]


def test_a_share_trigger_member_that_never_leaves_is_reported() -> None:
    admin = ScriptedAdmin([NotCoordinatorError.errno] * group_leave.LEAVE_ATTEMPTS)
    with pytest.raises(share_group.ShareGroupError, match="did not leave after 4 attempts"):
        share_group.leave(admin, "g", "m-1")
    assert len(admin.sent) == group_leave.LEAVE_ATTEMPTS
