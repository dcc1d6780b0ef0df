"""The operator end to end: real kube-apiserver (KWOK pods), real Kafka, the chart's RBAC.

Each test installs the Helm chart (`helm install` from `charts/`, the CRD from the chart's
`crds/`) into its own namespace with `watchNamespaces` = that namespace, then runs the
operator as a subprocess with the command line of the chart's Deployment and a TokenRequest
token of the chart's ServiceAccount: exactly what the operator's pod would run, with exactly the
permissions the chart grants. The Deployment is installed with `replicaCount=0`: KWOK runs no
containers, so a replica would be a pod that reports Running while nothing runs in it; the
subprocess is that pod's process. Policies poll every second (`pollInterval: 1s`, the CRD's
floor), which the operator honours with `--min-poll-interval 1s` (OperatorProcess's default).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.demo.operator_process import OperatorProcess, free_port
from kafka_rebalance_dev.devenv.kube_api import write_kubeconfig
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.manifests import pause_statefulset

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kafka-rebalance-operator"
RELEASE = "kro"
SERVICE_ACCOUNT = f"{RELEASE}-kafka-rebalance-operator"  # the chart's fullname for release kro
CRD_NAME = "consumergrouppolicies.kafka-rebalance.io"


@dataclass
class Installed:
    """The chart installed for one namespace: the operator's identity and command line."""

    kubeconfig: Path
    namespace: str
    args: list[str]  # the Deployment container's args (`operator --namespace NS ...`)


def helm_install(
    k8s: Any,
    namespace: str,
    home: Path,
    also_watch: tuple[str, ...] = (),
    values: tuple[str, ...] = (),
) -> Installed:
    """`helm install` the chart watching `namespace` (and `also_watch`, created here too); a
    token kubeconfig of its ServiceAccount."""
    from kubernetes import client

    home.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "KUBECONFIG": str(k8s.kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    for created in (namespace, *also_watch):
        k8s.kubectl("create", "namespace", created)
    watched = ",".join((namespace, *also_watch))
    installed = subprocess.run(
        [
            str(k8s.tools.helm),
            "install",
            RELEASE,
            str(CHART),
            "--namespace",
            namespace,
            "--set",
            f"watchNamespaces={{{watched}}}",
            "--set",
            "replicaCount=0",
            *(arg for value in values for arg in ("--set", value)),
            "--wait",
            "--timeout=2m",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    k8s.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}", timeout=90
    )
    # discovery must serve the resource before a namespaced operator can watch it
    wait_for(
        "the CRD in discovery",
        lambda: (
            "consumergrouppolicies"
            in k8s.kubectl("api-resources", "--api-group=kafka-rebalance.io", check=False).stdout
        ),
    )
    deployment = json.loads(
        k8s.kubectl("-n", namespace, "get", "deployment", SERVICE_ACCOUNT, "-o", "json").stdout
    )
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    (container,) = pod["containers"]
    assert container["command"] == ["kafka-rebalance"]
    api = k8s.api_client()
    try:
        token = (
            client.CoreV1Api(api)
            .create_namespaced_service_account_token(
                SERVICE_ACCOUNT, namespace, {"spec": {"expirationSeconds": 3600}}
            )
            .status.token
        )
    finally:
        api.close()
    kubeconfig = write_kubeconfig(
        home / f"{namespace}.kubeconfig",
        k8s.server,
        k8s.ca,
        user=f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}",
        token=token,
        namespace=namespace,
    )
    return Installed(kubeconfig, namespace, list(container["args"]))


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body of a GET on 127.0.0.1 (an error status is an answer, not a failure)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def operator_process(
    installed: Installed, workdir: Path, *extra: str, log_name: str | None = None
) -> OperatorProcess:
    """The chart Deployment's command line as a (not yet started) subprocess, as the chart's
    ServiceAccount, with the test's local ports and `--min-poll-interval 1s`."""
    return OperatorProcess(
        installed.kubeconfig,
        installed.namespace,
        workdir,
        tick=0.2,
        args=installed.args,
        extra=extra,
        log_name=log_name or f"operator-{uuid.uuid4().hex[:6]}",
    )


@contextlib.contextmanager
def run_operator(installed: Installed, workdir: Path, *extra: str) -> Iterator[OperatorProcess]:
    """The chart Deployment's command line as a subprocess, as the chart's ServiceAccount.

    The test's flags come after the chart's args (argparse keeps the last value): local ports
    on 127.0.0.1 and `--min-poll-interval 1s`."""
    operator = operator_process(installed, workdir, *extra)
    try:
        operator.start(timeout=60)
        yield operator
    finally:
        operator.stop()


class Cluster:
    """kubectl and JSON helpers over the admin kubeconfig."""

    def __init__(self, k8s: Any, namespace: str) -> None:
        self.k8s, self.namespace = k8s, namespace

    def apply(self, manifest: str) -> None:
        subprocess.run(
            [
                str(self.k8s.tools.kubectl),
                f"--kubeconfig={self.k8s.kubeconfig}",
                "-n",
                self.namespace,
                "apply",
                "-f",
                "-",
            ],
            input=manifest,
            text=True,
            check=True,
            capture_output=True,
            timeout=60,
        )

    def get(self, *args: str) -> dict[str, Any]:
        out = self.k8s.kubectl("-n", self.namespace, "get", "-o", "json", *args).stdout
        return json.loads(out)

    def policy(self, name: str) -> dict[str, Any]:
        return self.get("consumergrouppolicies.kafka-rebalance.io", name)

    def configmaps(self, policy: str) -> dict[str, dict[str, Any]]:
        items = self.get("configmaps", "-l", f"kafka-rebalance.io/policy={policy}")["items"]
        return {item["metadata"]["name"]: item for item in items}

    def assignments(self, policy: str) -> dict[str, dict[str, Any]]:
        return {
            json.loads(cm["data"]["assignment.json"])["member"]: json.loads(
                cm["data"]["assignment.json"]
            )
            for cm in self.configmaps(policy).values()
        }

    def patch_policy(self, name: str, patch: dict[str, Any]) -> None:
        self.k8s.kubectl(
            "-n",
            self.namespace,
            "patch",
            "consumergrouppolicies.kafka-rebalance.io",
            name,
            "--type=merge",
            "-p",
            json.dumps(patch),
        )


