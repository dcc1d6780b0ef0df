"""Timing and machine facts for the Python side, and a plain-text table printer.

Figures are medians of a few calls, each after a `gc.collect()` outside the timed region, so one
call's garbage does not land in the next call's time (the Java harness does the same with
`System.gc()`).
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Timing:
    """Wall and CPU milliseconds of each timed call. On a shared, loaded machine wall time also
    measures the neighbours; CPU time (`time.process_time`, this process only) does not."""

    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return median(self.wall_ms)

    @property
    def cpu(self) -> float:
        return median(self.cpu_ms)


def timed(
    call: Callable[[], T], iterations: int, warmup: int = 0, max_seconds: float = 60.0
) -> tuple[Timing, T]:
    """Time `call` (at least once; fewer than `iterations` times once `max_seconds` of timed work
    is spent) and return the timings and the last result."""
    result: Any = None
    for _ in range(warmup):
        result = call()
    timing = Timing()
    spent = 0.0
    while len(timing.wall_ms) < max(iterations, 1) and (not timing.wall_ms or spent < max_seconds):
        # Drop the previous call's result first: freeing it (a million lists at Kafka's scale)
        # is that call's garbage, and would otherwise be paid inside this call's timed region
        # when `result` is rebound.
        result = None
        gc.collect()
        cpu_start = time.process_time()
        start = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - start
        timing.cpu_ms.append((time.process_time() - cpu_start) * 1000.0)
        spent += elapsed
        timing.wall_ms.append(elapsed * 1000.0)
    return timing, result


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def source_state(root: Path) -> str:
    """The commit benchmarked, and whether the planner's sources differ from it: figures are only
    reproducible against committed code."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "assignors"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown (git not available)"
    return f"{head}" + (" + uncommitted changes in assignors/" if dirty else "")


def machine(java: str, kafka: str, root: Path) -> dict[str, str]:
    return {
        "source": source_state(root),
        "cores": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "memory": _memory_gib(),
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "java": java,
        "kafka": kafka,
        "load average at start (1/5/15 min)": load_average(),
    }


def fmt_ms(value: float | None) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_ratio(value: float | None) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.2f}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (readable in a terminal, pasteable into docs)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
