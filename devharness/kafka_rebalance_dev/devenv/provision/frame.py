"""The frame every provisioned tool is built in: commands with logged output, and atomic installs.

A tool is built in a temp dir beside its final place and renamed into `<cache>/<tool>/<version>/`
only when complete (an interrupted run leaves nothing that looks finished); a second run only
checks markers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalance_dev.devenv.toolchain import MARKER, is_provisioned


class ProvisionError(RuntimeError):
    """A tool could not be provisioned; the message names the tool and the failing command."""

    def __init__(self, message: str, failed: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.failed = list(failed)  # labels ('spark-kafka 4.3.0') of the tools that failed


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Maven's closing advice lines, identical for every failure: noise in an error message.
MAVEN_BOILERPLATE = re.compile(
    r"^\[ERROR\]\s*$|Re-run Maven|To see the full stack trace|For more information about the "
    r"errors|^\[ERROR\] \[Help 1\]"
)


def failure_tail(output: str, lines: int = 25) -> str:
    """The informative end of a failed command's output (colour codes and boilerplate dropped)."""
    kept = [
        line
        for line in ANSI_ESCAPE.sub("", output).splitlines()
        if line.strip() and not MAVEN_BOILERPLATE.search(line)
    ]
    return "\n".join(kept[-lines:])


def say(message: str) -> None:
    print(f"[provision] {message}", file=sys.stderr, flush=True)


# ---- running commands -------------------------------------------------------------------------
class RunningBuilds:
    """The build commands running now, in every lane: an interrupted provision stops them all
    (their process groups), and lanes start nothing more once it is stopping."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.stopping = threading.Event()

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def __len__(self) -> int:
        with self._lock:
            return len(self._procs)

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            stop_group(proc)


RUNNING = RunningBuilds()


def run(
    tool: str,
    cmd: Sequence[str],
    *,
    cwd: Path,
    log: Path,
    env: dict[str, str] | None = None,
) -> str:
    """Run one build command, appending its output to `log`; return its stdout+stderr.

    Output goes to a file, not the terminal, because Go and Maven print thousands of lines; on
    failure the tail is quoted in the error so nobody has to go looking for the log.
    """
    merged = {**os.environ, **(env or {})}
    with log.open("a") as fh:
        fh.write(f"\n$ {shlex.join(cmd)}\n")
        fh.flush()
        try:
            # Own process group, so an interrupted provision (Ctrl-C, SIGTERM from CI) can take
            # the whole build down with it (go build forks compilers) instead of leaving it
            # writing into a temp dir the next run is about to delete.
            proc = subprocess.Popen(
                list(cmd),
                cwd=cwd,
                env=merged,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise ProvisionError(
                f"{tool}: `{cmd[0]}` is not installed (needed for {tool})"
            ) from exc
        RUNNING.add(proc)
        try:
            output, _ = proc.communicate()
        except BaseException:
            stop_group(proc)
            raise
        finally:
            RUNNING.discard(proc)
        fh.write(output)
    if proc.returncode != 0:
        tail = failure_tail(output)
        raise ProvisionError(
            f"{tool}: command failed with exit code {proc.returncode}: {shlex.join(cmd)}\n"
            f"(in {cwd}; full output in {log})\n{tail}"
        )
    return output


def stop_group(proc: subprocess.Popen) -> None:
    """Terminate a build command's process group (by its own pgid), then kill what remains."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _raise_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP become SystemExit so cleanup (child groups, temp dirs) runs."""
    raise SystemExit(128 + signum)


# ---- the atomic install frame -----------------------------------------------------------------
@dataclass(frozen=True)
class Component:
    """One cached tool: its name, pinned version, final directory and how to build it."""

    name: str
    version: str
    target: Path
    build: Callable[[Path, Path], dict]  # (temp dir, log file) -> facts for the marker
    check: Callable[[Path], None] | None = None  # smoke check of the built dir, before rename
    # Why it cannot be built on this machine (a missing system package, no root), or None.
    unavailable: Callable[[], str | None] | None = None

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


@contextlib.contextmanager
def cache_lock(root: Path) -> Iterator[None]:
    """Serialise concurrent provision runs (two pytest sessions, CI retries) on one cache."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".provision.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def install(component: Component) -> tuple[str, float]:
    """Build `component` unless present; return ('reused'|'built', seconds)."""
    start = time.monotonic()
    final = component.target
    if is_provisioned(final):
        return "reused", time.monotonic() - start
    final.parent.mkdir(parents=True, exist_ok=True)
    # Callers hold the cache lock, so any temp dir of this tool is a leftover of an interrupted
    # run (killed CI job, Ctrl-C) and can go.
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    log = final.parent / f"{final.name}.build.log"
    log.write_text(f"# provisioning {component.label} into {final}\n")
    say(f"{component.label}: building (log: {log})")
    try:
        facts = component.build(tmp, log)
        if component.check is not None:  # on the temp dir: a failed check must not look done
            component.check(tmp)
        elapsed = time.monotonic() - start
        marker = {
            "tool": component.name,
            "version": component.version,
            "build_seconds": round(elapsed, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **facts,
        }
        (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        if final.exists():  # a leftover without marker (e.g. deleted by hand): replace it
            shutil.rmtree(final)
        os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return "built", time.monotonic() - start