def condition(policy: dict[str, Any], kind: str) -> dict[str, Any]:
    for entry in (policy.get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            return entry
    return {}


def policy_manifest(
    name: str,
    group: str,
    bootstrap: str,
    topic: str,
    app: str,
    *,
    apply: dict[str, Any] | None = None,
    **rebalance: Any,
) -> str:
    body = {
        "apiVersion": "kafka-rebalance.io/v1alpha1",
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": name},
        "spec": {
            "groupId": group,
            "kafka": {"bootstrapServers": bootstrap},
            "topics": [topic],
            "members": {"selector": {"matchLabels": {"app": app}}},
            "strategy": "lag-aware",
            "load": {"model": "lag"},
            "rebalance": {
                "mode": "enforce",
                "pollInterval": "1s",
                "cooldown": "0s",
                "minImprovement": 0.05,
                **rebalance,
            },
        },
    }
    if apply is not None:
        body["spec"]["apply"] = apply
    return json.dumps(body)


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    for partition, count in per_partition.items():
        for _ in range(count):
            producer.send(topic, value=b"x", partition=partition)
    producer.flush(60)
    producer.close()


def max_load_ratio(assignment: dict[str, dict[str, Any]], lag: dict[int, int], topic: str) -> float:
    """The plan-quality figure, computed independently of the operator (weights all 1)."""
    loads = [sum(lag[p] for p in doc["partitions"].get(topic, [])) for doc in assignment.values()]
    bound = max(sum(lag.values()) / len(loads), max(lag.values()))
    return max(loads) / bound


@dataclass
class GroupEnv:
    cluster: Cluster
    installed: Installed
    topic: str
    app: str
    bootstrap: str
    workdir: Path


def make_env(
    k8s: Any, kafka: str, tmp_path: Path, prefix: str, replicas: int, partitions: int
) -> GroupEnv:
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    installed = helm_install(k8s, namespace, tmp_path / "helm")
    cluster = Cluster(k8s, namespace)
    app = "consumer"
    cluster.apply(pause_statefulset(app, replicas, cpu_request="100m"))
    k8s.kubectl(
        "-n", namespace, "rollout", "status", f"statefulset/{app}", "--timeout=120s", timeout=150
    )
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    return GroupEnv(cluster, installed, topic, app, kafka, tmp_path)


def test_enforce_lifecycle(k8s: Any, kafka: str, tmp_path: Path) -> None:
    """One group through its life: first plan, quiet polls, restart, skew, scale-down, Kafka
    unreachable, a spec change, deletion. Each step is a function below, in this order; they
    share the group, so they run as one test."""
    env = make_env(k8s, kafka, tmp_path, "enforce", replicas=3, partitions=6)
    telemetry = tmp_path / "telemetry.jsonl"
    name = "orders"
    with (
        run_operator(env.installed, tmp_path, "--telemetry-file", str(telemetry)) as operator,
        diagnostics(env.cluster, name, operator),
    ):
        first = _step_first_plan_one_configmap_per_pod(env, name)
        versions = _step_an_unchanged_group_writes_nothing(env, name, operator)
        _step_metrics_and_liveness(env, name, operator)
    with (
        run_operator(env.installed, tmp_path, "--telemetry-file", str(telemetry)) as operator,
        diagnostics(env.cluster, name, operator),
    ):
        _step_a_restarted_operator_rewrites_nothing(env, name, operator, versions)
        epoch = _step_skewed_lag_replans(env, name, operator, first, telemetry)
        _step_a_removed_pod_is_replanned(k8s, env, name, epoch)
        _step_kafka_unreachable_stalls_without_a_plan_change(env, name, epoch + 1)
        _step_a_spec_change_reaches_the_configmaps(env, name)
        _step_deletion_removes_the_configmaps(k8s, env, name)
    log = operator.log.read_text()
    assert "Traceback" not in log, log[-3000:]


def _step_first_plan_one_configmap_per_pod(env: GroupEnv, name: str) -> dict[str, Any]:
    """A valid plan, one ConfigMap per pod, owned by the policy; status Ready at epoch 1."""
    cluster, topic = env.cluster, env.topic
    started = time.monotonic()
    cluster.apply(policy_manifest(name, f"group-{topic}", env.bootstrap, topic, env.app))
    first = wait_for(
        "one ConfigMap per pod",
        lambda: len(cluster.assignments(name)) == 3 and cluster.assignments(name),
    )
    latency = time.monotonic() - started
    print(f"\nreconcile latency policy apply -> 3 ConfigMaps: {latency:.2f}s")
    policy = cluster.policy(name)
    assert set(first) == {f"{env.app}-{i}" for i in range(3)}
    owned = sorted(p for doc in first.values() for p in doc["partitions"].get(topic, []))
    assert owned == list(range(6))
    assert {doc["epoch"] for doc in first.values()} == {1}
    assert len({doc["planHash"] for doc in first.values()}) == 1
    for cm in cluster.configmaps(name).values():
        (owner,) = cm["metadata"]["ownerReferences"]
        assert owner["uid"] == policy["metadata"]["uid"] and owner["kind"] == "ConsumerGroupPolicy"
        assert (
            cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kafka-rebalance-operator"
        )
    status = wait_for(
        "status",
        lambda: (
            cluster.policy(name).get("status", {}).get("members") == 3
            and cluster.policy(name)["status"]
        ),
    )
    assert status["epoch"] == 1 and status["observedGeneration"] == policy["metadata"]["generation"]
    assert condition(cluster.policy(name), "Ready")["status"] == "True"
    assert condition(cluster.policy(name), "Stalled")["status"] == "False"
    return dict(first)


def _step_an_unchanged_group_writes_nothing(
    env: GroupEnv, name: str, operator: OperatorProcess
) -> dict[str, str]:
    """Ten polls of an unchanged group write nothing; returns the ConfigMaps' versions."""
    cluster = env.cluster
    versions = {n: cm["metadata"]["resourceVersion"] for n, cm in cluster.configmaps(name).items()}
    polls_before = _poll_count(operator)
    wait_for("ten more polls", lambda: _poll_count(operator) >= polls_before + 10, timeout=60)
    after = {n: cm["metadata"]["resourceVersion"] for n, cm in cluster.configmaps(name).items()}
    assert after == versions
    assert cluster.policy(name)["status"]["epoch"] == 1
    return versions


def _step_metrics_and_liveness(env: GroupEnv, name: str, operator: OperatorProcess) -> None:
    """The plan epoch and per-partition lag (no lag-state label; states counted per policy) are
    exported; the liveness check answers alive."""
    code, text = http_get(operator.metrics_port, "/metrics")
    assert code == 200
    labels = f'group="group-{env.topic}",namespace="{env.cluster.namespace}",policy="{name}"'
    assert f"kafka_rebalance_plan_epoch{{{labels}}} 1.0" in text
    assert (
        "kafka_rebalance_partition_lag{" in text
        and "kafka_rebalance_poll_duration_seconds_bucket" in text
    )
    samples = [
        sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("policy") == name
    ]
    lag_labels = [s.labels for s in samples if s.name == "kafka_rebalance_partition_lag"]
    assert lag_labels and all("state" not in labels for labels in lag_labels)
    assert {s.labels["state"] for s in samples if s.name == "kafka_rebalance_partitions"}
    code, body = http_get(operator.health_port, "/healthz")
    assert code == 200 and json.loads(body)["alive"] is True


def _step_a_restarted_operator_rewrites_nothing(
    env: GroupEnv, name: str, operator: OperatorProcess, versions: dict[str, str]
) -> None:
    cluster = env.cluster
    wait_for("polls after restart", lambda: _poll_count(operator) >= 5, timeout=60)
    after = {n: cm["metadata"]["resourceVersion"] for n, cm in cluster.configmaps(name).items()}
    assert after == versions
    assert cluster.policy(name)["status"]["epoch"] == 1


def _step_skewed_lag_replans(
    env: GroupEnv,
    name: str,
    operator: OperatorProcess,
    first: dict[str, Any],
    telemetry: Path,
) -> int:
    """Skewed lag: lag-aware replans and maxLoadRatio drops; the telemetry file has the plan and
    partition rows. Returns the new epoch."""
    cluster, topic = env.cluster, env.topic
    heavy = first[f"{env.app}-0"]["partitions"][topic]
    skew = {p: (3000 if p in heavy else 10) for p in range(6)}
    produce(env.bootstrap, topic, skew)
    before_ratio = max_load_ratio(first, skew, topic)
    wait_for(
        "a lag-aware replan",
        lambda: cluster.policy(name)["status"]["epoch"] >= 2 and cluster.assignments(name),
        timeout=60,
    )
    _settle(cluster, name, operator)
    replanned = cluster.assignments(name)
    after_ratio = max_load_ratio(replanned, skew, topic)
    status = cluster.policy(name)["status"]
    print(f"maxLoadRatio {before_ratio:.3f} -> {after_ratio:.3f} ({status['maxLoadRatio']})")
    assert after_ratio < before_ratio
    assert status["maxLoadRatio"] == pytest.approx(after_ratio, rel=0.01)
    assert {doc["epoch"] for doc in replanned.values()} == {status["epoch"]}
    rows = [json.loads(line) for line in telemetry.read_text().splitlines()]
    plan_rows = [r for r in rows if r.get("kind") == "plan"]
    assert plan_rows[-1]["epoch"] == status["epoch"]
    assert plan_rows[-1]["max_load_ratio_after"] < plan_rows[-1]["max_load_ratio_before"]
    partition_rows = [r for r in rows if r.get("kind") is None and r["topic"] == topic]
    # a fresh broker may answer the first polls without a group coordinator (unknown)
    assert {r["lag_state"] for r in partition_rows} <= {"uninitialized", "unknown"}
    last = [r for r in partition_rows if r["ts_ms"] == partition_rows[-1]["ts_ms"]]
    assert {r["lag_state"] for r in last} == {"uninitialized"}
    assert set(partition_rows[-1]) >= {
        "ts_ms",
        "cluster",
        "namespace",
        "policy",
        "group",
        "partition",
        "log_start",
        "log_end",
        "committed",
        "lag",
        "time_lag_s",
        "owner",
        "epoch",
    }
    return int(status["epoch"])


def _step_a_removed_pod_is_replanned(k8s: Any, env: GroupEnv, name: str, epoch: int) -> None:
    """A pod removed from the group gets its partitions re-planned, at the next epoch."""
    cluster, topic = env.cluster, env.topic
    k8s.kubectl("-n", cluster.namespace, "scale", f"statefulset/{env.app}", "--replicas=2")
    shrunk = wait_for(
        "the plan without the removed pod",
        lambda: (
            set(cluster.assignments(name)) == {f"{env.app}-0", f"{env.app}-1"}
            and cluster.assignments(name)
        ),
        timeout=90,
    )
    assert sorted(p for d in shrunk.values() for p in d["partitions"].get(topic, [])) == list(
        range(6)
    )
    assert {d["epoch"] for d in shrunk.values()} == {epoch + 1}


def _step_kafka_unreachable_stalls_without_a_plan_change(
    env: GroupEnv, name: str, epoch: int
) -> None:
    """Kafka unreachable: Stalled with a reason, no plan change; Ready again once it is back."""
    cluster = env.cluster
    wait_for("status epoch", lambda: cluster.policy(name)["status"]["epoch"] == epoch)
    versions = {n: cm["metadata"]["resourceVersion"] for n, cm in cluster.configmaps(name).items()}
    cluster.patch_policy(
        name, {"spec": {"kafka": {"bootstrapServers": f"127.0.0.1:{free_port()}"}}}
    )
    stalled = wait_for(
        "Stalled=True",
        lambda: (
            condition(cluster.policy(name), "Stalled").get("status") == "True"
            and condition(cluster.policy(name), "Stalled")
        ),
        timeout=60,
    )
    assert stalled["reason"] == "KafkaUnreachable" and "cannot reach" in stalled["message"]
    assert condition(cluster.policy(name), "Ready")["status"] == "False"
    time.sleep(3)
    after = {n: cm["metadata"]["resourceVersion"] for n, cm in cluster.configmaps(name).items()}
    assert after == versions
    assert cluster.policy(name)["status"]["epoch"] == epoch
    cluster.patch_policy(name, {"spec": {"kafka": {"bootstrapServers": env.bootstrap}}})
    wait_for(
        "Ready again", lambda: condition(cluster.policy(name), "Ready").get("status") == "True"
    )


def _step_a_spec_change_reaches_the_configmaps(env: GroupEnv, name: str) -> None:
    """A policy change reaches the ConfigMaps at the next tick (latency measured)."""
    cluster, topic = env.cluster, env.topic
    epoch = cluster.policy(name)["status"]["epoch"]
    started = time.monotonic()
    cluster.patch_policy(name, {"spec": {"strategy": "range"}})
    ranged = wait_for(
        "the range plan",
        lambda: (
            {d["epoch"] for d in cluster.assignments(name).values()} == {epoch + 1}
            and cluster.assignments(name)
        ),
    )
    print(f"reconcile latency spec change -> ConfigMaps: {time.monotonic() - started:.2f}s")
    assert ranged[f"{env.app}-0"]["partitions"][topic] == [0, 1, 2]
    assert ranged[f"{env.app}-1"]["partitions"][topic] == [3, 4, 5]


def _step_deletion_removes_the_configmaps(k8s: Any, env: GroupEnv, name: str) -> None:
    """Deleting the policy removes its ConfigMaps and leaves no finalizer behind."""
    cluster = env.cluster
    k8s.kubectl(
        "-n",
        cluster.namespace,
        "delete",
        "consumergrouppolicies.kafka-rebalance.io",
        name,
        "--wait=true",
        "--timeout=60s",
        timeout=90,
    )
    wait_for("ConfigMaps garbage-collected", lambda: cluster.configmaps(name) == {}, timeout=90)
    gone = k8s.kubectl(
        "-n",
        cluster.namespace,
        "get",
        "consumergrouppolicies.kafka-rebalance.io",
        name,
        check=False,
    )
    assert gone.returncode != 0 and "NotFound" in gone.stderr


@contextlib.contextmanager
def diagnostics(cluster: Cluster, name: str, operator: OperatorProcess) -> Iterator[None]:
    """On failure, show the policy's status and the operator's log: the evidence needed."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            print("policy status:", json.dumps(cluster.policy(name).get("status"), indent=1))
        with contextlib.suppress(Exception):
            print("operator log tail:\n" + "\n".join(operator.log.read_text().splitlines()[-40:]))
        raise


def _settle(cluster: Cluster, name: str, operator: OperatorProcess, polls: int = 5) -> None:
    """Wait until the epoch stays the same for `polls` polls (production may span polls)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        epoch, count = cluster.policy(name)["status"]["epoch"], _poll_count(operator)
        wait_for("more polls", lambda c=count: _poll_count(operator) >= c + polls)
        if cluster.policy(name)["status"]["epoch"] == epoch:
            return
    raise AssertionError("the plan did not settle")


def _poll_count(operator: OperatorProcess) -> int:
    """Polls so far, from the operator's own histogram (count over all policies)."""
    _, text = http_get(operator.metrics_port, "/metrics")
    total = 0.0
    for line in text.splitlines():
        if line.startswith("kafka_rebalance_poll_duration_seconds_count"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def test_propose_mode_applies_only_the_approved_plan(k8s: Any, kafka: str, tmp_path: Path) -> None:
    """propose mode: nothing is applied before approval; the proposal on offer (and its hash)
    survives an operator restart even when lag has changed meanwhile; the approved hash
    applies."""
    env = make_env(k8s, kafka, tmp_path, "propose", replicas=2, partitions=4)
    cluster, name = env.cluster, "proposed"
    with (
        run_operator(env.installed, tmp_path) as operator,
        diagnostics(cluster, name, operator),
    ):
        cluster.apply(
            policy_manifest(name, f"group-{env.topic}", kafka, env.topic, env.app, mode="propose")
        )
        proposal = wait_for(
            "a proposal", lambda: cluster.policy(name).get("status", {}).get("proposal"), timeout=60
        )
        assert proposal["moves"] == 0 and proposal["epoch"] == 1 and proposal["hash"]
        ready = condition(cluster.policy(name), "Ready")
        assert ready["reason"] == "AwaitingApproval"
        polls = _poll_count(operator)
        wait_for("five more polls", lambda: _poll_count(operator) >= polls + 5)
        assert cluster.configmaps(name) == {}, "nothing is applied before approval"
        assert cluster.policy(name)["status"]["proposal"]["hash"] == proposal["hash"]

    # lag piles up on the partitions the proposal gives one member (a plan computed afresh
    # would split them), while no operator runs
    offered = json.loads(proposal["assignment"])
    assert set(offered) == {f"{env.app}-0", f"{env.app}-1"}
    produce(kafka, env.topic, dict.fromkeys(offered[f"{env.app}-0"][env.topic], 2000))
    with (
        run_operator(env.installed, tmp_path) as operator,
        diagnostics(cluster, name, operator),
    ):
        wait_for("polls after the restart", lambda: _poll_count(operator) >= 5)
        status = cluster.policy(name)["status"]
        assert status["totalLag"] >= 2000 * len(offered[f"{env.app}-0"][env.topic])
        assert status["proposal"]["hash"] == proposal["hash"], "the same plan is on offer"
        assert cluster.configmaps(name) == {}

        cluster.patch_policy(name, {"spec": {"approvedPlan": proposal["hash"]}})
        applied = wait_for(
            "the approved plan",
            lambda: len(cluster.assignments(name)) == 2 and cluster.assignments(name),
        )
        assert {d["planHash"] for d in applied.values()} == {proposal["hash"]}
        assert {d["epoch"] for d in applied.values()} == {1}
        assert {m: d["partitions"] for m, d in applied.items()} == offered
        status = wait_for(
            "status of the applied plan",
            lambda: (
                (st := cluster.policy(name)["status"]).get("appliedPlan") == proposal["hash"] and st
            ),
        )
        # the skew makes a better plan: it is proposed anew, never applied unapproved
        assert status.get("proposal", {}).get("hash") != proposal["hash"]
        assert status["epoch"] == 1


def test_observe_mode_reports_and_never_writes(k8s: Any, kafka: str, tmp_path: Path) -> None:
    env = make_env(k8s, kafka, tmp_path, "observe", replicas=2, partitions=3)
    cluster, name = env.cluster, "watching"
    produce(kafka, env.topic, {0: 5, 1: 7, 2: 9})
    with (
        run_operator(env.installed, tmp_path) as operator,
        diagnostics(cluster, name, operator),
    ):
        cluster.apply(
            policy_manifest(name, f"group-{env.topic}", kafka, env.topic, env.app, mode="observe")
        )
        status = wait_for(
            "observe status",
            lambda: (
                cluster.policy(name).get("status", {}).get("totalLag") == 21
                and cluster.policy(name)["status"]
            ),
        )
        assert status["members"] == 2
        assert condition(cluster.policy(name), "Ready")["reason"] == "Observing"
        polls = _poll_count(operator)
        wait_for("five more polls", lambda: _poll_count(operator) >= polls + 5)
        assert cluster.configmaps(name) == {}


def _events(cluster: Cluster, name: str, reason: str) -> list[dict[str, Any]]:
    items = cluster.get("events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [e for e in items if e.get("reason") == reason]


def _revoked(assignments: dict[str, dict[str, Any]], topic: str) -> set[tuple[str, int]]:
    return {(m, p) for m, d in assignments.items() for p in d["revoking"].get(topic, [])}


def _epochs(assignments: dict[str, dict[str, Any]]) -> set[int]:
    return {d["epoch"] for d in assignments.values()}


def _owner(assignments: dict[str, dict[str, Any]], topic: str) -> dict[int, str]:
    return {p: m for m, d in assignments.items() for p in d["partitions"].get(topic, [])}


def acknowledge(kafka: str, group: str, topic: str, revoked: set[tuple[str, int]], epoch: int):
    """What an assign-mode sidecar does after giving up a partition: a manual commit (assign(),
    no group membership) with `{member, epoch}` metadata."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=kafka, group_id=group, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for _, p in sorted(revoked)]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        consumer.commit(
            {
                TopicPartition(topic, p): OffsetAndMetadata(
                    ends[TopicPartition(topic, p)],
                    json.dumps({"member": member, "epoch": epoch}),
                    -1,
                )
                for member, p in revoked
            }
        )
    finally:
        consumer.close()


def test_assign_mode_handoff_times_out_safely_and_grants_on_acknowledgement(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    """A revoke nobody acknowledges (no sidecar) goes back to its owner, Stalled/HandoffTimedOut
    with an Event, and is retried after the cooldown; acknowledged by a real commit, it is
    granted."""
    env = make_env(k8s, kafka, tmp_path, "assign", replicas=2, partitions=4)
    cluster, name, topic = env.cluster, "handover", env.topic
    group = f"group-{topic}"
    with (
        run_operator(env.installed, tmp_path) as operator,
        diagnostics(cluster, name, operator),
    ):
        cluster.apply(
            policy_manifest(
                name,
                group,
                kafka,
                topic,
                env.app,
                cooldown="6s",
                apply={"mode": "assign", "handoffTimeout": "4s"},
            )
        )
        first = wait_for(
            "the first plan",
            lambda: len(cluster.assignments(name)) == 2 and cluster.assignments(name),
        )
        original = _owner(first, topic)
        produce(kafka, topic, dict.fromkeys(first[f"{env.app}-0"]["partitions"][topic], 3000))

        # -- the revoke: nobody holds the partitions; nobody acknowledges
        revoke = wait_for(
            "a revoke", lambda: _revoked(a := cluster.assignments(name), topic) and a, timeout=60
        )
        revoked, epoch = _revoked(revoke, topic), revoke[f"{env.app}-0"]["epoch"]
        assert all(original[p] == m for m, p in revoked)
        held = _owner(revoke, topic)
        assert not set(held) & {p for _, p in revoked}

        # -- timed out: back to the old owner in a new epoch, Stalled, an Event
        stalled = wait_for(
            "Stalled/HandoffTimedOut",
            lambda: (
                (c := condition(cluster.policy(name), "Stalled")).get("reason") == "HandoffTimedOut"
                and c["status"] == "True"
                and c
            ),
            timeout=30,
        )
        for member, p in revoked:
            assert f"{member}: {topic}-{p}" in stalled["message"], stalled["message"]
        settled = cluster.assignments(name)
        assert {d["epoch"] for d in settled.values()} == {epoch + 1}
        assert not _revoked(settled, topic)
        assert {p: m for p, m in _owner(settled, topic).items() if (m, p) in revoked} == {
            p: m for m, p in revoked
        }, "an unacknowledged partition goes back to its old owner and nobody else"
        assert sorted(_owner(settled, topic)) == list(range(4))
        wait_for("the HandoffTimedOut event", lambda: _events(cluster, name, "HandoffTimedOut"))
        assert condition(cluster.policy(name), "Ready")["status"] == "False"

        # -- retried after the cooldown: the same move is revoked again
        retry = wait_for(
            "the retry",
            lambda: (
                _revoked(a := cluster.assignments(name), topic)
                and a[f"{env.app}-0"]["epoch"] > epoch + 1
                and a
            ),
            timeout=60,
        )
        # give the test time to acknowledge like a sidecar would (a spec change; the
        # hand-over in flight waits with the new timeout)
        cluster.patch_policy(name, {"spec": {"apply": {"handoffTimeout": "24s"}}})
        revoked, epoch = _revoked(retry, topic), retry[f"{env.app}-0"]["epoch"]
        wait_for(
            "Reconciling/HandingOff",
            lambda: condition(cluster.policy(name), "Reconciling").get("reason") == "HandingOff",
        )
        acknowledge(kafka, group, topic, revoked, epoch)

        # -- acknowledged: granted to the new owner in the next epoch
        granted = wait_for(
            "the grant",
            lambda: _epochs(a := cluster.assignments(name)) == {epoch + 1} and a,
            timeout=60,
        )
        assert not _revoked(granted, topic)
        owners = _owner(granted, topic)
        assert sorted(owners) == list(range(4))
        assert any(owners[p] != m for m, p in revoked), "the acknowledged move happened"
        wait_for("Ready", lambda: condition(cluster.policy(name), "Ready")["status"] == "True")


def test_group_mode_reports_members_on_another_assignor(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    """A plain kafka-python consumer (default range assignor) in the policy's group: the plan
    is written but the policy is Stalled/ProtocolMismatch until that consumer leaves."""
    import threading

    from kafka import KafkaConsumer

    env = make_env(k8s, kafka, tmp_path, "protocol", replicas=2, partitions=3)
    cluster, name, group = env.cluster, "mismatch", f"group-{env.topic}"
    stop = threading.Event()
    joined = threading.Event()

    def consume() -> None:
        consumer = KafkaConsumer(
            env.topic, bootstrap_servers=kafka, group_id=group, client_id="plain-range"
        )
        try:
            while not stop.is_set():
                consumer.poll(timeout_ms=200)
                if consumer.assignment():
                    joined.set()
        finally:
            consumer.close()  # LeaveGroup: the group is empty again

    with (
        run_operator(env.installed, tmp_path) as operator,
        diagnostics(cluster, name, operator),
    ):
        cluster.apply(policy_manifest(name, group, kafka, env.topic, env.app))
        wait_for("the plan", lambda: len(cluster.assignments(name)) == 2)
        wait_for("Ready", lambda: condition(cluster.policy(name), "Ready").get("status") == "True")
        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        try:
            assert joined.wait(60), "the plain consumer never got an assignment"
            stalled = wait_for(
                "Stalled/ProtocolMismatch",
                lambda: (
                    (c := condition(cluster.policy(name), "Stalled")).get("reason")
                    == "ProtocolMismatch"
                    and c
                ),
                timeout=30,
            )
            assert stalled["status"] == "True"
            assert "'range'" in stalled["message"] and "kafka-rebalance-plan" in stalled["message"]
            assert "not followed" in stalled["message"]
            assert condition(cluster.policy(name), "Ready")["status"] == "False"
            assert len(cluster.assignments(name)) == 2, "the plan stays written"
            wait_for(
                "the ProtocolMismatch event", lambda: _events(cluster, name, "ProtocolMismatch")
            )
        finally:
            stop.set()
            thread.join(30)
        wait_for(
            "Ready once the consumer left",
            lambda: condition(cluster.policy(name), "Ready").get("status") == "True",
            timeout=60,
        )


def test_a_failing_policy_never_fails_the_operators_liveness(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    """Broken policies next to a healthy one (a missing Secret, a topicPattern that matches
    nothing yet, a duplicate groupId): each is Stalled with its reason, the healthy one keeps
    polling, and /healthz answers 200 at once throughout five times --liveness-max-age."""
    env = make_env(k8s, kafka, tmp_path, "liveness", replicas=2, partitions=2)
    cluster, group = env.cluster, f"group-{env.topic}"

    def broken(name: str, group_id: str, **spec: Any) -> str:
        body = json.loads(policy_manifest(name, group_id, kafka, env.topic, env.app))
        body["spec"].update(spec)
        if "topicPattern" in spec:
            body["spec"].pop("topics")
        return json.dumps(body)

    with (
        run_operator(env.installed, tmp_path, "--liveness-max-age", "3") as operator,
        diagnostics(cluster, "healthy", operator),
    ):
        cluster.apply(policy_manifest("healthy", group, kafka, env.topic, env.app))
        wait_for(
            "healthy is Ready",
            lambda: condition(cluster.policy("healthy"), "Ready").get("status") == "True",
        )
        cluster.apply(
            broken(
                "no-secret",
                "group-no-secret",
                kafka={"bootstrapServers": kafka, "secretRef": {"name": "absent"}},
            )
        )
        cluster.apply(broken("no-topics", "group-no-topics", topicPattern="not-yet-created-.*"))
        cluster.apply(broken("duplicate", group))
        expected = {
            "no-secret": "SecretNotFound",
            "no-topics": "TopicsNotFound",
            "duplicate": "ConflictingPolicy",
        }
        for name, reason in expected.items():
            wait_for(
                f"{name} Stalled/{reason}",
                lambda n=name, r=reason: condition(cluster.policy(n), "Stalled").get("reason") == r,
            )
        first_poll = cluster.policy("healthy")["status"]["lastPollTime"]
        deadline = time.monotonic() + 15
        answers = 0
        while time.monotonic() < deadline:
            started = time.monotonic()
            code, body = http_get(operator.health_port, "/healthz")
            assert code == 200, body
            assert time.monotonic() - started < 2
            answer = json.loads(body)
            # a policy whose poll waits for a worker thread is listed under "queued"
            assert set(answer["policies"]) | set(answer["queued"]) == {
                f"{cluster.namespace}/{n}" for n in ("healthy", *expected)
            }, answer
            answers += 1
            time.sleep(0.5)
        assert answers >= 20
        healthy = cluster.policy("healthy")["status"]
        assert healthy["lastPollTime"] > first_poll, "the healthy policy keeps polling"
        assert condition(cluster.policy("healthy"), "Ready")["status"] == "True"
        for name, reason in expected.items():
            stalled = condition(cluster.policy(name), "Stalled")
            assert stalled["status"] == "True" and stalled["reason"] == reason


@contextlib.contextmanager
def _refuse_status_writes(k8s: Any, namespace: str) -> Iterator[None]:
    """A ValidatingAdmissionPolicy that refuses every write to policies' /status in
    `namespace` (as a cluster's own admission policy might), removed afterwards."""
    name = f"refuse-status-{namespace}"
    manifest = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": ["kafka-rebalance.io"],
                                "apiVersions": ["*"],
                                "operations": ["UPDATE"],
                                "resources": ["consumergrouppolicies/status"],
                            }
                        ]
                    },
                    "validations": [{"expression": "false", "message": "status is read-only"}],
                },
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": namespace}
                        }
                    },
                },
            },
        ],
    }
    path = Path(k8s.kubeconfig).parent / f"{name}.json"
    path.write_text(json.dumps(manifest))
    k8s.kubectl("apply", "-f", str(path))
    try:
        yield
    finally:
        k8s.kubectl("delete", "-f", str(path), "--ignore-not-found", check=False)


