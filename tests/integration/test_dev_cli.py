"""`kafka-rebalance dev up` / `down`, twice in a row, leave nothing of theirs listening."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.devenv import kafka_protocol
from kafka_rebalance_dev.devenv.environment import SECURED_ENV

pytestmark = pytest.mark.integration


def _dev(state_dir: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "dev", *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _listening() -> dict[int, set[int]]:
    """Listening TCP ports -> owning pids, from `ss -ltnpH`."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found: dict[int, set[int]] = {}
    for line in out.splitlines():
        cols = line.split()
        port = int(cols[3].rsplit(":", 1)[1])
        found.setdefault(port, set()).update(int(p) for p in re.findall(r"pid=(\d+)", line))
    return found


@pytest.fixture
def state_dir(tmp_path: Path, tools):
    needed = {f"kafka {tools.kafka_version}", "kubernetes", "etcd", "kwok"}
    missing = [m for m in tools.missing() if m in needed or m.split(" ", 1)[0] in needed]
    if missing:
        pytest.fail(f"not provisioned: {', '.join(missing)}; run `scripts/bootstrap`")
    directory = tmp_path / "dev"
    yield directory
    _dev(directory, "down", timeout=60)  # whatever happened above, leave nothing running


def test_dev_up_then_down_twice_leaves_no_listening_ports(state_dir: Path, tools) -> None:
    before = _listening()
    for _round in range(2):
        up = _dev(state_dir, "up", "--print-env")
        assert up.returncode == 0, up.stderr
        lines = up.stdout.splitlines()
        assert [line.split("=", 1)[0] for line in lines] == [
            "export KUBECONFIG",
            "export KAFKA_BOOTSTRAP_SERVERS",
            *(f"export {variable}" for variable, _key in SECURED_ENV),
        ], up.stdout
        env = dict(line.removeprefix("export ").split("=", 1) for line in lines)

        state = json.loads((state_dir / "state.json").read_text())
        pids = {p["pid"] for p in state["processes"]}
        ports = {port for p in state["processes"] for port in p["ports"].values()}
        assert {p["name"] for p in state["processes"]} == {
            "kafka",
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        }
        listening = _listening()
        for proc in state["processes"]:
            for port in proc["ports"].values():
                assert proc["pid"] in listening.get(port, set()), (proc["name"], port)

        host, port = env["KAFKA_BOOTSTRAP_SERVERS"].split(":")
        assert [b.node_id for b in kafka_protocol.brokers(host, int(port))] == [1]
        nodes = subprocess.run(
            [str(tools.kubectl), f"--kubeconfig={env['KUBECONFIG']}", "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert nodes.stdout.split() == ["node/kwok-node-0"]

        again = _dev(state_dir, "up")
        assert again.returncode == 0
        assert "already up" in again.stderr
        assert {
            p["pid"] for p in json.loads((state_dir / "state.json").read_text())["processes"]
        } == pids

        status = _dev(state_dir, "status", timeout=60)
        assert status.returncode == 0, status.stdout
        assert status.stdout.count("healthy") == 6

        down = _dev(state_dir, "down", timeout=60)
        assert down.returncode == 0, down.stderr
        after = _listening()
        assert not ports & set(after), f"still listening after down: {ports & set(after)}"
        assert not any(pids & owners for owners in after.values())
        status = _dev(state_dir, "status", timeout=60)
        assert status.returncode == 1
        assert "not up" in status.stdout
    leaked = set(_listening()) - set(before)
    assert not leaked & ports


def test_failed_up_names_the_part_and_stops_what_it_started(state_dir: Path) -> None:
    # A readiness timeout far too short for the API server: `up` must fail on it, say so with
    # its log, and stop etcd and the broker it had already started.
    up = _dev(state_dir, "up", "--timeout", "0.2")
    assert up.returncode == 1
    assert "kube-apiserver: not ready (/readyz)" in up.stderr
    assert "kube-apiserver.log" in up.stderr
    assert "stopped everything it had started" in up.stderr
    assert not (state_dir / "state.json").exists()
    # It did start them (their logs say so), and none of them is left.
    assert "starting:" in (state_dir / "kubernetes" / "logs" / "etcd.log").read_text()
    assert "starting:" in (state_dir / "kafka" / "node-1" / "broker.log").read_text()
    assert _our_pids(state_dir) == []


def _our_pids(state_dir: Path) -> list[str]:
    """Live processes whose command line mentions the state directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(state_dir) in (entry / "cmdline").read_text(errors="replace"):
                    found.append(entry.name)
            except OSError:
                continue
    return found


def test_dev_up_with_the_broker_plugin_serves_kip848_groups_by_the_plan_assignor(
    state_dir: Path,
) -> None:
    """`dev up --broker-plugin`: the broker's default server-side assignor is the project's
    `kafka-rebalance-plan` (a KIP-848 group joined by the operator's nudge is assigned by it)."""
    from kafka_rebalance_operator.kafka import kip848

    up = _dev(state_dir, "up", "--only", "kafka", "--broker-plugin", "--print-env")
    assert up.returncode == 0, up.stderr
    bootstrap = next(
        line.split("=", 1)[1]
        for line in up.stdout.splitlines()
        if line.startswith("export KAFKA_BOOTSTRAP_SERVERS=")
    )
    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        for attempt in range(30):  # the group coordinator comes up shortly after the broker
            try:
                kip848.nudge(admin, "dev-plugin-check")
                break
            except Exception:
                if attempt == 29:
                    raise
                time.sleep(1)
        group = kip848.describe(admin, "dev-plugin-check")
    finally:
        admin.close()
    assert group is not None and group.assignor == "kafka-rebalance-plan", group
