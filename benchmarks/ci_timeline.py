"""A pytest plugin that records when each test started and ended, per xdist worker: the profile
of a CI run (`scripts/ci-cold` loads it with `PYTEST_ADDOPTS="-p benchmarks.ci_timeline"`).

Each worker appends `start<TAB>end<TAB>nodeid` lines (wall-clock seconds) to
`$CI_TIMELINE_DIR/timeline-<worker>.tsv`; `python -m benchmarks.ci_timeline DIR` sums them per
worker, xdist group and file. Setup and teardown count with the test that ran them, so a
session environment's start shows in the first test that needed it.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

_started: dict[str, float] = {}


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _started[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    directory = os.environ.get("CI_TIMELINE_DIR")
    if not directory:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = f"{_started.get(nodeid, 0.0):.2f}\t{time.time():.2f}\t{nodeid}\n"
    with open(Path(directory) / f"timeline-{worker}.tsv", "a", encoding="utf-8") as out:
        out.write(line)


def summary(directory: Path, top: int = 12) -> str:
    """Per worker its span and busy time by xdist group; then the files and tests that took
    longest over all workers."""
    lines: list[str] = []
    by_file: dict[str, float] = defaultdict(float)
    tests: list[tuple[float, str]] = []
    for path in sorted(directory.glob("timeline-gw*.tsv")):
        groups: dict[str, float] = defaultdict(float)
        first, last = float("inf"), 0.0
        for row in path.read_text(encoding="utf-8").splitlines():
            start, end, nodeid = row.split("\t", 2)
            took = float(end) - float(start)
            first, last = min(first, float(start)), max(last, float(end))
            groups[nodeid.rpartition("@")[2] if "@" in nodeid else "(no group)"] += took
            by_file[nodeid.split("::", 1)[0]] += took
            tests.append((took, nodeid))
        busy = ", ".join(f"{g} {s:.0f} s" for g, s in sorted(groups.items(), key=lambda i: -i[1]))
        lines.append(f"{path.stem}: span {last - first:.0f} s; {busy}")
    lines.append("files:")
    lines += [f"  {s:7.0f} s  {f}" for f, s in sorted(by_file.items(), key=lambda i: -i[1])[:top]]
    lines.append("tests:")
    lines += [f"  {s:7.0f} s  {n}" for s, n in sorted(tests, reverse=True)[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
