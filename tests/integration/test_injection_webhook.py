"""Sidecar injection by annotation on the real API server (KWOK pods, real Kafka, the chart).

The chart is installed with `webhook.enabled=true`; the operator runs as the chart's
ServiceAccount with the Deployment's command line (as in test_operator_k8s.py) and serves the
webhook on 127.0.0.1 (`--webhook-url-host`, the development switch that points the chart's
MutatingWebhookConfiguration at that URL instead of its Service, which KWOK cannot run). The
API server calls it over TLS with the operator's self-signed certificate.

KWOK runs no containers, so the injected sidecars run as local processes with exactly the args
the webhook gave each pod and the token of the pod's ServiceAccount: what the pod would run,
with what the pod would be allowed.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.cluster import pause_statefulset, wait_for
from kafka_rebalance_dev.demo.operator_process import free_port
from kafka_rebalance_dev.devenv.kube_api import write_kubeconfig

from tests.integration.test_operator_k8s import (
    RELEASE,
    Cluster,
    helm_install,
    policy_manifest,
    run_operator,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = f"{RELEASE}-kafka-rebalance-operator"
SIDECAR = "kafka-rebalance"


def token_kubeconfig(k8s: Any, namespace: str, account: str, path: Path) -> Path:
    from kubernetes import client

    api = k8s.api_client()
    try:
        token = (
            client.CoreV1Api(api)
            .create_namespaced_service_account_token(
                account, namespace, {"spec": {"expirationSeconds": 3600}}
            )
            .status.token
        )
    finally:
        api.close()
    return write_kubeconfig(
        path,
        k8s.server,
        k8s.ca,
        user=f"system:serviceaccount:{namespace}:{account}",
        token=token,
        namespace=namespace,
    )


def annotated_statefulset(name: str, replicas: int, policy: str, account: str) -> str:
    service, statefulset = pause_statefulset(name, replicas)
    template = statefulset["spec"]["template"]
    template["metadata"]["annotations"] = {"kafka-rebalance.io/policy": policy}
    template["spec"]["serviceAccountName"] = account
    return yaml.safe_dump_all([service, statefulset], sort_keys=False)


def sidecar_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in pod["spec"]["containers"] if c["name"] == SIDECAR]
    return found[0] if found else None


def _stamp(line: str) -> datetime.datetime:
    """The time of a log line in the operator's and the sidecar's text format."""
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


def expand(args: list[str], pod: str, namespace: str) -> list[str]:
    """What the kubelet does with $(VAR) references in container args."""
    return [a.replace("$(POD_NAME)", pod).replace("$(POD_NAMESPACE)", namespace) for a in args]


def test_annotated_statefulset_scaled_from_2_to_5_gets_sidecars_and_documents(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    namespace = f"inject-{uuid.uuid4().hex[:6]}"
    installed = helm_install(k8s, namespace, tmp_path / "helm", values=("webhook.enabled=true",))
    cluster = Cluster(k8s, namespace)
    k8s.kubectl("-n", namespace, "create", "serviceaccount", "consumer")
    topic = f"inject-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 10, 1)])
    admin.close()
    port = free_port()
    app, policy = "consumer", "orders"
    sidecars: list[subprocess.Popen[bytes]] = []
    with run_operator(
        installed, tmp_path, "--webhook-port", str(port), "--webhook-url-host", "127.0.0.1"
    ) as operator:
        try:
            wait_for(
                "the webhook configuration pointed at the operator",
                lambda: (
                    f"https://127.0.0.1:{port}/"
                    in k8s.kubectl(
                        "get", "mutatingwebhookconfiguration", CONFIGURATION, "-o", "json"
                    ).stdout
                ),
                timeout=60,
            )
            cluster.apply(policy_manifest(policy, f"group-{topic}", kafka, topic, app))
            wait_for("the policy polled", lambda: cluster.policy(policy).get("status"))

            cluster.apply(annotated_statefulset(app, 2, policy, "consumer"))
            k8s.kubectl(
                "-n",
                namespace,
                "rollout",
                "status",
                f"statefulset/{app}",
                "--timeout=120s",
                timeout=150,
            )
            k8s.kubectl("-n", namespace, "scale", f"statefulset/{app}", "--replicas=5")
            k8s.kubectl(
                "-n",
                namespace,
                "rollout",
                "status",
                f"statefulset/{app}",
                "--timeout=120s",
                timeout=150,
            )
            pods = {
                p["metadata"]["name"]: p for p in cluster.get("pods", "-l", f"app={app}")["items"]
            }
            members = [f"{app}-{i}" for i in range(5)]
            assert sorted(pods) == members

            # -- every pod got its sidecar, wired to its own document by its exact name
            for name, pod in pods.items():
                container = sidecar_of(pod)
                assert container is not None, f"{name} has no sidecar: {pod['spec']}"
                assert f"--assignment-configmap={policy}.{name}" in container["args"]
                assert f"--group=group-{topic}" in container["args"]
                assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
                assert container["resources"]["requests"]["cpu"] == "100m"

            # -- the operator's plan: one ConfigMap per pod, all 10 partitions
            assignments = wait_for(
                "a document for each of the 5 pods",
                lambda: len(cluster.assignments(policy)) == 5 and cluster.assignments(policy),
                timeout=60,
            )
            owned = sorted(p for d in assignments.values() for p in d["partitions"].get(topic, []))
            assert owned == list(range(10))

            # -- the pods' ServiceAccount reads its policy's documents and nothing else
            role = cluster.get("role", f"kafka-rebalance-documents.{policy}")
            (owner,) = role["metadata"]["ownerReferences"]
            assert owner["uid"] == cluster.policy(policy)["metadata"]["uid"]
            (rule,) = role["rules"]
            assert {f"{policy}.{m}" for m in members} <= set(rule["resourceNames"])
            binding = cluster.get("rolebinding", f"kafka-rebalance-documents.{policy}")
            assert {"kind": "ServiceAccount", "name": "consumer", "namespace": namespace} in [
                {k: s[k] for k in ("kind", "name", "namespace")} for s in binding["subjects"]
            ]
            as_pod = token_kubeconfig(k8s, namespace, "consumer", tmp_path / "consumer.kubeconfig")
            k8s.kubectl("-n", namespace, "create", "configmap", "other.consumer-0")
            assert (
                k8s.kubectl(
                    "-n",
                    namespace,
                    "get",
                    "configmap",
                    f"{policy}.{app}-4",
                    kubeconfig=as_pod,
                    check=False,
                ).returncode
                == 0
            )
            denied = k8s.kubectl(
                "-n",
                namespace,
                "get",
                "configmap",
                "other.consumer-0",
                kubeconfig=as_pod,
                check=False,
            )
            assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()

            # -- each injected sidecar, run as its pod would run it, follows its own document
            logs = {}
            for name, pod in pods.items():
                container = sidecar_of(pod)
                assert container is not None
                args = expand(container["args"], name, namespace)
                logs[name] = tmp_path / f"sidecar-{name}.log"
                with open(logs[name], "wb") as out:
                    sidecars.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "kafka_rebalance.cli",
                                "sidecar",
                                *args,
                                "--kubeconfig",
                                str(as_pod),
                                "--bind=127.0.0.1",
                                "--health-port=0",
                                "--metrics-port=0",
                                f"--member={name}",
                            ],
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            cwd=ROOT,
                            env={**os.environ, "POD_NAME": name, "POD_NAMESPACE": namespace},
                            start_new_session=True,
                        )
                    )

            def accepted(name: str) -> list[tuple[datetime.datetime, int]]:
                marker = (
                    f"accepted assignment from configmap {namespace}/{policy}.{name}: "
                    f"group group-{topic} member {name} epoch "
                )
                return [
                    (_stamp(line), int(line.split(marker)[1].split(",")[0]))
                    for line in logs[name].read_text(errors="replace").splitlines()
                    if marker in line
                ]

            for name in members:
                wait_for(
                    f"{name}'s sidecar accepts its document", lambda n=name: accepted(n), timeout=60
                )

            # -- a new plan reaches the running sidecars within 5 s of the operator's write
            epoch = max(e for name in members for _, e in accepted(name))
            k8s.kubectl("-n", namespace, "scale", f"statefulset/{app}", "--replicas=6")
            wait_for(
                f"every sidecar on epoch {epoch + 1}",
                lambda: all(any(e > epoch for _, e in accepted(n)) for n in members),
                timeout=60,
            )
            assert operator.log is not None
            (written,) = [
                _stamp(line)
                for line in operator.log.read_text(errors="replace").splitlines()
                if f"{namespace}/{policy} epoch {epoch + 1}: " in line and "written" in line
            ]
            delays = {n: min(t for t, e in accepted(n) if e > epoch) - written for n in members}
            print(
                f"\noperator's write (its log line after the last ConfigMap) -> sidecar accepts "
                f"epoch {epoch + 1}: "
                + ", ".join(f"{n} {d.total_seconds():.3f}s" for n, d in sorted(delays.items()))
            )
            assert max(d.total_seconds() for d in delays.values()) < 5.0, delays

            # -- a server-side dry run is mutated but writes nothing (sideEffects NoneOnDryRun)
            k8s.kubectl("-n", namespace, "create", "serviceaccount", "dry")
            dry = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "dry", "annotations": {"kafka-rebalance.io/policy": policy}},
                "spec": {
                    "serviceAccountName": "dry",
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                },
            }
            (tmp_path / "dry.json").write_text(json.dumps(dry))
            answer = k8s.kubectl(
                "-n", namespace, "create", "--dry-run=server", "-o", "json",
                "-f", str(tmp_path / "dry.json"),
            )  # fmt: skip
            assert sidecar_of(json.loads(answer.stdout)) is not None
            binding = cluster.get("rolebinding", f"kafka-rebalance-documents.{policy}")
            assert "dry" not in {s["name"] for s in binding["subjects"]}

            # -- a pod naming a policy that does not exist is refused, naming it
            missing = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "no-policy",
                    "annotations": {"kafka-rebalance.io/policy": "absent"},
                },
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            }
            (tmp_path / "no-policy.json").write_text(json.dumps(missing))
            refused = k8s.kubectl(
                "-n", namespace, "create", "-f", str(tmp_path / "no-policy.json"), check=False
            )
            assert refused.returncode != 0
            assert "no ConsumerGroupPolicy 'absent' in namespace" in refused.stderr, refused.stderr

            # -- fail open: with the operator down, an annotated pod still starts (no sidecar)
            operator.stop()
            unmanaged = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "while-down",
                    "annotations": {"kafka-rebalance.io/policy": policy},
                },
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            }
            cluster.apply(json.dumps(unmanaged))
            assert sidecar_of(cluster.get("pod", "while-down")) is None
        finally:
            for process in sidecars:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)
            for process in sidecars:
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
            print(operator.log.read_text(errors="replace")[-3000:] if operator.log else "")
