"""No ghost members after a watch gap (issue 10 item 9), on a real API server.

The gap is made the way it happens in a cluster: the operator is cut off from the API server
(here: a TCP forwarder between them stops forwarding), a member pod is deleted meanwhile, and
the API server restarts, so its watch history no longer reaches back to where the operator's
watch left off (etcd is compacted too, so the deletion's event cannot be replayed from there
either). kopf then lists the pods again, and its index keeps the deleted pod. The
operator's pod audit must drop it from membership: its ConfigMap goes and the plan covers the
remaining pods. This control plane is the test's own, because it restarts the API server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.cluster import Cluster, install_crd, policy_body, wait_for
from kafka_rebalance_dev.demo.operator_process import OperatorProcess
from kafka_rebalance_dev.devenv import control_plane
from kafka_rebalance_dev.devenv.toolchain import Toolchain

from tests.conftest import KUBE_TOOLS, _release, _require, _supervisor

pytestmark = pytest.mark.integration

APP, POLICY = "consumer", "ghosts"
AUDIT_S = 2  # the operator's --pod-audit-interval here


class Forwarder:
    """127.0.0.1:port -> the API server, which the test can cut (every connection closed, new
    ones refused) and restore on the same port."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.resume()

    def resume(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            # close() alone neither wakes a thread blocked in accept() nor stops the socket
            # listening while that call holds it: shut it down first
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def plane(tools: Toolchain, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    _require(tools, *KUBE_TOOLS)
    supervisor = _supervisor(tmp_path / "kubernetes")
    try:
        yield control_plane.start(tmp_path / "kubernetes", tools, supervisor), supervisor
    finally:
        _release(supervisor)


def _compact_etcd(supervisor: Any) -> int:
    """Compact etcd at its current revision (its HTTP gateway), so no watch can resume from a
    resource version older than now: the API server answers 410 Gone, whether it serves the
    watch from its cache or from etcd. Returns the revision."""
    port = supervisor.record("etcd").ports["client"]
    base = f"http://127.0.0.1:{port}/v3/kv"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{base}/{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return dict(json.loads(answer.read()))

    revision = int(post("range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    post("compaction", {"revision": revision, "physical": True})
    return revision


def _restart_api_server(plane: Any, supervisor: Any) -> None:
    record = supervisor.record("kube-apiserver")
    supervisor.stop_one("kube-apiserver", grace=10)
    supervisor.start("kube-apiserver", record.argv, Path(record.log), ports=record.ports)
    supervisor.wait_until(
        "kube-apiserver",
        lambda: control_plane.api_ready(plane),
        timeout=90,
        what="ready after its restart",
    )


def _pod_watch_down(operator: OperatorProcess, namespace: str) -> bool:
    log = operator.log.read_text(errors="replace") if operator.log else ""
    return any(
        "failed" in line and f"/namespaces/{namespace}/pods?watch=true" in line
        for line in log.splitlines()
    )


def _members(cluster: Cluster) -> set[str]:
    items = cluster.core.list_namespaced_config_map(cluster.namespace).items
    return {
        json.loads(item.data["assignment.json"])["member"]
        for item in items
        if (item.data or {}).get("assignment.json")
    }


def test_a_pod_deleted_while_the_watch_was_down_leaves_the_group(
    plane: tuple[Any, Any], kafka: str, tools: Toolchain, tmp_path: Path
) -> None:
    started, supervisor = plane
    install_crd(tools.kubectl, started.kubeconfig)
    namespace = f"ghosts-{uuid.uuid4().hex[:6]}"
    cluster = Cluster(started.kubeconfig, namespace)
    forwarder = Forwarder(started.api_port)
    config = yaml.safe_load(started.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{forwarder.port}"
    forwarded = tmp_path / "forwarded.kubeconfig"
    forwarded.write_text(yaml.safe_dump(config))
    operator = OperatorProcess(
        forwarded,
        namespace,
        tmp_path,
        extra=["--pod-audit-interval", str(AUDIT_S)],
    )
    admin = RetryingAdmin(bootstrap_servers=kafka)
    try:
        cluster.create_namespace()
        wait_for(
            "the default ServiceAccount",
            lambda: cluster.core.read_namespaced_service_account("default", namespace),
            timeout=60,
        )
        cluster.create_statefulset(APP, 3)
        pods = [f"{APP}-{i}" for i in range(3)]
        cluster.wait_pods(APP, pods)
        admin.create_topics([NewTopic(namespace, 6, 1)])
        operator.start()
        cluster.apply_policy(
            policy_body(
                POLICY,
                group=f"{namespace}-group",
                bootstrap=kafka,
                topic=namespace,
                app=APP,
                strategy="roundrobin",
                mode="enforce",
            )
        )
        wait_for("a plan for three members", lambda: _members(cluster) == set(pods), 60)

        forwarder.cut()  # the operator's watches are down from here: kopf says so
        # (its pod watch failing to reconnect) before anything is deleted
        wait_for(
            "the operator's pod watch to be down",
            lambda: _pod_watch_down(operator, namespace),
            timeout=60,
        )
        cluster.scale(APP, 2)
        wait_for(
            f"{pods[2]} to be deleted",
            lambda: (
                pods[2]
                not in {p.metadata.name for p in cluster.core.list_namespaced_pod(namespace).items}
            ),
            timeout=60,
        )
        _compact_etcd(supervisor)  # the deletion's event is gone from etcd's history ...
        _restart_api_server(started, supervisor)  # ... and from the API server's watch cache
        forwarder.resume()

        wait_for(
            f"the plan to leave out {pods[2]}",
            lambda: _members(cluster) == set(pods[:2]),
            timeout=30 + 5 * AUDIT_S,
        )
        log = operator.log.read_text(errors="replace") if operator.log else ""
        assert f"pod {namespace}/{pods[2]} (uid" in log and "left out of membership" in log

        def members_in_status() -> object:
            policy = cluster.custom.get_namespaced_custom_object(
                "kafka-rebalance.io", "v1alpha1", namespace, "consumergrouppolicies", POLICY
            )
            return policy.get("status", {}).get("members")

        # the status is written after the ConfigMaps, by the same poll
        wait_for("the status to count two members", lambda: members_in_status() == 2, 30)
    except BaseException:
        if operator.log is not None and operator.log.exists():
            tail = operator.log.read_text(errors="replace").splitlines()[-40:]
            print("operator log tail:\n" + "\n".join(tail))
        raise
    finally:
        operator.stop()
        forwarder.cut()
        admin.close()
        cluster.close()
