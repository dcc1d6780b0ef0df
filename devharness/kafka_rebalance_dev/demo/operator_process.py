"""The operator as a subprocess: exactly the `kafka-rebalance operator` a container would run.

It runs in its own process group (so stopping it never touches the demo or a test runner) with
its log in the demo's work directory, and can be stopped and started again to show that the
sidecars keep consuming on the last plan while it is away.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from kafka_rebalance_dev.demo.cluster import ROOT, wait_for
from kafka_rebalance_dev.devenv.ports import free_ports

BIND_ATTEMPTS = 3


def free_port() -> int:
    """One port that was free on 127.0.0.1 a moment ago."""
    return free_ports(1)[0]


class OperatorProcess:
    """One operator run; `start` and `stop` may be called repeatedly (each start logs anew).

    `args` replaces `operator --namespace <namespace>` when the caller has the real command
    line (the integration tests pass the chart Deployment's args); `extra` flags come last so
    they win (argparse keeps the last value). `log_name` keeps logs of several instances
    sharing one work directory apart. `min_poll_interval` is the operator's
    `--min-poll-interval`: the CRD's own floor by default, so the short pollInterval values of
    the demo's and the tests' policies are honoured."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        workdir: Path,
        *,
        min_poll_interval: str = "1s",
        tick: float = 0.2,
        args: Sequence[str] | None = None,
        extra: Sequence[str] = (),
        log_name: str = "operator",
    ) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.workdir = workdir
        self.min_poll_interval = min_poll_interval
        self.tick = tick
        self.args = list(args) if args is not None else ["operator", "--namespace", namespace]
        self.extra = list(extra)
        self.log_name = log_name
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log: Path | None = None
        self.metrics_port = 0
        self.health_port = 0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 60) -> None:
        """Start and wait for /healthz; a port taken between choosing and binding gets new ports.

        Ports are chosen free but bound later by the child, so another process on the machine
        can take one in between; that start is retried with fresh ports, any other exit is not.
        """
        if self.running:
            return
        for attempt in range(1, BIND_ATTEMPTS + 1):
            self._start_once(timeout)
            if self.running:
                return
            if attempt == BIND_ATTEMPTS or not self._lost_a_port():
                break
        raise RuntimeError(f"the operator exited at start-up; see {self.log}")

    def _lost_a_port(self) -> bool:
        return self.log is not None and b"Address already in use" in self.log.read_bytes()

    def _start_once(self, timeout: float) -> None:
        self.starts += 1
        self.log = self.workdir / f"{self.log_name}-{self.starts}.log"
        self.metrics_port, self.health_port = free_ports(2)
        command = [
            sys.executable,
            "-m",
            "kafka_rebalance.cli",
            *self.args,
            "--bind",
            "127.0.0.1",
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            "--min-poll-interval",
            self.min_poll_interval,
            "--tick",
            str(self.tick),
            "--kafka-timeout",
            "3",
            *self.extra,
        ]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with open(self.log, "wb") as output:
            self.process = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
                start_new_session=True,
            )
        wait_for(
            "the operator's health endpoint",
            lambda: _status(self.health_port, "/healthz") == 200 or self._died(),
            timeout=timeout,
        )

    def _died(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def stop(self, grace: float = 20) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0
