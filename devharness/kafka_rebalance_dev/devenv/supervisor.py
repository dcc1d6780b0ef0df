"""A set of started servers that is stopped as one, plus waiting with useful failures.

`dev up` and the pytest fixtures share this: servers are started one after another, each record
is persisted as soon as the process exists, and any failure (a crash, a timeout) is reported with
the component's name and the tail of its log, because "timed out" alone sends people digging.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kafka_rebalance_dev.devenv import processes
from kafka_rebalance_dev.devenv.processes import ProcessRecord, StateFile


class StartupError(RuntimeError):
    """A component did not become ready; names it and carries its log tail."""

    def __init__(self, component: str, reason: str, log: str | None = None) -> None:
        self.component = component
        self.reason = reason
        self.log = log
        log_tail = processes.tail(log, 25) if log else ""
        message = f"{component}: {reason}"
        if log:
            message += f"\n--- last lines of {log} ---\n{log_tail}"
        super().__init__(message)


class Supervisor:
    """Servers started for one environment, recorded in `state_file` as they start."""

    def __init__(
        self,
        state_file: StateFile,
        *,
        die_with_parent: bool = False,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self.state_file = state_file
        self.die_with_parent = die_with_parent
        self.extra: dict[str, object] = dict(extra or {})
        self.records: list[ProcessRecord] = []
        self._popens: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        *,
        ports: Mapping[str, int] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ProcessRecord:
        record, popen = processes.start(
            name, argv, log, env=env, cwd=cwd, ports=ports, die_with_parent=self.die_with_parent
        )
        self.records.append(record)
        self._popens[name] = popen
        self.save()
        return record

    def save(self) -> None:
        self.state_file.save(self.records, **self.extra)

    def record(self, name: str) -> ProcessRecord:
        for record in self.records:
            if record.name == name:
                return record
        raise KeyError(name)

    def ensure_running(self, name: str) -> None:
        """Raise StartupError if the named server has exited."""
        record = self.record(name)
        popen = self._popens.get(name)
        code = popen.poll() if popen is not None else None
        if code is not None or not processes.is_running(record):
            detail = f"exited with code {code}" if code is not None else "is not running"
            raise StartupError(name, f"process {record.pid} {detail}", record.log)

    def wait_until(
        self,
        name: str,
        ready: Callable[[], bool],
        *,
        timeout: float,
        what: str,
        interval: float = 0.25,
        watch: Sequence[str] = (),
    ) -> float:
        """Poll `ready()` until true; fail early if `name` (or any of `watch`) dies.

        Returns the seconds waited. `ready` may raise; that counts as not ready yet and the
        last error is quoted if the wait times out.
        """
        started = time.monotonic()
        last_error: BaseException | None = None
        while True:
            for component in (name, *watch):
                self.ensure_running(component)
            try:
                if ready():
                    return time.monotonic() - started
            except Exception as exc:  # readiness probes fail in many ways while starting
                last_error = exc
            if time.monotonic() - started > timeout:
                hint = f" (last error: {last_error})" if last_error else ""
                raise StartupError(
                    name, f"not {what} after {timeout:g}s{hint}", self.record(name).log
                )
            time.sleep(interval)

    def stop_one(self, name: str, grace: float = 10.0) -> list[str]:
        """Stop one server (fault tests: take a broker down) and forget its record."""
        record = self.record(name)
        killed = processes.stop_all([record], grace=grace)
        popen = self._popens.pop(name, None)
        if popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=1)
        self.records.remove(record)
        self.save()
        return killed

    def stop_since(self, mark: int, grace: float = 10.0) -> list[str]:
        """Stop the servers started after the first `mark` ones, newest first; forget them
        (a failed start of one group is undone while the servers started before it run on)."""
        started = self.records[mark:]
        killed = processes.stop_all(list(reversed(started)), grace=grace)
        for record in started:
            popen = self._popens.pop(record.name, None)
            if popen is not None and popen.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=1)
        del self.records[mark:]
        self.save()
        return killed

    def stop(self, grace: float = 10.0) -> list[str]:
        """Stop every server this supervisor started, newest first; forget them."""
        killed = processes.stop_all(list(reversed(self.records)), grace=grace)
        for popen in self._popens.values():
            if popen.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=1)
        self.records.clear()
        self._popens.clear()
        self.state_file.remove()
        return killed
