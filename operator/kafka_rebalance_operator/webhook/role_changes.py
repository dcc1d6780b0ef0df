"""The webhook's changes to one policy's Role and RoleBinding: one at a time, and batched.

Admissions and pod events come in bursts (a StatefulSet of 500 created or deleted), and each
change is a read-modify-write of one object, so two at once would conflict. Per (namespace,
policy) this replica holds a lock; changes that queue behind it are made together by the next
holder, one write of each object for the whole queue. A burst of N pods then costs a few writes
of the Role instead of N, each of a Role as large as the policy's pods. Replicas still race each
other; their conflicts are retried with jitter (`document_access`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kafka_rebalance_operator.webhook import document_access

Key = tuple[str, str]  # (namespace, policy)


@dataclass(frozen=True)
class _Grant:
    owner_uid: str
    account: str
    documents: tuple[str, ...]
    done: asyncio.Future[None]


class RoleChanges:
    """Grants for admitted pods, names of pods seen and of pods deleted, per policy."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s  # each API call's
        self._locks: dict[Key, asyncio.Lock] = {}
        self._grants: dict[Key, list[_Grant]] = {}
        self._seen: dict[Key, set[str]] = {}
        self._deleted: dict[Key, set[str]] = {}

    def _lock(self, key: Key) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def grant(
        self, namespace: str, policy: str, owner_uid: str, account: str, documents: Iterable[str]
    ) -> None:
        """Returns once `account` may read `documents` (raises what the write raised). The
        write may be another admission's, made for both; one cancelled while it writes (its
        deadline) finishes the write for the others."""
        key = (namespace, policy)
        loop = asyncio.get_running_loop()
        request = _Grant(owner_uid, account, tuple(documents), loop.create_future())
        self._grants.setdefault(key, []).append(request)
        async with self._lock(key):
            batch = self._take_grants(key)
            if batch:
                await asyncio.shield(self._write_grants(namespace, policy, batch))
        await request.done

    def _take_grants(self, key: Key) -> list[_Grant]:
        """The queued grants of the first one's policy incarnation (a Role is created owned by
        one), without those whose admissions gave up."""
        pending = [g for g in self._grants.pop(key, []) if not g.done.done()]
        if not pending:
            return []
        owner = pending[0].owner_uid
        later = [g for g in pending if g.owner_uid != owner]
        if later:
            self._grants[key] = later
        return [g for g in pending if g.owner_uid == owner]

    async def _write_grants(self, namespace: str, policy: str, batch: list[_Grant]) -> None:
        try:
            await asyncio.to_thread(
                document_access.grant,
                namespace,
                policy,
                batch[0].owner_uid,
                sorted({g.account for g in batch}),
                [document for g in batch for document in g.documents],
                self.timeout_s,
            )
        except Exception as error:
            for g in batch:
                if not g.done.done():
                    g.done.set_exception(error)
        else:
            for g in batch:
                if not g.done.done():
                    g.done.set_result(None)

    async def seen(self, namespace: str, policy: str, document: str) -> None:
        """An injected pod that reads `document` exists: the Role names it."""

        def add(names: set[str]) -> None:
            document_access.add_documents(
                namespace, policy, sorted(names), timeout_s=self.timeout_s
            )

        await self._drain(self._seen, (namespace, policy), document, add)

    async def deleted(self, namespace: str, policy: str, pod: str) -> None:
        """Pod `pod` was deleted: its document leaves the Role unless a pod of that name is
        back (`document_access.remove_gone`)."""

        def remove(pods: set[str]) -> None:
            document_access.remove_gone(namespace, policy, pods, self.timeout_s)

        await self._drain(self._deleted, (namespace, policy), pod, remove)

    async def _drain(
        self,
        queue: dict[Key, set[str]],
        key: Key,
        name: str,
        change: Callable[[set[str]], None],
    ) -> None:
        """Queue `name`; under the lock, make the change for everything queued (nothing, when
        an earlier holder took it). A failed change stays queued for the next holder."""
        queue.setdefault(key, set()).add(name)
        async with self._lock(key):
            names = queue.pop(key, set())
            if not names:
                return
            try:
                await asyncio.to_thread(change, names)
            except BaseException:
                queue.setdefault(key, set()).update(names)
                raise
