"""role_changes: a burst of grants, sightings or deletions of one policy's pods is written in a
few calls, every admission learns its own outcome, and nothing queued is lost."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from kafka_rebalance_operator.webhook import document_access, role_changes


class Calls:
    """What reached document_access; the first call blocks until `release` is set, so the
    requests behind it queue up as they would behind a slow API server."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, Any, Any]] = []
        self.release = threading.Event()
        self.fail = fail

    def record(self, what: str, first: Any, second: Any = None) -> None:
        self.calls.append((what, first, second))
        if len(self.calls) == 1:
            assert self.release.wait(5)
        if self.fail:
            raise RuntimeError("the API server answered 500")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    made = Calls()

    def grant(namespace: str, policy: str, owner: str, accounts: Any, documents: Any, t: float):
        made.record("grant", sorted(accounts), sorted(documents))

    def add_documents(namespace: str, policy: str, documents: Any, timeout_s: float) -> None:
        made.record("seen", sorted(documents))

    def remove_gone(namespace: str, policy: str, pods: Any, timeout_s: float) -> set[str]:
        made.record("deleted", sorted(pods))
        return set(pods)

    monkeypatch.setattr(document_access, "grant", grant)
    monkeypatch.setattr(document_access, "add_documents", add_documents)
    monkeypatch.setattr(document_access, "remove_gone", remove_gone)
    return made


async def _let_queue(calls: Calls, requests: list[asyncio.Task[Any]]) -> None:
    """Let every request queue behind the first call, then let that call finish."""
    for _ in range(50):
        await asyncio.sleep(0.01)
    calls.release.set()
    await asyncio.gather(*requests, return_exceptions=True)


def test_grants_queued_behind_a_write_are_made_in_one(calls: Calls) -> None:
    async def main() -> None:
        changes = role_changes.RoleChanges(1.0)
        requests = [
            asyncio.create_task(changes.grant("ns", "orders", "uid-1", f"sa-{i % 2}", [f"d{i}"]))
            for i in range(5)
        ]
        await _let_queue(calls, requests)
        assert all(r.exception() is None for r in requests)

    asyncio.run(main())
    assert calls.calls == [
        ("grant", ["sa-0"], ["d0"]),
        ("grant", ["sa-0", "sa-1"], ["d1", "d2", "d3", "d4"]),
    ]


def test_a_failed_write_fails_every_admission_it_was_made_for(monkeypatch: Any) -> None:
    calls = Calls(fail=True)
    monkeypatch.setattr(
        document_access,
        "grant",
        lambda ns, policy, owner, accounts, documents, t: calls.record(
            "grant", sorted(accounts), sorted(documents)
        ),
    )

    async def main() -> list[BaseException | None]:
        changes = role_changes.RoleChanges(1.0)
        requests = [
            asyncio.create_task(changes.grant("ns", "orders", "uid-1", "sa", [f"d{i}"]))
            for i in range(3)
        ]
        await _let_queue(calls, requests)
        return [r.exception() for r in requests]

    errors = asyncio.run(main())
    assert [str(e) for e in errors] == ["the API server answered 500"] * 3
    assert [c[2] for c in calls.calls] == [["d0"], ["d1", "d2"]]


def test_an_admission_that_gives_up_while_writing_still_writes_for_the_others(
    calls: Calls,
) -> None:
    async def main() -> list[Any]:
        changes = role_changes.RoleChanges(1.0)
        first = asyncio.create_task(changes.grant("ns", "orders", "uid-1", "sa", ["d0"]))
        await asyncio.sleep(0.05)  # first is writing
        others = [
            asyncio.create_task(changes.grant("ns", "orders", "uid-1", "sa", [f"d{i}"]))
            for i in (1, 2)
        ]
        await asyncio.sleep(0.05)
        first.cancel()  # its deadline
        await _let_queue(calls, others)
        return [r.exception() for r in others]

    assert asyncio.run(main()) == [None, None]
    assert [c[2] for c in calls.calls] == [["d0"], ["d1", "d2"]]


def test_grants_of_another_incarnation_wait_for_their_own_write(calls: Calls) -> None:
    async def main() -> None:
        changes = role_changes.RoleChanges(1.0)
        requests = [
            asyncio.create_task(changes.grant("ns", "orders", uid, "sa", [document]))
            for uid, document in (("uid-1", "a"), ("uid-1", "b"), ("uid-2", "c"), ("uid-1", "d"))
        ]
        await _let_queue(calls, requests)
        assert all(r.exception() is None for r in requests)

    asyncio.run(main())
    assert [c[2] for c in calls.calls] == [["a"], ["b", "d"], ["c"]]


def test_deletions_and_sightings_queued_behind_a_change_are_made_together(calls: Calls) -> None:
    async def main() -> None:
        changes = role_changes.RoleChanges(1.0)
        deleted = [
            asyncio.create_task(changes.deleted("ns", "orders", f"pod-{i}")) for i in range(4)
        ]
        seen = [asyncio.create_task(changes.seen("ns", "orders", f"doc-{i}")) for i in range(3)]
        await _let_queue(calls, deleted + seen)

    asyncio.run(main())
    assert calls.calls == [
        ("deleted", ["pod-0"], None),
        ("deleted", ["pod-1", "pod-2", "pod-3"], None),
        ("seen", ["doc-0", "doc-1", "doc-2"], None),
    ]


def test_a_failed_deletion_stays_queued_for_the_next_one(monkeypatch: Any) -> None:
    failing = {"left": 1}
    removed: list[list[str]] = []

    def remove_gone(namespace: str, policy: str, pods: Any, timeout_s: float) -> set[str]:
        if failing["left"]:
            failing["left"] -= 1
            raise RuntimeError("timed out")
        removed.append(sorted(pods))
        return set(pods)

    monkeypatch.setattr(document_access, "remove_gone", remove_gone)

    async def main() -> None:
        changes = role_changes.RoleChanges(1.0)
        with pytest.raises(RuntimeError):
            await changes.deleted("ns", "orders", "pod-0")
        await changes.deleted("ns", "orders", "pod-1")

    asyncio.run(main())
    assert removed == [["pod-0", "pod-1"]]
