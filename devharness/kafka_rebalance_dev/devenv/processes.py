"""Start and stop the environment's servers as process groups, and remember them on disk.

Each server runs in a session (and so a process group) of its own, so it survives the `dev up`
command that started it, a Ctrl-C in the user's terminal does not reach it, and stopping it can
signal the whole group (a server that forks helpers takes them along). A record keeps the pid,
the group id and the kernel's start time of the leader: a pid can be reused after a crash or a
reboot, and `down` must never signal a stranger that happens to carry a recorded number.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1


@dataclass
class ProcessRecord:
    """One started server, as written to the state file."""

    name: str
    pid: int
    pgid: int
    start_ticks: int
    argv: list[str]
    log: str
    ports: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ProcessRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),  # type: ignore[arg-type]
            pgid=int(data["pgid"]),  # type: ignore[arg-type]
            start_ticks=int(data["start_ticks"]),  # type: ignore[arg-type]
            argv=[str(a) for a in data.get("argv", [])],  # type: ignore[union-attr]
            log=str(data["log"]),
            ports={str(k): int(v) for k, v in dict(data.get("ports", {})).items()},  # type: ignore[arg-type]
        )


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may contain spaces)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """Kernel start time of a process (clock ticks since boot): its identity beside the pid."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def _state_and_pgid(pid: int) -> tuple[str, int] | None:
    fields = _stat_fields(pid)
    return (fields[0], int(fields[2])) if fields else None


def _threads(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        pass
    return 0


def _alive(state: str, pid: int) -> bool:
    """Not yet fully exited.

    The main thread of a multithreaded program (every Go binary, every JVM) can already be a
    zombie while its other threads are still exiting and still hold its listening sockets, so a
    zombie leader only counts as gone once it is the last thread left.
    """
    if state in ("Z", "X"):
        return _threads(pid) > 1
    return True


def is_running(record: ProcessRecord) -> bool:
    """The recorded leader is alive and is the process we started."""
    info = _state_and_pgid(record.pid)
    if info is None or not _alive(info[0], record.pid):
        return False
    return start_ticks(record.pid) == record.start_ticks


def group_members(pgid: int) -> list[int]:
    """Processes of process group `pgid` that have not fully exited."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        info = _state_and_pgid(int(entry))
        if info and info[1] == pgid and _alive(info[0], int(entry)):
            members.append(int(entry))
    return members


def _group_is_ours(record: ProcessRecord) -> bool:
    """Whether signalling the recorded group can only reach processes we started.

    Linux never hands out a pid that is still in use as a process group id, so while any
    member of our group lives, the number is ours. If the leader is gone and a new process now
    has the leader's pid, the group number may have been reused: leave it alone.
    """
    if is_running(record):
        return True
    leader_now = start_ticks(record.pid)
    if leader_now is not None and leader_now != record.start_ticks:
        return False
    return bool(group_members(record.pgid))


def dies_with_parent() -> None:
    """preexec hook: the kernel sends SIGTERM to the child when the starting thread dies.

    Used for test fixtures and the processes tests start themselves (start them from the thread
    that outlives them), so a test runner killed or interrupted does not leave brokers, API
    servers or client JVMs behind. `dev up` servers must outlive the command, so they do not use it.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ports: Mapping[str, int] | None = None,
    die_with_parent: bool = False,
) -> tuple[ProcessRecord, subprocess.Popen[bytes]]:
    """Start `argv` in a new session with stdout and stderr appended to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(
            f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(argv)}\n".encode()
        )
        log.flush()
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=dies_with_parent if die_with_parent else None,
        )
    ticks = start_ticks(popen.pid)
    record = ProcessRecord(
        name=name,
        pid=popen.pid,
        pgid=popen.pid,
        start_ticks=ticks if ticks is not None else -1,
        argv=list(argv),
        log=str(log_path),
        ports=dict(ports or {}),
    )
    return record, popen


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _signal_group(record: ProcessRecord, sig: signal.Signals) -> None:
    if _group_is_ours(record):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(record.pgid, sig)


STOP_LAST = ("etcd",)


def stop_all(records: Iterable[ProcessRecord], grace: float = 10.0) -> list[str]:
    """Stop every recorded group: storage (etcd) only after everything that writes to it.

    An API server whose etcd vanished under it hangs in its graceful shutdown until killed, so
    servers are stopped in two waves. Returns the names of servers that had to be SIGKILLed.
    """
    records = list(records)
    first = [r for r in records if r.name not in STOP_LAST]
    last = [r for r in records if r.name in STOP_LAST]
    return _stop_wave(first, grace) + _stop_wave(last, grace)


def _stop_wave(records: list[ProcessRecord], grace: float) -> list[str]:
    """SIGTERM every group at once, wait up to `grace` seconds, then SIGKILL what is left.

    Signalling together makes a wave cost one grace period, not one per server.
    """
    if not records:
        return []
    for record in records:
        _signal_group(record, signal.SIGTERM)
    deadline = time.monotonic() + grace
    pending = list(records)
    while pending and time.monotonic() < deadline:
        for record in pending:
            _reap(record.pid)
        pending = [r for r in pending if _group_is_ours(r)]
        if pending:
            time.sleep(0.1)
    killed = []
    for record in pending:
        killed.append(record.name)
        _signal_group(record, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while pending and time.monotonic() < deadline:
        for record in pending:
            _reap(record.pid)
        pending = [r for r in pending if _group_is_ours(r)]
        if pending:
            time.sleep(0.05)
    return killed


def tail(path: Path | str, lines: int = 40) -> str:
    """The last lines of a log file (empty when it does not exist)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class StateFile:
    """The JSON record of what `up` started, so a later `status`/`down` finds it.

    Written after every started server (not once at the end), so an `up` interrupted half-way
    still leaves enough behind for `down` to clean up.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, object]:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}

    def records(self) -> list[ProcessRecord]:
        data = self.load()
        return [ProcessRecord.from_json(r) for r in data.get("processes", [])]  # type: ignore[union-attr]

    def save(self, processes: Sequence[ProcessRecord], **extra: object) -> None:
        data = {**extra, "processes": [p.to_json() for p in processes]}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
