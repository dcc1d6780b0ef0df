"""The ConfigMap API-watch source against a real kube-apiserver, with the least privilege a sidecar
needs: get/list/watch on its own ConfigMap only (RBAC resourceNames; the source lists and watches
with a `metadata.name` field selector, which is what makes resourceNames apply to list/watch)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo import ledger
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.source import DATA_KEY, ConfigMapSource

from tests.integration.test_sidecar_kafka import Bench, Sidecar, wait_for

pytestmark = pytest.mark.integration

GROUP = "orders-processor"


def document(epoch: int, partitions: dict[str, list[int]], member: str = "orders-0") -> str:
    return json.dumps({"group": GROUP, "member": member, "epoch": epoch, "partitions": partitions})


class ConfigMaps:
    def __init__(self, k8s: Any, namespace: str) -> None:
        from kubernetes import client

        self.api = k8s.api_client()
        self.core = client.CoreV1Api(self.api)
        self.namespace = namespace

    def put(self, name: str, text: str) -> None:
        from kubernetes.client.rest import ApiException

        body = {"metadata": {"name": name}, "data": {DATA_KEY: text}}
        try:
            self.core.replace_namespaced_config_map(name, self.namespace, body)
        except ApiException as error:
            if error.status != 404:
                raise
            self.core.create_namespaced_config_map(self.namespace, body)

    def delete(self, name: str) -> None:
        self.core.delete_namespaced_config_map(name, self.namespace)


def sidecar_kubeconfig(k8s: Any, namespace: str, configmap: str) -> Path:
    return k8s.restricted_kubeconfig(
        namespace,
        [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [configmap],
                "verbs": ["get", "list", "watch"],
            }
        ],
        name="sidecar",
    )


@pytest.fixture
def namespace(k8s: Any) -> str:
    name = f"sidecar-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", name)
    return name


def test_watch_follows_updates_and_keeps_the_last_good_document(k8s, namespace):
    maps = ConfigMaps(k8s, namespace)
    name = "orders-orders-0"
    maps.put(name, document(1, {"orders": [0]}))
    kubeconfig = sidecar_kubeconfig(k8s, namespace, name)
    tracker = AssignmentTracker(group=GROUP, member="orders-0")
    source = ConfigMapSource(namespace, name, tracker, str(kubeconfig)).start()
    try:
        assert tracker.current is not None and tracker.current.epoch == 1  # read in start()

        started = time.monotonic()
        maps.put(name, document(2, {"orders": [0, 1]}))
        wait_for("epoch 2", lambda: tracker.current.epoch == 2, timeout=10, every=0.05)
        print(f"ConfigMap update seen by the watch after {time.monotonic() - started:.2f}s")

        maps.put(name, '{"group": "orders-processor", "epoch": ')
        wait_for("the corrupt document rejected", lambda: tracker.rejected == 1, timeout=10)
        maps.put(name, document(1, {"orders": [0, 1, 2, 3]}))
        wait_for("the lower epoch rejected", lambda: tracker.rejected == 2, timeout=10)
        maps.put(name, document(4, {"orders": [1]}, member="orders-1"))
        wait_for("another pod's document rejected", lambda: tracker.rejected == 3, timeout=10)
        assert tracker.current.epoch == 2
        assert tracker.current.owned() == {("orders", 0), ("orders", 1)}

        maps.delete(name)
        time.sleep(1)
        assert tracker.current.epoch == 2  # a deleted ConfigMap is not a plan
        maps.put(name, document(3, {"orders": [2]}))
        wait_for("epoch 3 after re-creation", lambda: tracker.current.epoch == 3, timeout=10)
        assert tracker.current.owned() == {("orders", 2)}
    finally:
        source.stop()


def test_updates_between_server_ended_watches_are_not_missed(k8s, namespace):
    """The server ends every watch after `timeout_seconds`; the source resumes from the last
    resourceVersion it saw, so an update made while no watch was open is still delivered. (The
    410-Gone relist path cannot be provoked here: the API server's watch cache serves old
    versions from memory even after an etcd compaction.)"""
    maps = ConfigMaps(k8s, namespace)
    name = "orders-orders-0"
    maps.put(name, document(5, {"orders": [3]}))
    tracker = AssignmentTracker(group=GROUP, member="orders-0")
    source = ConfigMapSource(
        namespace, name, tracker, str(sidecar_kubeconfig(k8s, namespace, name)), watch_timeout_s=1
    ).start()
    try:
        assert tracker.current.epoch == 5
        for epoch in (6, 7, 8):
            time.sleep(1.3)  # at least one watch ended and was re-opened in between
            maps.put(name, document(epoch, {"orders": [epoch]}))
            wait_for(f"epoch {epoch}", lambda e=epoch: tracker.current.epoch == e, timeout=10)
        assert source.relists == 0  # resumed, never needed a fresh list
        assert tracker.rejected == 0
    finally:
        source.stop()


def test_a_sidecar_reads_its_configmap_through_the_api(k8s, namespace, kafka, tmp_path):
    bench = Bench(kafka, tmp_path / "cm", 4, "cm")
    name = "policy-cm-0"
    maps = ConfigMaps(k8s, namespace)
    maps.put(
        name,
        json.dumps(
            {
                "group": bench.group,
                "member": "cm-0",
                "epoch": 1,
                "partitions": {bench.topic: [0, 1]},
            }
        ),
    )
    kubeconfig = sidecar_kubeconfig(k8s, namespace, name)
    car = Sidecar(
        kafka,
        bench.group,
        bench.topic,
        "cm-0",
        Path("unused"),
        bench.ledger,
        bench.logs,
        mode="assign",
    )
    position = car.args.index("--assignment")
    car.args[position : position + 2] = [
        "--assignment-configmap",
        name,
        "--namespace",
        namespace,
        "--kubeconfig",
        str(kubeconfig),
    ]
    bench.sidecars.append(car)
    car.start()
    try:
        bench.produce(10)
        wait_for(
            "partitions 0 and 1 processed",
            lambda: (
                ledger.reconcile({(bench.topic, 0): 10, (bench.topic, 1): 10}, bench.ledger).lost
                == 0
            ),
            timeout=30,
        )
        assert ledger.reconcile(bench.produced, bench.ledger).lost == 20  # 2 and 3 not planned
        maps.put(
            name,
            json.dumps(
                {
                    "group": bench.group,
                    "member": "cm-0",
                    "epoch": 2,
                    "partitions": {bench.topic: [0, 1, 2, 3]},
                }
            ),
        )
        report = wait_for("all four partitions", bench.all_processed, timeout=30)
        assert report.lost == 0 and report.conflicts == ()
        assert car.metrics()["document_epoch"] == 2
        assert f"configmap {namespace}/{name}" in car.log_text()
    finally:
        bench.close()
