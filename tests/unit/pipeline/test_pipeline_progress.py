"""Progress of `kafka-rebalance pipeline` jobs: drawn on a terminal, silent otherwise.

The command is run for real with its stderr on a pseudo-terminal (the pty module), on a pipe,
and with --json; `recommend` needs no Spark, so this runs on a small backtest written here. The
drawing itself and the Spark task counter are checked with a fake clock and tracker.
"""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from kafka_rebalance_pipeline.backtest_job import OUTPUT_COLUMNS
from kafka_rebalance_pipeline.replay import backtest_group

from kafka_rebalance.progress_line import ProgressLine, SparkTasks, wanted
from tests.pipeline_fleets import slow_member_fleet, uniform_fleet
from tests.unit.pipeline.test_pipeline_backtest import group_history

COMMAND = str(Path(sys.executable).parent / "kafka-rebalance")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_stage_line_is_redrawn_in_place_with_count_and_rate() -> None:
    out, clock = io.StringIO(), Clock()
    line = ProgressLine(out, clock)
    line.stage("replaying groups")
    clock.now += 2.0
    line.count(10, 40, "groups")
    clock.now += 0.05
    line.count(11, 40, "groups")  # within the redraw interval: not drawn, but remembered
    line.stage("summarising")
    clock.now += 1.0
    line.close()
    text = out.getvalue()
    assert "\r\x1b[K[1] replaying groups: 10/40 groups, 5.0 groups/s, 2s" in text
    assert "11/40" not in text.split("\n")[0].split("\r")[-2]  # the throttled redraw
    finished = [part.split("\r\x1b[K")[-1] for part in text.split("\n")]
    assert finished[0].startswith("[1] replaying groups: 11/40 groups")  # its last count
    assert finished[1] == "[2] summarising"
    assert finished[2] == "done in 3.0s"


def test_only_a_terminal_without_json_gets_progress(tmp_path: Path) -> None:
    with open(tmp_path / "f", "w") as plain:
        assert not wanted(plain, json_only=False)
    primary, secondary = pty.openpty()
    with os.fdopen(secondary, "w") as terminal:
        assert wanted(terminal, json_only=False)
        assert not wanted(terminal, json_only=True)
    os.close(primary)


def test_spark_tasks_counts_tasks_of_the_active_stages_then_the_accumulator() -> None:
    stages = {3: SimpleNamespace(numCompletedTasks=5, numTasks=8), 4: None}
    tracker = SimpleNamespace(
        getActiveStageIds=lambda: list(stages), getStageInfo=lambda i: stages[i]
    )
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))
    seen: list[tuple[int, int | None, str]] = []
    progress = SimpleNamespace(count=lambda d, t, u: seen.append((d, t, u)))
    counter = SimpleNamespace(value=0)
    watcher = SparkTasks(spark, progress, counter, "groups replayed", period=0.01)
    assert watcher.snapshot() == (5, 8)
    with watcher:
        while not seen:
            pass
        counter.value = 7
        while seen[-1][0] != 7:
            pass
    assert seen[0] == (5, 8, "tasks") and seen[-1] == (7, None, "groups replayed")


@pytest.fixture(scope="module")
def backtest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pipeline backtest`'s output for two groups, replayed here without Spark."""
    rows = []
    for index, spec in enumerate((slow_member_fleet(polls=40), uniform_fleet(polls=40))):
        history, _ = group_history(spec, index)  # distinct group names
        rows += backtest_group(history, "strategies")
    directory = tmp_path_factory.mktemp("backtest") / "backtest"
    directory.mkdir()
    pd.DataFrame(rows, columns=OUTPUT_COLUMNS).to_parquet(directory / "part-0.parquet")
    return directory.parent


def recommend(backtest: Path, out: Path, *extra: str, terminal: bool) -> tuple[str, str]:
    """(stdout, stderr) of `pipeline recommend`; stderr on a pseudo-terminal if `terminal`."""
    args = [COMMAND, "pipeline", "recommend", "--backtest", str(backtest), "--out", str(out)]
    if not terminal:
        done = subprocess.run([*args, *extra], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr
    primary, secondary = pty.openpty()
    process = subprocess.Popen([*args, *extra], stdout=subprocess.PIPE, stderr=secondary)
    os.close(secondary)
    drawn = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    stdout = process.stdout.read().decode() if process.stdout else ""
    assert process.wait(timeout=300) == 0
    os.close(primary)
    return stdout, drawn.decode()


def test_recommend_on_a_terminal_shows_its_stages(backtest: Path, tmp_path: Path) -> None:
    stdout, drawn = recommend(backtest, tmp_path / "a", terminal=True)
    # other libraries may write to stderr too (matplotlib's first font-cache notice)
    stages = dict(re.findall(r"\[(\d)\] ([a-z ]+)", drawn))
    assert stages == {
        "1": "reading the backtest",
        "2": "choosing a policy per group",
        "3": "writing patches",
        "4": "rendering the report",
    }
    assert "[2] choosing a policy per group: 2/2 groups" in drawn
    assert re.search(r"done in \d+\.\ds", drawn)
    assert '"groups": 2' in stdout  # the JSON summary still goes to stdout


def test_recommend_is_quiet_with_json_or_without_a_terminal(backtest: Path, tmp_path: Path) -> None:
    stdout, drawn = recommend(backtest, tmp_path / "b", "--json", terminal=True)
    assert drawn.strip() == "" and '"groups": 2' in stdout
    stdout, stderr = recommend(backtest, tmp_path / "c", terminal=False)
    assert stderr == "" and '"groups": 2' in stdout
