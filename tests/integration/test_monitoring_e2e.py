"""The alert rules and the Grafana dashboard against a real Prometheus (Debian's, started by the
dev environment on loopback) scraping the operator and the sidecars of a running group.

- every scrape target is up;
- an injected fault (a policy whose Secret does not exist) makes `KafkaRebalancePolicyStalled`
  fire. The rules are the chart's file with every `for:` shortened to 2 s, nothing else changed;
- every panel query of the dashboard returns data, `$namespace` set to the group's namespace.

In CI a missing `prometheus` binary fails the test; elsewhere it is skipped with the one line
saying how to get it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.devenv import prometheus

pytestmark = pytest.mark.integration

CHART_FILES = Path(__file__).resolve().parents[2] / "charts" / "kafka-rebalance-operator" / "files"


def _require_prometheus() -> None:
    if prometheus.binary() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(prometheus.MISSING, pytrace=False)
        pytest.skip(prometheus.MISSING)


def _rules_with_short_for(directory: Path) -> Path:
    """The chart's rules, every `for:` 2 s: the same expressions, alerts that fire in a test."""
    rules = yaml.safe_load((CHART_FILES / "prometheus-rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "2s"
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    return path


def _dashboard_queries() -> list[str]:
    dashboard = json.loads((CHART_FILES / "grafana-dashboard.json").read_text())
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                found.append(node["expr"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dashboard.get("panels", []))
    return found


def test_real_prometheus_scrapes_alerts_fire_and_every_dashboard_query_has_data(
    kafka: str, k8s: Any, tmp_path: Path
) -> None:
    _require_prometheus()
    endpoints = Endpoints(
        bootstrap_servers=kafka, kubeconfig=k8s.kubeconfig, kubectl=k8s.tools.kubectl
    )
    harness = GroupHarness(
        endpoints, tmp_path / "group", prefix="monitoring", partitions=4, replicas=2,
        sidecar_metrics=True,
    )  # fmt: skip
    server: prometheus.Prometheus | None = None
    try:
        harness.setup()
        harness.operator.start()
        harness.apply_policy("lag-aware", "enforce")
        members = harness.pods(2)
        harness.start_sidecars(members)
        harness.produce({p: 20.0 for p in range(harness.partitions)})
        harness.wait_assigned(members)
        targets = {
            "kafka-rebalance-operator": [f"127.0.0.1:{harness.operator.metrics_port}"],
            "kafka-rebalance-sidecar": [
                f"127.0.0.1:{harness.fleet.metrics_ports[m]}" for m in members
            ],
        }
        server = prometheus.Prometheus(
            tmp_path / "prometheus", targets, [_rules_with_short_for(tmp_path)]
        )
        server.start()
        health = wait_for(
            "every target up",
            lambda: (h := server.targets_up()) and set(h.values()) == {"up"} and h,
            timeout=60,
        )
        assert len(health) == 1 + len(members)

        # The fault: a second policy naming a Secret that does not exist.
        broken = {
            "apiVersion": "kafka-rebalance.io/v1alpha1",
            "kind": "ConsumerGroupPolicy",
            "metadata": {"name": "no-secret"},
            "spec": {
                "groupId": f"{harness.group}-other",
                "kafka": {"bootstrapServers": kafka, "secretRef": {"name": "absent"}},
                "topics": [harness.topic],
                "members": {"selector": {"matchLabels": {"app": "nobody"}}},
            },
        }
        injected = time.monotonic()
        harness.cluster.apply_policy(broken)
        wait_for(
            "the Stalled condition scraped",
            lambda: server.query('kafka_rebalance_policy_condition{policy="no-secret"}'),
            timeout=60,
        )
        firing = wait_for(
            "KafkaRebalancePolicyStalled firing",
            lambda: [
                a
                for a in server.alerts()
                if a["labels"]["alertname"] == "KafkaRebalancePolicyStalled"
                and a["state"] == "firing"
            ],
            timeout=90,
        )
        fired_after = time.monotonic() - injected
        assert {a["labels"]["policy"] for a in firing} == {"no-secret"}
        assert firing[0]["labels"]["reason"] == "SecretNotFound"
        healthy = [a for a in server.alerts() if a["labels"].get("policy") == harness.policy]
        assert not healthy, healthy

        queries = [q.replace("$namespace", harness.namespace) for q in _dashboard_queries()]
        assert len(queries) >= 10
        empty: list[str] = []
        deadline = time.monotonic() + 90
        while True:
            empty = [q for q in queries if not server.query(q)]
            if not empty or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert not empty, f"dashboard queries without data: {empty}"
        print(
            f"\nreal Prometheus {len(health)} targets up; KafkaRebalancePolicyStalled firing "
            f"{fired_after:.1f} s after the fault (for: 2s); {len(queries)} dashboard queries "
            "all returned data"
        )
    finally:
        if server is not None:
            server.stop()
        harness.close()