def test_a_failing_status_write_does_not_undo_cooldown(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    """Status writes refused by an admission policy after the first plan, then a spec change
    and a skewed group: the spec change does not turn every poll into a replan that skips the
    cooldown (the operator remembers what it reported and applied), so the epoch stays."""
    env = make_env(k8s, kafka, tmp_path, "safeguard", replicas=2, partitions=4)
    cluster, name, group = env.cluster, "guarded", f"group-{env.topic}"
    with (
        run_operator(env.installed, tmp_path) as operator,
        diagnostics(cluster, name, operator),
    ):
        cluster.apply(policy_manifest(name, group, kafka, env.topic, env.app, cooldown="1h"))
        wait_for("epoch 1 in status", lambda: cluster.policy(name).get("status", {}).get("epoch"))
        first = cluster.assignments(name)
        assert {d["epoch"] for d in first.values()} == {1}
        with _refuse_status_writes(k8s, cluster.namespace):

            def refused() -> bool:
                probe = cluster.k8s.kubectl(
                    "-n",
                    cluster.namespace,
                    "patch",
                    "consumergrouppolicies.kafka-rebalance.io",
                    name,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    json.dumps({"status": {"epoch": 1}}),
                    check=False,
                )
                return probe.returncode != 0 and "read-only" in probe.stderr

            wait_for("status writes refused", refused)
            cluster.patch_policy(name, {"spec": {"rebalance": {"minImprovement": 0.06}}})
            polls = _poll_count(operator)
            wait_for("polls of the new spec", lambda: _poll_count(operator) >= polls + 5)
            for member in sorted(first):
                heavy = first[member]["partitions"][env.topic]
                produce(kafka, env.topic, dict.fromkeys(heavy, 800))
                polls = _poll_count(operator)
                wait_for("more polls", lambda p=polls: _poll_count(operator) >= p + 8)
                epochs = {d["epoch"] for d in cluster.assignments(name).values()}
                assert epochs == {1}, f"replanned inside the cooldown: epochs {epochs}"
            policy = cluster.policy(name)
            assert policy["metadata"]["generation"] == 2
            assert policy["status"]["observedGeneration"] == 1, "status writes were refused"


def test_one_group_on_one_cluster_has_one_policy_across_watched_namespaces(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    """The operator watches two namespaces; a second policy for the same group and cluster in
    the other namespace is Stalled ConflictingPolicy naming the first (namespace/name) while the
    first keeps working; the same groupId on another cluster is no conflict; deleting the first
    frees the second."""
    home = f"conflict-{uuid.uuid4().hex[:6]}"
    other = f"{home}-b"
    installed = helm_install(k8s, home, tmp_path / "helm", also_watch=(other,))
    first, second = Cluster(k8s, home), Cluster(k8s, other)
    for cluster in (first, second):
        cluster.apply(pause_statefulset("consumer", 1, cpu_request="100m"))
    topic = f"conflict-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    group = f"group-{topic}"
    elsewhere = "127.0.0.1:1"  # another cluster as far as the operator can tell
    with run_operator(installed, tmp_path) as operator, diagnostics(first, "orders", operator):
        first.apply(policy_manifest("orders", group, kafka, topic, "consumer"))
        wait_for(
            "the first policy Ready",
            lambda: condition(first.policy("orders"), "Ready").get("status") == "True",
        )
        second.apply(policy_manifest("orders-copy", group, kafka, topic, "consumer"))
        second.apply(policy_manifest("orders-elsewhere", group, elsewhere, topic, "consumer"))
        stalled = wait_for(
            "the copy Stalled ConflictingPolicy",
            lambda: (
                (c := condition(second.policy("orders-copy"), "Stalled")).get("reason")
                == "ConflictingPolicy"
                and c
            ),
        )
        assert f"{home}/orders" in stalled["message"]
        wait_for(
            "the other cluster's policy polled",
            lambda: (
                condition(second.policy("orders-elsewhere"), "Stalled").get("reason")
                not in (None, "ConflictingPolicy")
            ),
        )
        assert condition(first.policy("orders"), "Ready")["status"] == "True"
        first.k8s.kubectl(
            "-n", home, "delete", "consumergrouppolicies.kafka-rebalance.io", "orders"
        )
        wait_for(
            "the copy no longer conflicting",
            lambda: (
                condition(second.policy("orders-copy"), "Stalled").get("reason")
                != "ConflictingPolicy"
            ),
        )


def test_configmaps_the_policy_does_not_own_are_never_overwritten(
    k8s: Any, kafka: str, tmp_path: Path
) -> None:
    """A user's own ConfigMap with the name a member's document would get: the operator refuses
    to write over it (Stalled ConfigMapConflict naming the object) and it keeps its content and
    owner. Policies `orders` (pod `eu-orders-0`) and `orders-eu` (pod `orders-0`), whose
    ConfigMaps collided under the old `<policy>-<pod>` names, each get their own and are Ready."""
    namespace = f"foreign-{uuid.uuid4().hex[:6]}"
    installed = helm_install(k8s, namespace, tmp_path / "helm")
    cluster = Cluster(k8s, namespace)
    cluster.apply(pause_statefulset("eu-orders", 1, cpu_request="100m"))
    cluster.apply(pause_statefulset("orders", 1, cpu_request="100m"))
    cluster.apply(pause_statefulset("users", 1, cpu_request="100m"))
    for app in ("eu-orders", "orders", "users"):
        rollout = f"statefulset/{app}"
        k8s.kubectl("-n", namespace, "rollout", "status", rollout, "--timeout=120s", timeout=150)
    topic = f"foreign-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=kafka)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    own = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine.users-0"}}
    cluster.apply(json.dumps({**own, "data": {"settings.ini": "keep me"}}))

    def configmap(name: str) -> dict[str, Any]:
        return cluster.get("configmap", name)

    def stalled(policy: str) -> dict[str, Any]:
        entry = condition(cluster.policy(policy), "Stalled")
        return entry if entry.get("reason") == "ConfigMapConflict" else {}

    with run_operator(installed, tmp_path) as operator, diagnostics(cluster, "orders", operator):
        cluster.apply(policy_manifest("orders", f"g1-{topic}", kafka, topic, "eu-orders"))
        cluster.apply(policy_manifest("orders-eu", f"g2-{topic}", kafka, topic, "orders"))
        cluster.apply(policy_manifest("mine", f"g3-{topic}", kafka, topic, "users"))
        entry = wait_for("mine Stalled ConfigMapConflict", lambda: stalled("mine"))
        assert f"{namespace}/mine.users-0" in entry["message"], entry
        assert configmap("mine.users-0")["data"] == {"settings.ini": "keep me"}
        assert not configmap("mine.users-0")["metadata"].get("ownerReferences")
        for policy, name in (("orders", "orders.eu-orders-0"), ("orders-eu", "orders-eu.orders-0")):
            wait_for(f"{policy}'s ConfigMap", lambda p=policy: cluster.assignments(p))
            owners = configmap(name)["metadata"]["ownerReferences"]
            assert [o["name"] for o in owners] == [policy]
            wait_for(
                f"{policy} Ready",
                lambda p=policy: condition(cluster.policy(p), "Ready")["status"] == "True",
            )
