"""Executor CPU per stage from a Spark event log, the CPU figure of docs/pipeline-benchmarks.md.

Run the step with `--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=DIR` (and
`--conf spark.eventLog.compress=false`, or have `zstd` on the PATH for Spark's default
compression), then:

    python -m benchmarks.pipeline_event_cpu DIR            # the newest log in DIR
    python -m benchmarks.pipeline_event_cpu DIR/eventlog_v2_local-...

Prints one JSON line: the log, the executors' total CPU seconds (each task's "Executor CPU
Time"), and per stage its CPU seconds, input records, shuffle records read and written.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any


def _lines(path: Path) -> list[str]:
    if path.suffix == ".zstd":
        return subprocess.run(
            ["zstd", "-dc", str(path)], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    return path.read_text().splitlines()


def stage_cpu(log: Path) -> dict[str, Any]:
    """Executor CPU seconds and record counts per stage of one event log (file or v2 dir)."""
    files = sorted(log.glob("events_*")) if log.is_dir() else [log]
    stages: dict[int, dict[str, float]] = {}
    for path in files:
        for line in _lines(path):
            event = json.loads(line)
            if event.get("Event") != "SparkListenerTaskEnd":
                continue
            metrics = event.get("Task Metrics") or {}
            stage = stages.setdefault(
                event["Stage ID"], {"cpu_s": 0.0, "input": 0, "shuffle_read": 0, "shuffle_write": 0}
            )
            stage["cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
            stage["input"] += (metrics.get("Input Metrics") or {}).get("Records Read", 0)
            read = metrics.get("Shuffle Read Metrics") or {}
            stage["shuffle_read"] += read.get("Total Records Read", 0)
            write = metrics.get("Shuffle Write Metrics") or {}
            stage["shuffle_write"] += write.get("Shuffle Records Written", 0)
    for stage in stages.values():
        stage["cpu_s"] = round(stage["cpu_s"], 1)
    total = round(sum(s["cpu_s"] for s in stages.values()), 1)
    return {"log": log.name, "executor_cpu_s": total, "stages": stages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="an event log, or a directory of them (newest)")
    args = parser.parse_args()
    log = args.log
    if log.is_dir() and not any(log.glob("events_*")):
        log = max(log.iterdir(), key=lambda p: p.stat().st_mtime)
    print(json.dumps(stage_cpu(log)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
