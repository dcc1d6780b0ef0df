"""How a pipeline job says how far it is: stages and counts, to whoever listens.

The jobs only call `stage()` and `count()`; whether that reaches a terminal is the caller's
choice (`kafka_rebalance.progress_line` draws it on a TTY, `QUIET` drops it), so a job's result
and its JSON summary never depend on it.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def stage(self, name: str) -> None:
        """A new step of the job starts (the previous one is finished)."""

    def count(self, done: int, total: int | None, unit: str) -> None:
        """Within the current stage: `done` of `total` (None: unknown) `unit`s."""


class _Quiet:
    def stage(self, name: str) -> None:
        pass

    def count(self, done: int, total: int | None, unit: str) -> None:
        pass


QUIET: Progress = _Quiet()
