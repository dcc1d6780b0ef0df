"""One sidecar process per pod: the stand-in for the consumer container KWOK does not run.

Each process is `kafka-rebalance sidecar` with the pod's identity (member = pod name, so static
membership and the ConfigMap name `<policy>.<pod>` line up) watching its own ConfigMap through
the API, and the ledger as its in-process handler: every processed record lands in
`<ledger>/<member>.jsonl`, which is what "nothing lost" is checked against.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalance_operator import names

from kafka_rebalance_dev.demo.cluster import ROOT

LEDGER_HANDLER = "kafka_rebalance_dev.demo.ledger:record"


@dataclass(frozen=True)
class SidecarSettings:
    """What every sidecar of the group shares."""

    bootstrap: str
    group: str
    topic: str
    policy: str
    namespace: str
    kubeconfig: Path
    ledger_dir: Path
    log_dir: Path
    max_poll_records: int = 20
    session_timeout_ms: int = 10000
    apply_mode: str = "group"  # the policy's spec.apply.mode: group or assign
    metrics: bool = False  # serve each sidecar's /metrics on a loopback port of its own
    engine: str = "kafka-python"  # the sidecar's --engine (librdkafka: assign mode only)


def sidecar_command(settings: SidecarSettings, member: str, metrics_port: int = 0) -> list[str]:
    """The exact command line a pod's sidecar container would run, for member `member`
    (`metrics_port` 0: no /metrics)."""
    return [
        sys.executable,
        "-m",
        "kafka_rebalance.cli",
        "sidecar",
        "--bootstrap-servers",
        settings.bootstrap,
        "--group",
        settings.group,
        "--topics",
        settings.topic,
        "--member",
        member,
        "--apply-mode",
        settings.apply_mode,
        "--assignment-configmap",
        names.configmap_name(settings.policy, member),
        "--namespace",
        settings.namespace,
        "--kubeconfig",
        str(settings.kubeconfig),
        "--handler",
        LEDGER_HANDLER,
        "--health-port",
        "0",
        "--metrics-port",
        str(metrics_port),
        "--auto-offset-reset",
        "earliest",
        "--session-timeout-ms",
        str(settings.session_timeout_ms),
        "--max-poll-records",
        str(settings.max_poll_records),
        "--engine",
        settings.engine,
    ]


class Fleet:
    """The running sidecars by member name; each in its own process group."""

    def __init__(self, settings: SidecarSettings) -> None:
        self.settings = settings
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.slow_ms: dict[str, int] = {}
        self.starts: dict[str, int] = {}
        self.stopped: set[str] = set()  # stopped or killed on purpose (not a crash)
        self.metrics_ports: dict[str, int] = {}  # member -> its /metrics port (settings.metrics)
        settings.ledger_dir.mkdir(parents=True, exist_ok=True)
        settings.log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, member: str, *, slow_ms: int = 0) -> None:
        """Start `member`'s sidecar (again, after a stop or kill: same identity, same ledger)."""
        if self.alive(member):
            return
        self.starts[member] = self.starts.get(member, 0) + 1
        self.stopped.discard(member)
        self.slow_ms[member] = slow_ms
        env = {
            **os.environ,
            "KAFKA_REBALANCE_LEDGER_DIR": str(self.settings.ledger_dir),
            "KAFKA_REBALANCE_SLOW_MS": str(slow_ms),
            "POD_NAME": member,
            "POD_NAMESPACE": self.settings.namespace,
        }
        log = self.settings.log_dir / f"sidecar-{member}.log"
        with open(log, "ab") as output:
            self.processes[member] = subprocess.Popen(
                sidecar_command(self.settings, member, self._metrics_port(member)),
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
                start_new_session=True,
            )

    def _metrics_port(self, member: str) -> int:
        """The member's /metrics port, the same across restarts (0 without settings.metrics)."""
        if not self.settings.metrics:
            return 0
        if member not in self.metrics_ports:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self.metrics_ports[member] = int(sock.getsockname()[1])
        return self.metrics_ports[member]

    def alive(self, member: str) -> bool:
        process = self.processes.get(member)
        return process is not None and process.poll() is None

    def members(self) -> list[str]:
        return sorted(m for m in self.processes if self.alive(m))

    def exited(self) -> dict[str, int]:
        """Members whose process ended by itself, with the exit code (crashes to report)."""
        return {
            m: code
            for m, p in self.processes.items()
            if m not in self.stopped and (code := p.poll()) is not None
        }

    def stop(self, member: str, *, grace: float = 20) -> int | None:
        """SIGTERM (the sidecar finishes its batch, commits, leaves); SIGKILL after `grace`."""
        process = self.processes.get(member)
        self.stopped.add(member)
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        os.killpg(process.pid, signal.SIGTERM)
        try:
            return process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(10)

    def kill(self, member: str) -> None:
        """SIGKILL: a crash (the static member stays in the group until its session times out)."""
        process = self.processes.get(member)
        self.stopped.add(member)
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def stop_all(self, grace: float = 20) -> None:
        for member in list(self.processes):
            process = self.processes[member]
            self.stopped.add(member)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for member in list(self.processes):
            self.stop(member, grace=grace)

    def log_tail(self, member: str, lines: int = 20) -> str:
        path = self.settings.log_dir / f"sidecar-{member}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
