"""Two operator replicas with leader election on the real API server: one reconciles, the
other takes over when it is killed or when its connection to the API server hangs, and the
epochs written never go backwards or fork; a leader cut off writes nothing after the standby
took over, not even what was in flight when the connection came back.

The replicas run as processes with the chart's command line and ServiceAccount (Lease RBAC from
`leaderElection.enabled`), with short lease timings so the take-over fits a test."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.demo.operator_process import OperatorProcess

from tests.integration.manifests import pause_statefulset
from tests.integration.stall_proxy import StallProxy
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


def _logged_at(replica: OperatorProcess, text: str) -> datetime | None:
    """When the replica first logged a line containing `text` (the text log format's asctime)."""
    if replica.log is None or not replica.log.exists():
        return None
    for line in replica.log.read_text(errors="replace").splitlines():
        if text in line:
            return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return None


class DocumentWatch:
    """Every (ConfigMap, resourceVersion) the API server shows, with its document, read with the
    admin credentials every 0.3 s in a thread."""

    def __init__(self, cluster: Cluster, policy: str) -> None:
        self.cluster, self.policy = cluster, policy
        self.seen: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, cm in self.cluster.configmaps(self.policy).items():
                key = (name, cm["metadata"]["resourceVersion"])
                if key not in self.seen:
                    document = json.loads(cm["data"]["assignment.json"])
                    self.seen[key] = (time.monotonic(), document)
            self._stop.wait(0.3)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def history(self) -> dict[str, list[dict[str, Any]]]:
        """Per ConfigMap, its documents in the order the API server gave them versions."""
        ordered: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for (name, version), (_, document) in self.seen.items():
            ordered.setdefault(name, []).append((int(version), document))
        return {
            name: [d for _, d in sorted(docs, key=lambda v: v[0])] for name, docs in ordered.items()
        }


def test_a_leader_cut_off_from_the_api_server_is_replaced_and_writes_nothing_after(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    namespace = f"fenced-{uuid.uuid4().hex[:6]}"
    installed = helm_install(
        k8s, namespace, tmp_path / "helm", values=("leaderElection.enabled=true",)
    )
    cluster = Cluster(k8s, namespace)
    cluster.apply(pause_statefulset("consumer", 2, cpu_request="100m"))
    k8s.kubectl(
        "-n", namespace, "rollout", "status", "statefulset/consumer", "--timeout=120s", timeout=150
    )
    topic = f"fenced-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()

    # Replica a reaches the API server only through a proxy that the test can stall: every
    # call it makes (Lease renewals included) then hangs, as on a half-open connection.
    server = urlparse(k8s.server)
    proxy = StallProxy(server.hostname or "127.0.0.1", server.port or 443)
    via_proxy = tmp_path / "via-proxy.kubeconfig"
    via_proxy.write_text(
        installed.kubeconfig.read_text().replace(
            k8s.server, f"https://{server.hostname}:{proxy.port}"
        )
    )
    assert str(proxy.port) in via_proxy.read_text()
    first = _replica(replace(installed, kubeconfig=via_proxy), tmp_path, "a")
    second = _replica(installed, tmp_path, "b")
    watch = DocumentWatch(cluster, "orders")
    try:
        first.start()
        wait_for("replica a leads", lambda: _leads(first), timeout=30)
        second.start()
        cluster.apply(policy_manifest("orders", f"group-{topic}", kafka, topic, "consumer"))
        wait_for("epoch 1 applied", lambda: cluster.policy("orders")["status"].get("epoch") == 1)
        watch.start()
        assert {d.get("leaderTerm") for d in cluster.assignments("orders").values()} == {0}

        proxy.stall()
        stalled = time.monotonic()
        wait_for("replica a gives up", lambda: first.process.poll() is not None, timeout=30)
        gave_up = time.monotonic() - stalled
        assert first.process.returncode == 3, "a leader that cannot renew exits with status 3"
        wait_for("replica b leads", lambda: _leads(second), timeout=30)
        took_over = time.monotonic() - stalled
        # A change only the new leader can apply: one more member, a new plan, a higher epoch.
        k8s.kubectl("-n", namespace, "scale", "statefulset/consumer", "--replicas=3")
        wait_for(
            "the new leader applies a new epoch on every ConfigMap",
            lambda: (
                len(docs := cluster.assignments("orders")) == 3
                and all(d["epoch"] >= 2 and d.get("leaderTerm") == 1 for d in docs.values())
            ),
            timeout=90,
        )
        # The network comes back: whatever replica a had in flight reaches the API server now.
        proxy.resume()
        time.sleep(4)
    finally:
        watch.stop()
        proxy.close()
        second.stop()
        first.stop()

    lost_at = _logged_at(first, "lost the Lease")
    led_at = _logged_at(second, " leads (Lease")
    assert lost_at is not None and led_at is not None
    assert lost_at < led_at, f"replica a stopped at {lost_at}, after b led at {led_at}"
    history = watch.history()
    assert len(history) == 3
    for name, documents in history.items():
        terms = [d.get("leaderTerm") for d in documents]
        epochs = [d["epoch"] for d in documents]
        assert epochs == sorted(epochs), (name, epochs)  # never back an epoch
        assert terms == sorted(terms), (name, terms)  # never a deposed leader's write after
        assert terms[-1] == 1, (name, terms)
    plans: dict[int, set[str]] = {}
    for documents in history.values():
        for d in documents:
            plans.setdefault(d["epoch"], set()).add(d["planHash"])
    assert all(len(h) == 1 for h in plans.values()), plans  # one plan per epoch
    final = cluster.policy("orders")
    assert condition(final, "Ready").get("status") == "True", final["status"]
    print(
        f"\nfenced failover: lease 4 s, renew deadline 3 s, request timeout 1.25 s; leader cut "
        f"off, exited (status 3) after {gave_up:.2f} s, standby leading after {took_over:.2f} s; "
        f"documents per ConfigMap (epoch, term): "
        + "; ".join(
            f"{n.split('.')[-1]} {[(d['epoch'], d.get('leaderTerm')) for d in docs]}"
            for n, docs in sorted(history.items())
        )
    )
