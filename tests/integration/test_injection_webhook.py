"""Sidecar injection by annotation on the real API server (KWOK pods, real Kafka, the chart).

The chart is installed with `webhook.enabled=true` and two replicas under leader election; both
replicas run as the chart's ServiceAccount with the Deployment's command line (as in
test_operator_k8s.py), the leader and then a standby, and both serve the webhook on 127.0.0.1
(`--webhook-url-host`, the development switch that points the chart's MutatingWebhookConfiguration
at that URL instead of its Service, which KWOK cannot run; the replica started last wins the
URL, so the standby answers the admissions). The API server calls it over TLS with the
self-signed certificate both replicas share through the chart's Secret.

KWOK runs no containers, so each pod's two containers run as local processes: its application,
examples/ledger-app (the project's ledger, over the sidecar's HTTP delivery), and its injected
sidecar with exactly the args the webhook gave the pod and the token of the pod's
ServiceAccount: what the pod would run, with what the pod would be allowed. Only the loopback
ports differ (each pod has its own network namespace; these processes share one).

Records are produced throughout the scale from 2 to 5 pods: the ledger reconciles what the
broker acknowledged with what the five injected sidecars delivered to their applications.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import datetime
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.cluster import pause_statefulset, wait_for
from kafka_rebalance_dev.demo.ledger import read_ledger, reconcile
from kafka_rebalance_dev.demo.observe import Sampler
from kafka_rebalance_dev.demo.operator_process import free_port
from kafka_rebalance_dev.demo.pods import LEDGER_APP
from kafka_rebalance_dev.demo.workload import Workload
from kafka_rebalance_dev.devenv.kube_api import write_kubeconfig
from kafka_rebalance_dev.devenv.ports import free_ports

from tests.integration.test_operator_k8s import (
    RELEASE,
    Cluster,
    helm_install,
    http_get,
    operator_process,
    policy_manifest,
    run_operator,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = f"{RELEASE}-kafka-rebalance-operator"
SIDECAR = "kafka-rebalance"
PARTITIONS = 10
RATE = 4.0  # records/s per partition, from the first two pods to the drain


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


def webhook_client(k8s: Any) -> dict[str, Any]:
    """The clientConfig of the chart's (one) webhook."""
    configuration = json.loads(
        k8s.kubectl("get", "mutatingwebhookconfiguration", CONFIGURATION, "-o", "json").stdout
    )
    (hook,) = configuration["webhooks"]
    return {"url": "", "caBundle": "", **hook["clientConfig"]}


def sidecar_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in pod["spec"]["containers"] if c["name"] == SIDECAR]
    return found[0] if found else None


def _stamp(line: str) -> datetime.datetime:
    """The time of a log line in the operator's and the sidecar's text format."""
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


def expand(args: list[str], pod: str, namespace: str) -> list[str]:
    """What the kubelet does with $(VAR) references in container args."""
    return [a.replace("$(POD_NAME)", pod).replace("$(POD_NAMESPACE)", namespace) for a in args]


class InjectedPods:
    """Each KWOK pod's containers as local processes: the application (examples/ledger-app on a
    port of its own) and the sidecar the webhook injected (its container's args, the pod's
    ServiceAccount token, delivering to that application)."""

    def __init__(self, workdir: Path, namespace: str, kubeconfig: Path) -> None:
        self.workdir, self.namespace, self.kubeconfig = workdir, namespace, kubeconfig
        self.ledger = workdir / "ledger"
        self.ledger.mkdir(parents=True, exist_ok=True)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        self.logs[name] = self.workdir / f"{name}.log"
        with open(self.logs[name], "wb") as out:
            self.processes[name] = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env={**os.environ, **env},
                start_new_session=True,
            )

    def start(self, *pods: dict[str, Any]) -> None:
        """Each pod's application, then (once they all listen) each pod's sidecar."""
        ports = {}
        for pod in pods:
            name = pod["metadata"]["name"]
            assert sidecar_of(pod) is not None, f"{name} has no sidecar: {pod['spec']}"
            ports[name] = free_port()
            self._spawn(
                f"app-{name}",
                [sys.executable, str(LEDGER_APP)],
                {"LEDGER_DIR": str(self.ledger), "PORT": str(ports[name]), "BIND": "127.0.0.1"},
            )
        wait_for(
            f"the applications of {sorted(ports)} listening",
            lambda: all(
                f"listening on ('127.0.0.1', {port})" in self.log(f"app-{name}")
                for name, port in ports.items()
            ),
            timeout=30,
            abort=self.crashed,
        )
        for pod in pods:
            name = pod["metadata"]["name"]
            container = sidecar_of(pod)
            assert container is not None
            self._spawn(
                f"sidecar-{name}",
                [
                    sys.executable,
                    "-m",
                    "kafka_rebalance.cli",
                    "sidecar",
                    *expand(container["args"], name, self.namespace),
                    # the pod's own loopback and identity; everything else as injected
                    "--kubeconfig",
                    str(self.kubeconfig),
                    f"--deliver-to=http://127.0.0.1:{ports[name]}/records",
                    "--bind=127.0.0.1",
                    "--health-port=0",
                    "--metrics-port=0",
                    f"--member={name}",
                ],
                {"POD_NAME": name, "POD_NAMESPACE": self.namespace},
            )

    def log(self, name: str) -> str:
        path = self.logs.get(name)
        return path.read_text(errors="replace") if path and path.exists() else ""

    def crashed(self) -> str | None:
        gone = {n: p.returncode for n, p in self.processes.items() if p.poll() is not None}
        if not gone:
            return None
        tails = "\n".join(f"--- {n} ---\n{self.log(n)[-2000:]}" for n in sorted(gone))
        return f"exited: {gone}\n{tails}"

    def stop(self) -> None:
        """SIGTERM to every sidecar first (each commits what its application took), then the
        applications; SIGKILL after a grace period."""
        order = sorted(self.processes, key=lambda n: not n.startswith("sidecar-"))
        for group in (
            [n for n in order if n.startswith("sidecar-")],
            [n for n in order if not n.startswith("sidecar-")],
        ):
            for name in group:
                if self.processes[name].poll() is None:
                    os.killpg(self.processes[name].pid, signal.SIGTERM)
            for name in group:
                try:
                    self.processes[name].wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.processes[name].pid, signal.SIGKILL)
                    self.processes[name].wait(10)


