"""The keys broker-mode plan records are signed with (--plan-key-file), re-read when the file
changes, so keys rotate with no restart (docs/security.md, "Rotating the plan key").

Invariants: the first key of the last good file signs. A changed file is read at the first
publish that comes `check_interval_s` or more after the last stat (one stat per interval at
most, on the publishing thread: no thread of its own), so within that interval of the change;
a changed file that cannot be used (unreadable, no key, a short key) keeps the last good keys,
is logged once per change and counted in `kafka_rebalance_plan_key_reload_errors_total`, and
is read again when it changes again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_rebalance_common.wire import plan_record

if TYPE_CHECKING:
    from kafka_rebalance_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

Stamp = tuple[int, int, int] | None  # (mtime ns, size, inode) of the file; None: no file


def _stamp(path: Path) -> Stamp:
    """What changes when the file does. A Kubernetes Secret volume swaps a symlink on update,
    and the stat follows it, so the inode changes even when the mtime does not."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _count_error() -> None:
    from kafka_rebalance_operator import metrics

    metrics.PLAN_KEY_RELOAD_ERRORS.inc()


class PlanKeyRing:
    """The plan key file's keys (first signs), re-read when the file changes. Thread-safe:
    polls publish from worker threads."""

    def __init__(
        self,
        path: str | Path,
        check_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[], None] = _count_error,
    ) -> None:
        """Reads the file now: raises plan_record.PlanKeyError (one line) when it cannot be
        used, so a bad file stops the operator at start rather than at the first publish."""
        self.path = Path(path)
        self.check_interval_s, self._clock, self._on_error = check_interval_s, clock, on_error
        self._lock = threading.Lock()
        self._seen = _stamp(self.path)
        self._keys = plan_record.load_keys(self.path)
        self._checked = clock()
        self.reloads = 0  # changed files taken (tests, logs)
        self.errors = 0  # changed files refused

    def keys(self) -> tuple[bytes, ...]:
        """The current keys, the file read again first if it changed since it was last read."""
        with self._lock:
            now = self._clock()
            if now - self._checked >= self.check_interval_s:
                self._checked = now
                stamp = _stamp(self.path)
                if stamp != self._seen:
                    self._seen = stamp
                    self._reload()
            return self._keys

    def _reload(self) -> None:
        try:
            keys = plan_record.load_keys(self.path)
        except plan_record.PlanKeyError as error:
            self.errors += 1
            self._on_error()
            log.error("%s; plan records stay signed with the last good keys", error)
            return
        if keys != self._keys:
            self.reloads += 1
            log.info(
                "plan key file %s changed: %d keys, the first signs from now on",
                self.path,
                len(keys),
            )
        self._keys = keys


def signing_key(settings: OperatorSettings) -> bytes | None:
    """The key that signs plan records now (None: records go unsigned): the key file's first
    key as last read (`PlanKeyRing`), else the first of the fixed `settings.plan_keys`."""
    ring = settings.plan_key_ring
    keys = ring.keys() if ring is not None else settings.plan_keys
    return keys[0] if keys else None
