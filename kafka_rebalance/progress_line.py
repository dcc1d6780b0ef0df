"""Progress of a long `kafka-rebalance pipeline` job on a terminal: one line per stage.

The line of the running stage is redrawn in place (`\\r`, erase to end of line) at most a few
times a second with the count, the rate since the stage started and the elapsed time; a finished
stage keeps its last line. Nothing is drawn unless the stream is a terminal and the user did not
ask for `--json`: pipes, files and CI logs get the JSON summary on stdout and nothing else.

Spark's own work is counted by `SparkTasks`, a daemon thread that reads Spark's status tracker
(tasks completed of the active stages) and, for the backtest, an accumulator of groups replayed
(Spark sends an accumulator's updates to the driver as each task finishes).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

REDRAW_S = 0.2


def wanted(stream: TextIO, json_only: bool) -> bool:
    """Draw progress only for a person: a terminal, and not `--json`."""
    return not json_only and stream.isatty()


class ProgressLine:
    """`kafka_rebalance_pipeline.progress.Progress` drawn on a terminal stream."""

    def __init__(self, stream: TextIO = sys.stderr, clock: Callable[[], float] = time.monotonic):
        self.stream, self.clock = stream, clock
        self.lock = threading.Lock()
        self.number = 0
        self.name = ""
        self.started = self.job_started = clock()
        self.drawn_at = float("-inf")
        self.text = ""

    def stage(self, name: str) -> None:
        with self.lock:
            self._finish_line()
            self.number += 1
            self.name, self.started = name, self.clock()
            self._draw(f"[{self.number}] {name}", force=True)

    def count(self, done: int, total: int | None, unit: str) -> None:
        with self.lock:
            now = self.clock()
            elapsed = now - self.started
            of = f"{done}/{total}" if total is not None else f"{done}"
            rate = f", {done / elapsed:.1f} {unit}/s" if elapsed > 0 and done else ""
            text = f"[{self.number}] {self.name}: {of} {unit}{rate}, {elapsed:.0f}s"
            self._draw(text, force=total is not None and done >= total)

    def close(self) -> None:
        with self.lock:
            self._finish_line()
            total = self.clock() - self.job_started
            self.stream.write(f"done in {total:.1f}s\n")
            self.stream.flush()

    def _draw(self, text: str, force: bool) -> None:
        now = self.clock()
        if not force and now - self.drawn_at < REDRAW_S:
            self.text = text  # kept for the stage's last line
            return
        self.stream.write(f"\r\x1b[K{text}")
        self.stream.flush()
        self.text, self.drawn_at = text, now

    def _finish_line(self) -> None:
        if self.number:
            self.stream.write(f"\r\x1b[K{self.text}\n")
            self.stream.flush()


class SparkTasks:
    """While a Spark job runs: tasks done of the active stages, or, once it grows within the
    current stage, a count read from an accumulator (`counted`: its unit), reported to `progress`
    about every `period` seconds."""

    def __init__(
        self,
        spark: Any,
        progress: Any,
        counter: Any = None,
        counted: str = "",
        period: float = 0.5,
    ) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.progress, self.counter, self.counted = progress, counter, counted
        self.period = period
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)

    def __enter__(self) -> SparkTasks:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)

    def snapshot(self) -> tuple[int, int]:
        done = total = 0
        for stage_id in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return done, total

    def _run(self) -> None:
        stage, base = None, 0  # the accumulator counts per job: show what this stage added
        while not self.stopped.wait(self.period):
            value = int(self.counter.value) if self.counter is not None else 0
            if getattr(self.progress, "number", None) != stage:
                stage, base = getattr(self.progress, "number", None), value
            if value > base:
                self.progress.count(value - base, None, self.counted)
                continue
            done, total = self.snapshot()
            if total:
                self.progress.count(done, total, "tasks")
