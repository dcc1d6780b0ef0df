"""Process-group supervision of the dev environment: stops what it started, and only that."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from kafka_rebalance_dev.devenv import processes
from kafka_rebalance_dev.devenv.processes import StateFile


def _wait_members(pgid: int, count: int, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        members = processes.group_members(pgid)
        if len(members) >= count:
            return members
        time.sleep(0.05)
    return processes.group_members(pgid)


def test_stop_all_terminates_the_whole_process_group(tmp_path: Path) -> None:
    # A leader with a child of its own: stopping must reach both.
    record, popen = processes.start(
        "pair", ["sh", "-c", "sleep 60 & sleep 60; wait"], tmp_path / "pair.log"
    )
    assert record.pgid == record.pid
    assert os.getpgid(record.pid) == record.pid  # its own group, not ours
    assert len(_wait_members(record.pgid, 2)) >= 2
    killed = processes.stop_all([record], grace=5)
    popen.wait(timeout=5)
    assert killed == []
    assert processes.group_members(record.pgid) == []
    assert not processes.is_running(record)


def test_process_ignoring_sigterm_is_killed_after_grace(tmp_path: Path) -> None:
    record, popen = processes.start(
        "stubborn", ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], tmp_path / "s.log"
    )
    _wait_members(record.pgid, 1)
    time.sleep(0.2)  # let the shell install its trap
    started = time.monotonic()
    killed = processes.stop_all([record], grace=1.0)
    assert killed == ["stubborn"]
    assert time.monotonic() - started >= 1.0
    popen.wait(timeout=5)
    assert processes.group_members(record.pgid) == []


def test_reused_pid_is_never_signalled(tmp_path: Path) -> None:
    record, popen = processes.start("victim", ["sleep", "60"], tmp_path / "v.log")
    try:
        # Same pid, different kernel start time: what a recycled pid looks like.
        stranger = dataclasses.replace(record, start_ticks=record.start_ticks - 1)
        assert not processes.is_running(stranger)
        processes.stop_all([stranger], grace=0.5)
        assert popen.poll() is None, "a process that is not ours was signalled"
    finally:
        processes.stop_all([record], grace=2)
        popen.wait(timeout=5)


def test_state_file_round_trip_and_log_tail(tmp_path: Path) -> None:
    record, popen = processes.start(
        "echoer", ["sh", "-c", "for i in 1 2 3; do echo line-$i; done"], tmp_path / "e.log"
    )
    popen.wait(timeout=5)
    state = StateFile(tmp_path / "state.json")
    state.save([record], kafka_bootstrap_servers="127.0.0.1:1")
    assert state.records() == [record]
    assert state.load()["kafka_bootstrap_servers"] == "127.0.0.1:1"
    assert processes.tail(record.log, 2).splitlines() == ["line-2", "line-3"]
    state.remove()
    assert state.records() == []
