"""A Prometheus of the environment's own: Debian's `prometheus` binary on loopback, its config,
rules and data in a directory of ours, stopped by its process group.

Used by the monitoring end-to-end test: it scrapes the operator and the sidecars every second and
evaluates the project's alert rules, so the alerts and the Grafana dashboard's queries are proven
against the real engine. Never the system's service: the package's own unit is not started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

MISSING = (
    "prometheus is not installed: `sudo apt-get install prometheus` (Debian), or rerun "
    "scripts/bootstrap with KAFKA_REBALANCE_INSTALL_SYSTEM_PACKAGES=1"
)


def binary() -> str | None:
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").is_file() else None
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    """One Prometheus process scraping `targets` (host:port, job name per target) with `rules`."""

    def __init__(
        self,
        directory: Path,
        targets: dict[str, Sequence[str]],
        rule_files: Sequence[Path] = (),
        interval: str = "1s",
    ) -> None:
        self.directory, self.targets, self.rule_files = directory, targets, list(rule_files)
        self.interval = interval
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "prometheus.log"

    def start(self, timeout: float = 60) -> None:
        command = binary()
        if command is None:
            raise RuntimeError(MISSING)
        self.directory.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval},
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(addresses)}]}
                for job, addresses in self.targets.items()
            ],
        }
        (self.directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = _free_port()
        with open(self.log, "wb") as output:
            self.process = subprocess.Popen(
                [
                    command,
                    f"--config.file={self.directory / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited at start-up; see {self.log}")
            try:
                with urllib.request.urlopen(self.url("/-/ready"), timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"prometheus not ready after {timeout:.0f} s; see {self.log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(self.url(f"/api/v1/{path}?{query}"), timeout=10) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{path}: {body}")
        return body["data"]

    def query(self, expression: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expression)["result"])

    def targets_up(self) -> dict[str, str]:
        """scrape URL -> health ("up", "down", "unknown")."""
        active = self.api("targets")["activeTargets"]
        return {t["scrapeUrl"]: t["health"] for t in active}

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])
