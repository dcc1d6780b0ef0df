"""Rotated Kafka credentials: notice a changed mounted password file and hand the new value over.

kafka-python authenticates a connection once, with the password it was built with, and a broker
keeps an authenticated connection after the password changes; the next connection (a broker
restart, a leader moving, an idle connection closed) fails with the old one. A Secret mounted as
a volume is updated in place by the kubelet (an atomic swap of the directory behind the file),
so a sidecar that re-reads its password file sees a rotation within the kubelet's sync period,
with no restart of the pod.

`CredentialWatch` re-reads the secret settings every `interval_s` through the same loader that
built them (so a new value is parsed and validated exactly like the first), and on a change
registers the new secrets for log masking before calling `on_change` with them. Reading by
content, not by modification time, follows the kubelet's symlink swap and ignores touches. A file
that cannot be read or is empty for a moment (mid-update) keeps the old value and is retried;
nothing is logged but the file's problem, never a value. The consumer reacts by committing what
it delivered and reconnecting with the new value (consumer.py), so no record is lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kafka_rebalance_common import redaction

log = logging.getLogger(__name__)

Loader = Callable[[], Mapping[str, Any]]
OnChange = Callable[[Mapping[str, Any]], None]


class CredentialWatch:
    """Polls `load()` (the secret client settings, e.g. sasl_plain_password) for changes."""

    def __init__(self, load: Loader, current: Mapping[str, Any], interval_s: float = 5.0):
        self.load = load
        self.current = dict(current)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_change: OnChange | None = None
        self._failing: str | None = None

    def check(self) -> Mapping[str, Any] | None:
        """Read once; the new settings if they differ from the current ones, else None."""
        try:
            fresh = dict(self.load())
        except Exception as error:  # a half-updated file: keep the old value, try again
            message = str(error)
            if message != self._failing:
                log.warning("credentials not re-read (kept the current ones): %s", message)
                self._failing = message
            return None
        self._failing = None
        if fresh == self.current:
            return None
        redaction.register(*(str(v) for v in fresh.values() if v))
        self.current = fresh
        return fresh

    def start(self, on_change: OnChange) -> CredentialWatch:
        self._on_change = on_change
        self._thread = threading.Thread(
            target=self._loop, name="kafka-rebalance-credentials", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            changed = self.check()
            if changed is not None and self._on_change is not None:
                log.info("Kafka credentials changed (%s)", ", ".join(sorted(changed)))
                self._on_change(changed)