def converged(
    cluster: Cluster, sampler: Sampler, policy: str, topic: str, members: list[str]
) -> int | None:
    """The epoch when one plan over exactly `members` covers every partition and the group
    (Stable) consumes by it, else None."""
    epoch = int((cluster.policy(policy).get("status") or {}).get("epoch") or 0)
    documents = cluster.assignments(policy)
    if not epoch or set(documents) != set(members):
        return None
    if {int(d["epoch"]) for d in documents.values()} != {epoch}:
        return None
    planned = {p: m for m, d in documents.items() for p in d["partitions"].get(topic, [])}
    sample = sampler.sample()
    if len(planned) == PARTITIONS and sample.group_state == "Stable" and sample.owners == planned:
        return epoch
    return None


def test_annotated_statefulset_scaled_from_2_to_5_gets_sidecars_and_documents(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    namespace = f"inject-{uuid.uuid4().hex[:6]}"
    installed = helm_install(
        k8s,
        namespace,
        tmp_path / "helm",
        values=("webhook.enabled=true", "replicaCount=2", "leaderElection.enabled=true"),
    )
    cluster = Cluster(k8s, namespace)
    k8s.kubectl("-n", namespace, "create", "serviceaccount", "consumer")
    topic = f"inject-{uuid.uuid4().hex[:6]}"
    group = f"group-{topic}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    port, standby_port = free_ports(2)
    app, policy = "consumer", "orders"
    as_pod = token_kubeconfig(k8s, namespace, "consumer", tmp_path / "consumer.kubeconfig")
    running = InjectedPods(tmp_path / "pods", namespace, as_pod)
    workload = Workload(kafka, topic, PARTITIONS)
    sampler = Sampler(kafka, group, topic, PARTITIONS, running.ledger)
    # a generous lease: on a loaded test machine the leader must not lose it mid-test
    lease = ("--leader-election-lease=60", "--leader-election-renew-deadline=40")
    standby = operator_process(
        installed, tmp_path, "--webhook-port", str(standby_port), "--webhook-url-host",
        "127.0.0.1", *lease, log_name="standby",
    )  # fmt: skip
    with run_operator(
        installed, tmp_path, "--webhook-port", str(port), "--webhook-url-host", "127.0.0.1",
        *lease,
    ) as operator:  # fmt: skip
        try:
            # -- two replicas (the chart's leader election): the leader, then a standby; both
            # serve the webhook with the certificate the first put into the chart's Secret
            bundle = wait_for(
                "the webhook configuration pointed at the operator",
                lambda: (
                    (hook := webhook_client(k8s))["url"].startswith(f"https://127.0.0.1:{port}/")
                    and hook["caBundle"]
                ),
                timeout=60,
            )
            assert operator.log is not None
            wait_for(
                "the first replica leads", lambda: " leads (Lease " in operator.log.read_text()
            )
            standby.start(timeout=60)
            wait_for(
                "the standby serving the webhook (the dev URL points at the last to start)",
                lambda: webhook_client(k8s)["url"].startswith(f"https://127.0.0.1:{standby_port}/"),
                timeout=60,
            )
            assert webhook_client(k8s)["caBundle"] == bundle, "the caBundle must stay the same"
            served = {ssl.get_server_certificate(("127.0.0.1", p)) for p in (port, standby_port)}
            assert len(served) == 1, "both replicas serve the Secret's certificate"
            secret = cluster.get("secret", f"{CONFIGURATION}-webhook-self-signed")
            assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(bundle)
            assert standby.log is not None
            assert " leads (Lease " not in standby.log.read_text()
            status, body = http_get(standby.health_port, "/readyz")
            assert status == 200 and json.loads(body)["ready"] == {"webhook": True}, body
            # from here on the standby answers every admission
            body = json.loads(policy_manifest(policy, group, kafka, topic, app))
            body["spec"]["load"] = {"model": "rate"}  # steady production: a steady plan
            cluster.apply(json.dumps(body))
            wait_for("the policy polled", lambda: cluster.policy(policy).get("status"))

            def rollout() -> dict[str, dict[str, Any]]:
                k8s.kubectl(
                    "-n", namespace, "rollout", "status", f"statefulset/{app}",
                    "--timeout=120s", timeout=150,
                )  # fmt: skip
                listed = cluster.get("pods", "-l", f"app={app}")["items"]
                return {p["metadata"]["name"]: p for p in listed}

            # -- two pods, their injected sidecars delivering to their applications, records
            # flowing from here to the drain
            cluster.apply(annotated_statefulset(app, 2, policy, "consumer"))
            pods = rollout()
            assert sorted(pods) == [f"{app}-0", f"{app}-1"]
            running.start(*pods.values())
            workload.set_rates({p: RATE for p in range(PARTITIONS)})
            workload.start()
            producing = time.monotonic()
            first = wait_for(
                "the group on a plan over the two pods",
                lambda: converged(cluster, sampler, policy, topic, sorted(pods)),
                timeout=90,
                every=0.5,
                abort=running.crashed,
            )

            # -- scaled to 5 with no manifest change: the three new pods come with their own
            # sidecars, started as injected, while the records keep coming
            k8s.kubectl("-n", namespace, "scale", f"statefulset/{app}", "--replicas=5")
            pods = rollout()
            members = [f"{app}-{i}" for i in range(5)]
            assert sorted(pods) == members
            running.start(*(pods[name] for name in members[2:]))
            final = wait_for(
                "the group on a plan over all five pods",
                lambda: converged(cluster, sampler, policy, topic, members),
                timeout=120,
                every=0.5,
                abort=running.crashed,
            )
            assert final > first

            # -- every pod got its sidecar, wired to its own document by its exact name
            for name, pod in pods.items():
                container = sidecar_of(pod)
                assert container is not None, f"{name} has no sidecar: {pod['spec']}"
                assert f"--assignment-configmap={policy}.{name}" in container["args"]
                assert f"--group={group}" in container["args"]
                assert "--deliver-to=http://127.0.0.1:8000/records" in container["args"]
                assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
                assert container["resources"]["requests"]["cpu"] == "100m"

            # -- the operator's plan: one ConfigMap per pod, all partitions
            assignments = cluster.assignments(policy)
            assert sorted(assignments) == members
            owned = sorted(p for d in assignments.values() for p in d["partitions"].get(topic, []))
            assert owned == list(range(PARTITIONS))

            def accepted(name: str) -> list[tuple[datetime.datetime, int]]:
                marker = (
                    f"accepted assignment from configmap {namespace}/{policy}.{name}: "
                    f"group {group} member {name} epoch "
                )
                return [
                    (_stamp(line), int(line.split(marker)[1].split(",")[0]))
                    for line in running.log(f"sidecar-{name}").splitlines()
                    if marker in line
                ]

            # -- the plan reached all five: each sidecar accepted that epoch's document (or a
            # later one), and each delivered records under it
            for name in members:
                assert max(e for _, e in accepted(name)) >= final, (name, accepted(name))
            wait_for(
                f"each of the five delivering under epoch {final}",
                lambda: (
                    {e.member for e in read_ledger(running.ledger)[0] if e.epoch >= final}
                    == set(members)
                ),
                timeout=30,
                every=0.5,
                abort=running.crashed,
            )

            # -- the ledger: every acknowledged record delivered, never two owners at once (over
            # 500 of them, however fast the steps above went)
            wait_for(
                "over 500 records produced",
                lambda: len(workload.produced()) > 500,
                timeout=60,
                every=0.5,
                abort=running.crashed,
            )
            workload.stop()
            wait_for(
                "the group to drain",
                lambda: sampler.sample().total_lag == 0,
                timeout=90,
                every=0.5,
                abort=running.crashed,
            )
            report = reconcile(workload.produced(), running.ledger)
            print(
                f"\ninjected sidecars, scaled 2 -> 5 under load (epochs {first} -> {final}), "
                f"{time.monotonic() - producing:.0f}s from the first record to the drain: "
                f"{report.summary()}; per member {report.per_member}"
            )
            assert report.produced > 500
            assert report.lost == 0, report.lost_examples
            assert report.unexpected == 0
            assert report.malformed_lines == 0
            assert report.overlaps == (), report.overlaps[:5]
            assert set(report.per_member) == set(members)

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

            # -- a new plan reaches the running sidecars within 5 s of the operator's write
            k8s.kubectl("-n", namespace, "scale", f"statefulset/{app}", "--replicas=6")
            wait_for(
                f"every sidecar on an epoch above {final}",
                lambda: all(any(e > final for _, e in accepted(n)) for n in members),
                timeout=60,
            )
            newer = min(min(e for _, e in accepted(n) if e > final) for n in members)
            assert operator.log is not None
            log = operator.log

            def written_at() -> list[datetime.datetime]:
                return [
                    _stamp(line)
                    for line in log.read_text(errors="replace").splitlines()
                    if f"{namespace}/{policy} epoch {newer}: " in line and "written" in line
                ]

            # the line follows the last write, so the sidecars may have accepted it first
            (written,) = wait_for(f"the operator's line for epoch {newer}", written_at)
            delays = {n: min(t for t, e in accepted(n) if e == newer) - written for n in members}
            print(
                f"operator's write (its log line after the last ConfigMap) -> sidecar accepts "
                f"epoch {newer}: "
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

            # -- the leader stops: the other replica still injects
            operator.stop()
            leaderless = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "leader-down",
                    "annotations": {"kafka-rebalance.io/policy": policy},
                },
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            }
            cluster.apply(json.dumps(leaderless))
            assert sidecar_of(cluster.get("pod", "leader-down")) is not None

            # -- fail open: with both replicas down, an annotated pod still starts (no sidecar)
            standby.stop()
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
        except BaseException:
            for name in sorted(running.logs):
                print(f"--- {name} ---\n{running.log(name)[-3000:]}")
            raise
        finally:
            standby.stop()
            running.stop()
            with contextlib.suppress(Exception):
                workload.close()
            sampler.close()
            print(operator.log.read_text(errors="replace")[-3000:] if operator.log else "")


