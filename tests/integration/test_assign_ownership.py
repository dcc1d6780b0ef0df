"""assign mode never grants a partition while another member may still consume it, and a policy
deleted and created again carries on (issue 10 items 5 and 6).

Everything is real, as in test_e2e_sidecars.py: broker, API server (with its garbage collector),
the operator process and one sidecar process per KWOK pod, each writing a ledger. The ledger's
verdict is checked in wall time, not only per epoch: no partition is processed by two members
during overlapping spans (`concurrent_owners`), and nothing acknowledged is lost.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.demo.ledger import read_ledger

from tests.integration.harnesses import group_harness, ledger_verdict

pytestmark = pytest.mark.integration

RATE = 6.0  # records/s per partition
PARTITIONS = 6


@pytest.fixture
def endpoints(kafka: str, k8s: Any) -> Endpoints:
    return Endpoints(bootstrap_servers=kafka, kubeconfig=k8s.kubeconfig, kubectl=k8s.tools.kubectl)


@contextlib.contextmanager
def _group(endpoints: Endpoints, workdir: Path, prefix: str, replicas: int) -> Iterator[Any]:
    """Operator, round-robin policy in assign mode, one sidecar per pod, producing."""
    with group_harness(
        endpoints,
        workdir,
        prefix=prefix,
        partitions=PARTITIONS,
        replicas=replicas,
        apply_mode="assign",
    ) as harness:
        members = harness.pods(replicas)
        harness.operator.start()
        harness.apply_policy("roundrobin", "enforce")
        harness.start_sidecars(members)
        harness.produce(dict.fromkeys(range(PARTITIONS), RATE))
        yield harness, members


def _configmap_of(harness: GroupHarness, member: str) -> str:
    items = harness.cluster.core.list_namespaced_config_map(harness.namespace).items
    for item in items:
        text = (item.data or {}).get("assignment.json")
        if text and json.loads(text).get("member") == member:
            return str(item.metadata.name)
    raise AssertionError(f"no ConfigMap for {member}")


def test_a_configmap_deleted_by_hand_does_not_free_its_members_partitions(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    """The member keeps consuming from its last document when its ConfigMap goes, so a plan
    change that moves those partitions must still revoke them from it first."""
    with _group(endpoints, tmp_path, "own-deleted", replicas=2) as (harness, members):
        first, planned = harness.wait_plan(1, members)
        assert planned == {p: members[p % 2] for p in range(PARTITIONS)}
        harness.watch(4.0)
        harness.set_mode("observe")  # no writes while the ConfigMap is gone, so no repair
        time.sleep(3.0)
        harness.cluster.core.delete_namespaced_config_map(
            _configmap_of(harness, members[0]), harness.namespace
        )
        harness.watch(4.0)
        harness.cluster.patch_policy(
            harness.policy, {"spec": {"strategy": "range", "rebalance": {"mode": "enforce"}}}
        )
        ranged, planned = harness.wait_plan(first + 1, members, timeout=120)
        assert planned == {p: members[p // 3] for p in range(PARTITIONS)}
        assert ranged >= first + 2, "partition 4 left members[0] through a revoke epoch"
        harness.watch(4.0)
        ledger_verdict(harness)


def test_a_running_pod_that_stops_matching_the_selector_gives_up_before_others_get_its_share(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    """A pod the selector no longer matches still runs its sidecar: it is asked to give its
    partitions up (and acknowledges) before they go to the remaining members."""
    with _group(endpoints, tmp_path, "own-linger", replicas=3) as (harness, members):
        first, planned = harness.wait_plan(1, members)
        harness.watch(4.0)
        leaving = members[2]
        harness.cluster.patch_policy(
            harness.policy,
            {
                "spec": {
                    "members": {
                        "selector": {
                            "matchLabels": {"app": harness.app},
                            "matchExpressions": [
                                {
                                    "key": "statefulset.kubernetes.io/pod-name",
                                    "operator": "NotIn",
                                    "values": [leaving],
                                }
                            ],
                        }
                    }
                }
            },
        )
        revoked = wait_for(
            f"{leaving}'s document giving everything up",
            lambda: (d := harness.assignments().get(leaving)) and d.get("revoking") and d,
            timeout=60,
            every=0.3,
        )
        assert not revoked["partitions"], revoked
        _, planned = harness.wait_plan(first + 1, members[:2], timeout=120)
        assert set(planned.values()) == set(members[:2])
        harness.watch(4.0)
        report = ledger_verdict(harness)
        assert leaving in report.per_member


def test_a_policy_deleted_and_created_again_carries_on(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    """The new incarnation's documents are accepted by the running sidecars although its
    epochs restarted, and its hand-overs complete on its own acknowledgements."""
    with _group(endpoints, tmp_path, "own-recreate", replicas=2) as (harness, members):
        first, _ = harness.wait_plan(1, members)
        harness.cluster.patch_policy(harness.policy, {"spec": {"strategy": "range"}})
        ranged, _ = harness.wait_plan(first + 2, members, timeout=120)
        harness.watch(3.0)
        old_uid = harness.assignments()[members[0]]["policyUid"]

        harness.cluster.delete_policy(harness.policy)
        wait_for(
            "the policy and its ConfigMaps to be gone",
            lambda: not harness.cluster.policy_status(harness.policy) and not harness.assignments(),
            timeout=90,
            every=0.5,
        )
        harness.watch(3.0)  # the sidecars keep consuming by their last documents
        harness.apply_policy("roundrobin", "enforce")
        epoch, planned = harness.wait_plan(1, members, timeout=120)
        documents = harness.assignments()
        assert {d["policyUid"] for d in documents.values()} != {old_uid}
        assert epoch > ranged, "the new incarnation's epochs start above every committed one"
        assert planned == {p: members[p % 2] for p in range(PARTITIONS)}
        applied_at = time.time()
        harness.watch(6.0)
        entries, _ = read_ledger(harness.ledger_dir)
        late = {e.partition: e.member for e in entries if e.ts > (applied_at + 3) * 1000}
        assert late == planned, "every sidecar consumes by the new incarnation's plan"
        for member in members:
            assert "new incarnation" in harness.fleet.log_tail(member, 400)
        ledger_verdict(harness)
