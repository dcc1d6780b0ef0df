"""Lease-based leader election (kafka_rebalance_operator.kube.leadership) between real processes on
the real API server: a live leader keeps the lease (also against a candidate whose clock is ten
minutes ahead), a killed leader is replaced within the lease duration plus a few retries, and
leaseTransitions only grows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.cluster import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LEASE_DURATION = 4.0


def states(path: Path) -> list[tuple[float, bool, int]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            rows.append((float(parts[0]), parts[1] == "1", int(parts[2])))
    return rows


def start(k8s: Any, namespace: str, identity: str, state: Path, skew: float = 0.0):
    return subprocess.Popen(
        [
            sys.executable, "-m", "tests.integration.leader_candidate",
            str(k8s.kubeconfig), namespace, identity, str(state), str(skew),
        ],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def test_failover_to_the_standby_and_no_steal_under_clock_skew(k8s: Any, tmp_path: Path) -> None:
    namespace = f"lease-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", namespace)
    a_state, b_state, c_state = (tmp_path / f"{n}.state" for n in "abc")
    a = start(k8s, namespace, "pod-a", a_state)
    others = []
    try:
        wait_for("pod-a leads", lambda: any(lead for _, lead, _ in states(a_state)), timeout=120)
        others.append(start(k8s, namespace, "pod-b", b_state))
        others.append(start(k8s, namespace, "pod-c", c_state, skew=600.0))  # clock 10 min ahead
        wait_for(
            "both followers ran",
            lambda: len(states(b_state)) > 5 and len(states(c_state)) > 5,
            timeout=120,
        )
        time.sleep(3 * LEASE_DURATION)  # several lease durations with a live leader
        assert not any(lead for _, lead, _ in states(b_state) + states(c_state)), (
            "a follower took a live lease"
        )
        lease = k8s.kubectl(
            "-n",
            namespace,
            "get",
            "lease",
            "kafka-rebalance-operator",
            "-o",
            "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}",
        ).stdout
        assert lease.split() == ["pod-a", "0"]

        os.killpg(a.pid, signal.SIGKILL)
        a.wait(timeout=30)
        killed = time.time()
        last_a = max(t for t, lead, _ in states(a_state) if lead)

        def new_leader() -> tuple[str, float] | None:
            for name, path in (("pod-b", b_state), ("pod-c", c_state)):
                led = [t for t, lead, _ in states(path) if lead]
                if led:
                    return name, min(led)
            return None

        winner, first = wait_for("a standby leads", new_leader, timeout=120)
        takeover = first - killed
        print(f"takeover {takeover:.2f}s after the kill (lease {LEASE_DURATION:g}s)")
        assert first > last_a, "the standby led while the old leader still did"
        assert takeover < LEASE_DURATION + 10, takeover  # lease + retries + a loaded machine
        time.sleep(2)
        lease = k8s.kubectl(
            "-n",
            namespace,
            "get",
            "lease",
            "kafka-rebalance-operator",
            "-o",
            "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}",
        ).stdout
        assert lease.split() == [winner, "1"], "one takeover, leaseTransitions 0 -> 1"
        loser = c_state if winner == "pod-b" else b_state
        assert not any(lead for _, lead, _ in states(loser)), "two standbys both led"
    finally:
        for process in [a, *others]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