def test_replicas_starting_at_once_settle_on_one_certificate_and_renew_it(k8s: Any) -> None:
    """shared_cert.load against the real API server: four replicas racing for an empty Secret
    all serve the one certificate that was written; one starting near its expiry renews it and
    keeps it in the bundle beside the new one."""
    from kafka_rebalance_operator.kube import kube_io
    from kafka_rebalance_operator.webhook import certs, shared_cert

    namespace = f"cert-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", namespace)
    k8s.kubectl("-n", namespace, "create", "secret", "generic", "tls")
    hosts = ["kro-webhook.ops.svc", "127.0.0.1"]
    previous, kube_io._API = kube_io._API, k8s.api_client()
    try:
        barrier = threading.Barrier(4)

        def replica() -> shared_cert.Shared:
            barrier.wait()
            return shared_cert.load(namespace, "tls", hosts)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            served = [f.result() for f in [pool.submit(replica) for _ in range(4)]]
        assert len({s.pem for s in served}) == 1, "every replica serves the same certificate"
        stored = cluster_secret(k8s, namespace, "tls")
        assert stored[shared_cert.CERT] == served[0].pem.cert
        assert stored[shared_cert.BUNDLE] == served[0].bundle == served[0].pem.cert

        # a replica starting 340 days later (within 30 days of the expiry) renews it
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=340)
        renewed = shared_cert.load(namespace, "tls", hosts, now=later)
        assert renewed.pem != served[0].pem
        assert certs.split_bundle(renewed.bundle) == [renewed.pem.cert, served[0].pem.cert]
        assert cluster_secret(k8s, namespace, "tls")[shared_cert.BUNDLE] == renewed.bundle
        # and a missing Secret is named
        with pytest.raises(shared_cert.SharedCertError, match=f"{namespace}/absent"):
            shared_cert.load(namespace, "absent", hosts)
    finally:
        kube_io._API.close()
        kube_io._API = previous
        k8s.kubectl("delete", "namespace", namespace, "--wait=false")


def cluster_secret(k8s: Any, namespace: str, name: str) -> dict[str, bytes]:
    secret = json.loads(k8s.kubectl("-n", namespace, "get", "secret", name, "-o", "json").stdout)
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
