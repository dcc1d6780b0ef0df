"""Two operator replicas with leader election on the real API server: one reconciles, the
other takes over when it is killed, and the epochs written never go backwards or fork.

The replicas run as processes with the chart's command line and ServiceAccount (Lease RBAC from
`leaderElection.enabled`), with short lease timings so the take-over fits a test."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.demo.operator_process import OperatorProcess

from tests.integration.manifests import pause_statefulset
from tests.integration.test_operator_k8s import (
    Cluster,
    condition,
    helm_install,
    operator_process,
    policy_manifest,
)

pytestmark = pytest.mark.integration

LEASE = ("--leader-election-lease", "4", "--leader-election-renew-deadline", "3")
RETRY = ("--leader-election-retry", "0.5")


def _replica(installed: Any, workdir: Path, label: str) -> OperatorProcess:
    return operator_process(installed, workdir, *LEASE, *RETRY, log_name=f"replica-{label}")


def _leads(replica: OperatorProcess) -> bool:
    return replica.log is not None and " leads (Lease" in replica.log.read_text(errors="replace")


def test_a_standby_takes_over_and_epochs_never_go_back(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    namespace = f"failover-{uuid.uuid4().hex[:6]}"
    installed = helm_install(
        k8s, namespace, tmp_path / "helm", values=("leaderElection.enabled=true",)
    )
    assert "--leader-election" in installed.args
    cluster = Cluster(k8s, namespace)
    cluster.apply(pause_statefulset("consumer", 2, cpu_request="100m"))
    k8s.kubectl(
        "-n", namespace, "rollout", "status", "statefulset/consumer", "--timeout=120s", timeout=150
    )
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()

    # Every member document the API server shows: (time, ConfigMap, epoch, plan hash).
    seen: list[tuple[float, str, int, str]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            now = time.monotonic()
            for name, cm in cluster.configmaps("orders").items():
                document = json.loads(cm["data"]["assignment.json"])
                seen.append((now, name, document["epoch"], document.get("planHash", "")))
            stop.wait(0.5)

    first, second = _replica(installed, tmp_path, "a"), _replica(installed, tmp_path, "b")
    watcher = threading.Thread(target=watch, daemon=True)
    try:
        first.start()
        wait_for("replica a leads", lambda: _leads(first), timeout=30)
        second.start()
        cluster.apply(policy_manifest("orders", f"group-{topic}", kafka, topic, "consumer"))
        wait_for("epoch 1 applied", lambda: cluster.policy("orders")["status"].get("epoch") == 1)
        watcher.start()
        time.sleep(3)
        assert not _leads(second), "the standby must not lead while the leader renews"
        standby_log = second.log.read_text(errors="replace") if second.log else ""
        assert "waiting for Lease" in standby_log
        assert "kafka_rebalance_operator.phases" not in standby_log, "the standby reconciled"
        assert "kopf" not in standby_log, "the standby started kopf"
        polled = cluster.policy("orders")["status"]["lastPollTime"]

        os.killpg(first.process.pid, signal.SIGKILL)  # a crash: no release of the Lease
        killed = time.monotonic()
        wait_for("replica b leads", lambda: _leads(second), timeout=30)
        took_over = time.monotonic() - killed
        wait_for(
            "replica b polls",
            lambda: cluster.policy("orders")["status"]["lastPollTime"] != polled,
            timeout=30,
        )
        resumed = time.monotonic() - killed
        # A change only the new leader can apply: one more member, a new plan, a higher epoch.
        k8s.kubectl("-n", namespace, "scale", "statefulset/consumer", "--replicas=3")
        wait_for(
            "the new leader applies epoch 2",
            lambda: (
                cluster.policy("orders")["status"].get("epoch", 0) >= 2
                and len(cluster.assignments("orders")) == 3
            ),
            timeout=90,
        )
        time.sleep(2)
    finally:
        stop.set()
        second.stop()
        first.stop()
    epochs = sorted({epoch for _, _, epoch, _ in seen})
    assert epochs[0] == 1 and epochs[-1] >= 2, epochs
    for name in {name for _, name, _, _ in seen}:  # no document ever went back an epoch
        mine = [epoch for _, other, epoch, _ in sorted(seen) if other == name]
        assert mine == sorted(mine), (name, mine)
    hashes: dict[int, set[str]] = {}
    for _, _, epoch, plan_hash in seen:
        hashes.setdefault(epoch, set()).add(plan_hash)
    assert all(len(h) == 1 for h in hashes.values()), hashes  # group mode: one plan per epoch
    assert condition(cluster.policy("orders"), "Ready").get("status") == "True"
    print(
        f"\nfailover: lease 4 s, renew deadline 3 s; standby leads {took_over:.2f} s after the "
        f"leader was killed, first poll by it {resumed:.2f} s after; epochs seen "
        f"{epochs}"
    )
