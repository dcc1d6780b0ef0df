"""The fenced leader change under load, with the ledger as the judge: two operator replicas with
leader election, the leader cut off from the API server (every call hangs) while assign-mode
sidecars consume, the standby takes over and hands partitions over (revoke, acknowledge,
grant), then the cut-off connection delivers what it held. Nothing is lost and no partition is
ever processed by two members at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.operator_process import OperatorProcess

from tests.integration.harnesses import group_harness, ledger_verdict
from tests.integration.stall_proxy import StallProxy

pytestmark = pytest.mark.integration

ELECTION = (
    "--leader-election-lease", "4", "--leader-election-renew-deadline", "3",
    "--leader-election-retry", "0.5",
)  # fmt: skip


def _leads(replica: OperatorProcess) -> bool:
    return replica.log is not None and " leads (Lease" in replica.log.read_text(errors="replace")


def test_a_cut_off_leader_under_load_loses_nothing_and_shares_no_partition(
    kafka: str, k8s: Any, tmp_path: Path
) -> None:
    endpoints = Endpoints(
        bootstrap_servers=kafka, kubeconfig=k8s.kubeconfig, kubectl=k8s.tools.kubectl
    )
    with group_harness(
        endpoints, tmp_path, prefix="fenced", partitions=6, replicas=3, apply_mode="assign"
    ) as harness:
        server = urlparse(k8s.server)
        proxy = StallProxy(server.hostname or "127.0.0.1", server.port or 443)
        via_proxy = tmp_path / "via-proxy.kubeconfig"
        via_proxy.write_text(
            k8s.kubeconfig.read_text().replace(
                k8s.server, f"https://{server.hostname}:{proxy.port}"
            )
        )
        args = ("--leader-election", "--leader-election-namespace", harness.namespace, *ELECTION)
        replicas = [
            OperatorProcess(config, harness.namespace, tmp_path, extra=args, log_name=name)
            for config, name in ((via_proxy, "replica-a"), (k8s.kubeconfig, "replica-b"))
        ]
        first, second = replicas
        members = harness.pods(3)
        try:
            first.start()
            wait_for("replica a leads", lambda: _leads(first), timeout=30)
            second.start()
            harness.apply_policy("roundrobin", "enforce")
            harness.start_sidecars(members)
            harness.produce({p: 8.0 for p in range(harness.partitions)})
            epoch, planned = harness.wait_plan(1, members)
            assert planned == {p: members[p % 3] for p in range(6)}
            harness.watch(3.0)

            proxy.stall()
            wait_for("replica a gives up", lambda: not first.running, timeout=30)
            assert first.process is not None and first.process.returncode == 3
            wait_for("replica b leads", lambda: _leads(second), timeout=30)
            # four of six partitions change owner, by the new leader only
            harness.cluster.patch_policy(harness.policy, {"spec": {"strategy": "range"}})
            ranged, planned = harness.wait_plan(epoch + 1, members)
            assert planned == {p: members[p // 2] for p in range(6)}
            assert ranged >= epoch + 2, "hand-overs take a revoke epoch and a grant epoch"
            proxy.resume()  # what the cut-off leader had in flight arrives now
            harness.watch(4.0)
            documents = harness.assignments()
            assert {d.get("leaderTerm") for d in documents.values()} == {1}
        finally:
            proxy.close()
            second.stop()
            first.stop()
        ledger_verdict(harness, "fenced failover under load")
