"""Argo CD's Lua health check and kstatus on the status a real operator writes.

One operator (the chart's command line and ServiceAccount, as in test_operator_k8s) runs three
policies on the real API server and Kafka until each shows one of the states a GitOps tool must
tell apart: Ready (a balanced plan applied), Reconciling (an assign-mode hand-over waiting for the
old owners' acknowledgement) and Stalled (no pod matches the selector). The objects are read back
from the API server and judged by the repository's Lua script (tests/health_checks.py).

With KAFKA_REBALANCE_RECORD_HEALTH=1 the three objects are also written to tests/data/health/,
the vectors tests/unit/ship/test_argocd_health.py checks on every run without a cluster.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.cluster import wait_for

from tests.health_checks import EXPECTED, LUA_VERSIONS, argocd_health, kstatus
from tests.integration.test_operator_k8s import (
    condition,
    diagnostics,
    make_env,
    policy_manifest,
    produce,
    run_operator,
)

pytestmark = pytest.mark.integration

VECTORS = Path(__file__).resolve().parents[1] / "data" / "health"


def _recorded(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a health check sees it, without what differs from run to run."""
    metadata = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": metadata["name"], "generation": metadata["generation"]},
        "spec": obj["spec"],
        "status": obj["status"],
    }


def test_health_of_the_states_the_operator_writes(k8s: Any, kafka: str, tmp_path: Path) -> None:
    env = make_env(k8s, kafka, tmp_path, "health", replicas=2, partitions=4)
    cluster, topic = env.cluster, env.topic
    with run_operator(env.installed, tmp_path) as operator:
        cluster.apply(policy_manifest("ready", f"ready-{topic}", kafka, topic, env.app))
        cluster.apply(policy_manifest("stalled", f"stalled-{topic}", kafka, topic, "nobody"))
        cluster.apply(
            policy_manifest(
                "handover",
                f"handover-{topic}",
                kafka,
                topic,
                env.app,
                apply={"mode": "assign", "handoffTimeout": "600s"},  # nobody acknowledges
            )
        )
        with diagnostics(cluster, "handover", operator):
            first = wait_for(
                "the hand-over policy's first plan",
                lambda: (
                    len(cluster.assignments("handover")) == 2 and cluster.assignments("handover")
                ),
            )
            # lag on member 0's partitions: a better plan revokes some of them
            produce(kafka, topic, dict.fromkeys(first[f"{env.app}-0"]["partitions"][topic], 3000))
            objects = {
                "reconciling": wait_for(
                    "Reconciling/HandingOff",
                    lambda: (
                        condition(p := cluster.policy("handover"), "Reconciling").get("reason")
                        == "HandingOff"
                        and p
                    ),
                    timeout=90,
                ),
                "ready": wait_for(
                    "Ready",
                    lambda: (
                        condition(p := cluster.policy("ready"), "Ready").get("status") == "True"
                        and p
                    ),
                ),
                "stalled": wait_for(
                    "Stalled/NoMembers",
                    lambda: (
                        condition(p := cluster.policy("stalled"), "Stalled").get("reason")
                        == "NoMembers"
                        and p
                    ),
                ),
            }
    for state, obj in objects.items():
        argocd, flux = EXPECTED[state]
        for lua in LUA_VERSIONS:
            assert argocd_health(obj, lua)["status"] == argocd, (state, lua, obj["status"])
        assert kstatus(obj) == flux, (state, obj["status"])
    if os.environ.get("KAFKA_REBALANCE_RECORD_HEALTH") == "1":
        VECTORS.mkdir(parents=True, exist_ok=True)
        for state, obj in objects.items():
            text = json.dumps(_recorded(obj), indent=2, sort_keys=True) + "\n"
            (VECTORS / f"{state}.json").write_text(text)
