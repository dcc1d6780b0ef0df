"""`apply.mode` switched from assign to group under load, with every sidecar still running in
assign mode (they follow the switch only when restarted): the plan that follows moves
partitions away from members outside the consumer group by revoke and acknowledgement, so the
ledger shows nothing lost and no partition processed by two members at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.environment import Endpoints

from tests.integration.harnesses import group_harness, ledger_verdict

pytestmark = pytest.mark.integration


def test_assign_to_group_under_load_has_no_concurrent_owners(
    kafka: str, k8s: Any, tmp_path: Path
) -> None:
    endpoints = Endpoints(
        bootstrap_servers=kafka, kubeconfig=k8s.kubeconfig, kubectl=k8s.tools.kubectl
    )
    with group_harness(
        endpoints, tmp_path, prefix="switch", partitions=6, replicas=3, apply_mode="assign"
    ) as harness:
        members = harness.pods(3)
        harness.operator.start()
        harness.apply_policy("roundrobin", "enforce")
        harness.start_sidecars(members)
        harness.produce({p: 8.0 for p in range(harness.partitions)})
        first, planned = harness.wait_plan(1, members)
        assert planned == {p: members[p % 3] for p in range(6)}
        harness.watch(4.0)

        # the switch, and a plan that moves four of six partitions
        harness.cluster.patch_policy(
            harness.policy,
            {"spec": {"strategy": "range", "apply": {"mode": "group", "handoffTimeout": "12s"}}},
        )
        switched, planned = harness.wait_plan(first + 1, members)
        assert planned == {p: members[p // 2] for p in range(6)}
        assert switched >= first + 2, "the moves took a revoke epoch and a grant epoch"
        harness.watch(4.0)
        report = ledger_verdict(harness, "assign -> group under load")
        assert set(report.per_member) == set(members)
