"""`kubectl cgp` through the real kubectl (plugin discovery on $PATH) and a real kube-apiserver.

The policies' status is written through the status subresource with the operator's own
builders (conditions, proposal encoding, plan hash, assignment ConfigMaps), so the plugin reads
the shapes the operator writes; `approve` is checked by what the API server then stores.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.devenv.kube_api import write_kubeconfig
from kafka_rebalance_operator import conditions, planning
from kafka_rebalance_operator.conditions import Health
from kafka_rebalance_operator.kube import assignment_doc

from tests.integration.harnesses import kubectl_cgp

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "consumergrouppolicies.yaml"
GROUP, VERSION, PLURAL = "kafka-rebalance.io", "v1alpha1", "consumergrouppolicies"
NOW = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def crd(k8s: Any) -> None:
    k8s.kubectl("apply", "--server-side", "-f", str(CRD))
    k8s.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{PLURAL}.{GROUP}")


@pytest.fixture
def namespace(k8s: Any, crd: None) -> str:
    name = f"cgp-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", name)
    return name


def create_policy(k8s: Any, namespace: str, name: str, **metadata: Any) -> dict[str, Any]:
    from kubernetes import client

    api = k8s.api_client()
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": name, **metadata},
        "spec": {
            "groupId": f"group-{name}",
            "kafka": {"bootstrapServers": "kafka:9092"},
            "topics": ["orders"],
            "members": {"selector": {"matchLabels": {"app": name}}},
            "rebalance": {"mode": "enforce", "approval": "Manual"},
        },
    }
    try:
        return client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body
        )
    finally:
        api.close()


def write_status(k8s: Any, namespace: str, name: str, status: dict[str, Any]) -> None:
    from kubernetes import client

    api = k8s.api_client()
    try:
        client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, {"status": status}
        )
    finally:
        api.close()


def write_configmaps(
    k8s: Any, namespace: str, policy: dict[str, Any], applied: dict[str, Any], epoch: int
) -> None:
    from kubernetes import client

    name, uid = policy["metadata"]["name"], policy["metadata"]["uid"]
    documents = assignment_doc.render_documents(
        policy["spec"]["groupId"], applied, epoch, planning.plan_hash(applied), NOW
    )
    api = k8s.api_client()
    try:
        core = client.CoreV1Api(api)
        for document in documents.values():
            core.create_namespaced_config_map(
                namespace, assignment_doc.configmap_body(name, uid, namespace, document)
            )
    finally:
        api.close()


APPLIED = {"app-0": {"orders": [0, 1, 2]}, "app-1": {"orders": [3]}}
PROPOSED = {"app-0": {"orders": [0, 1]}, "app-1": {"orders": [2, 3]}}


def waiting_policy(k8s: Any, namespace: str, name: str, **metadata: Any) -> str:
    """A policy with an applied plan (epoch 3) and a proposal moving orders-2; its hash."""
    policy = create_policy(k8s, namespace, name, **metadata)
    write_configmaps(k8s, namespace, policy, APPLIED, epoch=3)
    proposal_hash = planning.plan_hash(PROPOSED)
    health = Health(True, "AwaitingApproval", f"plan {proposal_hash} waits for approval")
    write_status(
        k8s,
        namespace,
        name,
        {
            "observedGeneration": policy["metadata"]["generation"],
            "epoch": 3,
            "members": 2,
            "totalLag": 1200,
            "maxLoadRatio": 1.5,
            "appliedPlan": planning.plan_hash(APPLIED),
            "conditions": conditions.build(health, None, policy["metadata"]["generation"], NOW),
            "proposal": {
                "hash": proposal_hash,
                "moves": 1,
                "before": 1.5,
                "after": 1.0,
                "generatedAt": NOW,
                "epoch": 4,
                "assignment": planning.encode_assignment(PROPOSED),
            },
        },
    )
    return proposal_hash


def test_status_lists_every_policy_with_the_reason_it_is_not_ready(
    k8s: Any, namespace: str
) -> None:
    waiting_policy(k8s, namespace, "waiting")
    create_policy(k8s, namespace, "broken")
    write_status(
        k8s,
        namespace,
        "broken",
        {
            "observedGeneration": 1,
            "epoch": 7,
            "totalLag": 42,
            "conditions": conditions.build(
                Health(False, "KafkaUnreachable", "no broker answered", stalled=True), None, 1, NOW
            ),
        },
    )
    create_policy(k8s, namespace, "fresh")  # never polled: no status at all

    result = kubectl_cgp(k8s, namespace, "status", "-o", "json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert set(rows) == {"waiting", "broken", "fresh"}
    assert rows["waiting"] | {"proposal": None} == {
        "namespace": namespace,
        "name": "waiting",
        "group": "group-waiting",
        "members": 2,
        "lag": 1200,
        "imbalance": 1.5,
        "epoch": 3,
        "ready": "True",
        "reason": "",
        "message": "",
        "proposal": None,
    }
    assert rows["broken"]["ready"] == "False"
    assert (rows["broken"]["reason"], rows["broken"]["epoch"]) == ("KafkaUnreachable", 7)
    assert rows["broken"]["message"] == "no broker answered"
    assert (rows["fresh"]["ready"], rows["fresh"]["reason"]) == ("Unknown", "NotObserved")

    table = kubectl_cgp(k8s, namespace, "status")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "NAMESPACE", "NAME", "GROUP", "MEMBERS", "LAG", "IMBALANCE", "EPOCH", "READY",
        "REASON", "PROPOSAL", "AGE",
    ]  # fmt: skip
    broken = next(line for line in lines if " broken " in line).split()
    assert broken[1:] == [
        "broken",
        "group-broken",
        "-",
        "42",
        "-",
        "7",
        "False",
        "KafkaUnreachable",
        broken[-1],
    ]
    assert re.fullmatch(r"\d+s", broken[-1]), broken  # created seconds ago, as kubectl shows it


def test_status_of_one_policy_and_the_yaml_and_name_outputs(k8s: Any, namespace: str) -> None:
    import yaml

    proposal_hash = waiting_policy(k8s, namespace, "waiting")
    create_policy(k8s, namespace, "fresh")

    one = kubectl_cgp(k8s, namespace, "status", "waiting")
    assert one.returncode == 0, one.stderr
    lines = one.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert lines[1].split()[1:3] == ["waiting", "group-waiting"]
    assert len([line for line in lines if " waiting " in line]) == 1  # not "fresh"
    conditions_header = lines.index(next(line for line in lines if line.startswith("TYPE")))
    by_type = {line.split()[0]: line.split() for line in lines[conditions_header + 1 :]}
    assert set(by_type) == {"Ready", "Reconciling", "Stalled"}
    assert by_type["Ready"][1:3] == ["True", "AwaitingApproval"]

    as_yaml = kubectl_cgp(k8s, namespace, "status", "waiting", "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    data = yaml.safe_load(as_yaml.stdout)
    assert (data["name"], data["proposal"], data["epoch"]) == ("waiting", proposal_hash, 3)
    assert {c["type"] for c in data["conditions"]} == {"Ready", "Reconciling", "Stalled"}

    listed = yaml.safe_load(kubectl_cgp(k8s, namespace, "status", "-o", "yaml").stdout)
    assert sorted(row["name"] for row in listed) == ["fresh", "waiting"]
    names = kubectl_cgp(k8s, namespace, "status", "-o", "name")
    assert names.stdout.splitlines() == [
        "consumergrouppolicy.kafka-rebalance.io/fresh",
        "consumergrouppolicy.kafka-rebalance.io/waiting",
    ]
    # kubectl itself names the resource the same way.
    assert names.stdout == k8s.kubectl("-n", namespace, "get", "cgp", "-o", "name").stdout

    plan = yaml.safe_load(kubectl_cgp(k8s, namespace, "plan", "waiting", "-o", "yaml").stdout)
    assert plan["hash"] == proposal_hash and len(plan["moves"]) == 1

    missing = kubectl_cgp(k8s, namespace, "status", "nope")
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1 and "not found" in missing.stderr


def test_a_first_plan_shows_who_would_get_what(k8s: Any, namespace: str) -> None:
    """propose on a group the operator never planned: no ConfigMaps, so nothing moves; the
    table lists the proposed assignment instead."""
    policy = create_policy(k8s, namespace, "first")
    proposal_hash = planning.plan_hash(PROPOSED)
    write_status(
        k8s,
        namespace,
        "first",
        {
            "observedGeneration": policy["metadata"]["generation"],
            "proposal": {
                "hash": proposal_hash,
                "moves": 0,
                "before": 0.0,
                "after": 1.0,
                "generatedAt": NOW,
                "epoch": 1,
                "assignment": planning.encode_assignment(PROPOSED),
            },
        },
    )
    result = kubectl_cgp(k8s, namespace, "plan", "first")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("MEMBER")))
    assert [line.split() for line in lines[start + 1 : start + 3]] == [
        ["app-0", "orders", "0,1"],
        ["app-1", "orders", "2,3"],
    ]


def test_plan_shows_the_moves_the_planner_computes(k8s: Any, namespace: str) -> None:
    proposal_hash = waiting_policy(k8s, namespace, "waiting")
    result = kubectl_cgp(k8s, namespace, "plan", "waiting", "-o", "json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["hash"] == proposal_hash
    assert shown["moves"] == [{"topic": "orders", "partition": 2, "from": "app-0", "to": "app-1"}]
    table = kubectl_cgp(k8s, namespace, "plan", "waiting")
    assert table.returncode == 0, table.stderr
    assert "1 partitions move, imbalance 1.500 -> 1.000" in table.stdout
    assert ["orders", "2", "app-0", "app-1"] in [line.split() for line in table.stdout.splitlines()]

    create_policy(k8s, namespace, "idle")
    missing = kubectl_cgp(k8s, namespace, "plan", "idle")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "kubectl cgp plan: policy idle has no proposal waiting for approval"
    )


def test_approve_sets_the_hash_and_prints_the_git_patch_for_gitops_objects(
    k8s: Any, namespace: str
) -> None:
    proposal_hash = waiting_policy(k8s, namespace, "plain")
    stale = kubectl_cgp(k8s, namespace, "approve", "plain", "--expect", "0" * 20)
    assert stale.returncode == 1 and "the plan changed" in stale.stderr
    result = kubectl_cgp(k8s, namespace, "approve", "plain", "--expect", proposal_hash)
    assert result.returncode == 0, result.stderr
    assert "Git" not in result.stdout
    stored = json.loads(
        k8s.kubectl(
            "-n", namespace, "get", f"{PLURAL}.{GROUP}", "plain", "-o", "json",
            "--show-managed-fields",
        ).stdout
    )  # fmt: skip
    assert stored["spec"]["approvedPlan"] == proposal_hash
    managers = {entry["manager"] for entry in stored["metadata"]["managedFields"]}
    assert "kubectl-cgp" in managers

    gitops_hash = waiting_policy(
        k8s,
        namespace,
        "synced",
        annotations={"argocd.argoproj.io/tracking-id": "team:kafka-rebalance.io/X:ns/synced"},
    )
    result = kubectl_cgp(k8s, namespace, "approve", "synced")
    assert result.returncode == 0, result.stderr
    assert "managed by Argo CD: commit the same change to Git" in result.stdout
    assert result.stdout.rstrip().endswith(f'spec:\n  approvedPlan: "{gitops_hash}"')
    stored = json.loads(
        k8s.kubectl("-n", namespace, "get", f"{PLURAL}.{GROUP}", "synced", "-o", "json").stdout
    )
    assert stored["spec"]["approvedPlan"] == gitops_hash


def _one_line_failure(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip()


def test_an_unreachable_api_server_is_one_line(k8s: Any, namespace: str, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write_kubeconfig(
        tmp_path / "down.kubeconfig", f"https://127.0.0.1:{port}", k8s.ca, user="u", token="t"
    )
    result = kubectl_cgp(k8s, namespace, "status", "--kubeconfig", str(config))
    assert _one_line_failure(result) == (
        f"kubectl cgp status: cannot reach the API server at https://127.0.0.1:{port}: "
        "connection refused (is the cluster up?)"
    )


def test_forbidden_and_not_found_are_one_line(k8s: Any, namespace: str, tmp_path: Path) -> None:
    """A real ServiceAccount with no grant: the API server's 403, then the plugin's line."""
    k8s.kubectl("-n", namespace, "create", "serviceaccount", "nobody")
    token = k8s.kubectl("-n", namespace, "create", "token", "nobody").stdout.strip()
    account = f"system:serviceaccount:{namespace}:nobody"
    config = write_kubeconfig(
        tmp_path / "nobody.kubeconfig", k8s.server, k8s.ca, user=account, token=token
    )
    listed = kubectl_cgp(k8s, namespace, "status", "--kubeconfig", str(config))
    assert _one_line_failure(listed).startswith(
        f"kubectl cgp status: forbidden: {account} may not list "
        f"consumergrouppolicies.kafka-rebalance.io in namespace {namespace} ("
    )
    approve = kubectl_cgp(k8s, namespace, "approve", "orders", "--kubeconfig", str(config))
    assert f"may not get consumergrouppolicies.kafka-rebalance.io in namespace {namespace}" in (
        _one_line_failure(approve)
    )
    missing = kubectl_cgp(k8s, namespace, "plan", "nope")
    assert _one_line_failure(missing) == f"kubectl cgp plan: policy {namespace}/nope not found"


def test_get_with_a_selector_and_all_namespaces(k8s: Any, namespace: str) -> None:
    """`get` is `status`; `-l` is filtered by the API server, `-A` spans namespaces."""
    other = f"cgp-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", other)
    create_policy(k8s, namespace, "blue", labels={"team": "blue"})
    create_policy(k8s, namespace, "red", labels={"team": "red"})
    create_policy(k8s, other, "blue2", labels={"team": "blue"})

    here = kubectl_cgp(k8s, namespace, "get", "-l", "team=blue", "-o", "name")
    assert here.returncode == 0, here.stderr
    assert here.stdout.splitlines() == ["consumergrouppolicy.kafka-rebalance.io/blue"]
    everywhere = kubectl_cgp(k8s, namespace, "get", "-A", "-l", "team=blue", "-o", "json")
    assert everywhere.returncode == 0, everywhere.stderr
    found = {(row["namespace"], row["name"]) for row in json.loads(everywhere.stdout)}
    assert {(namespace, "blue"), (other, "blue2")} <= found
    assert all(name != "red" for _, name in found)
    bad = kubectl_cgp(k8s, namespace, "get", "-l", "team in (", "-o", "name")
    assert _one_line_failure(bad).startswith("kubectl cgp get: HTTP 400: ")


def _read_policy(k8s: Any, namespace: str, name: str) -> dict[str, Any]:
    return json.loads(k8s.kubectl("-n", namespace, "get", "cgp", name, "-o", "json").stdout)


def test_approve_wait_returns_when_the_operator_applies_the_plan(k8s: Any, namespace: str) -> None:
    """A stand-in for the operator: once spec.approvedPlan names the proposal, it writes
    status.appliedPlan (and the next epoch) as the operator does after applying."""
    proposal_hash = waiting_policy(k8s, namespace, "orders")
    stop = threading.Event()

    def operator() -> None:
        while not stop.wait(0.3):
            policy = _read_policy(k8s, namespace, "orders")
            if policy["spec"].get("approvedPlan") == proposal_hash:
                time.sleep(1.5)  # applied a moment later, so --wait really waits
                write_status(k8s, namespace, "orders", {"appliedPlan": proposal_hash, "epoch": 4})
                return

    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    try:
        result = kubectl_cgp(k8s, namespace, "approve", "orders", "--wait", "--timeout", "60s")
    finally:
        stop.set()
        thread.join(10)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"{namespace}/orders: plan {proposal_hash} applied (epoch 4)"
    )


def test_approve_wait_times_out_in_one_line(k8s: Any, namespace: str) -> None:
    proposal_hash = waiting_policy(k8s, namespace, "orders")
    bad = kubectl_cgp(k8s, namespace, "approve", "orders", "--wait", "--timeout", "soon")
    assert _one_line_failure(bad).startswith("kubectl cgp approve: --timeout: not a duration")
    assert "approvedPlan" not in _read_policy(k8s, namespace, "orders")["spec"]

    started = time.monotonic()
    result = kubectl_cgp(k8s, namespace, "approve", "orders", "--wait", "--timeout", "2s")
    assert time.monotonic() - started >= 2
    assert _one_line_failure(result) == (
        f"kubectl cgp approve: policy {namespace}/orders: plan {proposal_hash} not applied "
        f"within 2s (status.appliedPlan is {planning.plan_hash(APPLIED)}; "
        "Ready=True AwaitingApproval)"
    )
    assert _read_policy(k8s, namespace, "orders")["spec"]["approvedPlan"] == proposal_hash


def _watcher(k8s: Any, namespace: str, *args: str) -> subprocess.Popen[str]:
    """`kubectl cgp get -w ARGS` running; kubectl execs the plugin, so this process is
    kubectl-cgp itself and gets the SIGINT."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(k8s.kubeconfig),
    }
    return subprocess.Popen(
        [str(k8s.tools.kubectl), "cgp", "get", *args, "-w", "-n", namespace],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )


def _interruptible() -> None:
    """preexec hook: SIGINT as a terminal delivers it. A run started in the background of a
    non-interactive shell (`cmd &`) ignores SIGINT, its children inherit that, and Python then
    leaves Ctrl-C ignored, so the watcher would never see the interrupt this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted(watcher: subprocess.Popen[str]) -> str:
    """Interrupt the watcher and return its stderr; one that outlives the interrupt by a minute
    is killed (not left behind) and fails the test."""
    watcher.send_signal(signal.SIGINT)
    try:
        return watcher.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.communicate()
        raise


def test_get_watch_prints_a_row_per_change_until_interrupted(k8s: Any, namespace: str) -> None:
    create_policy(k8s, namespace, "first")
    watcher = _watcher(k8s, namespace)
    # A row that never comes must fail the test, not hang it: interrupt the watcher then.
    guard = threading.Timer(120, watcher.send_signal, args=(signal.SIGINT,))
    guard.start()
    try:
        assert watcher.stdout is not None
        header, first = watcher.stdout.readline(), watcher.stdout.readline()
        assert header.split()[:2] == ["NAMESPACE", "NAME"] and first.split()[1] == "first"
        create_policy(k8s, namespace, "later")
        added = watcher.stdout.readline()
        assert added.split()[1] == "later" and "Unknown" in added.split()
        write_status(k8s, namespace, "later", {"epoch": 9, "totalLag": 77})
        changed = watcher.stdout.readline()
        assert changed.split()[1] == "later" and {"77", "9"} <= set(changed.split())
        # Kept under the header the first rows set (the same widths; wider only when it must).
        assert changed.index(" later ") == header.index(" NAME ")
        assert changed.rstrip().rindex(" ") + 1 == header.index("AGE")
    finally:
        guard.cancel()
        err = _interrupted(watcher)
    assert watcher.returncode == 0, err
    assert "Traceback" not in err


def test_get_name_watch_follows_that_policy_only(k8s: Any, namespace: str) -> None:
    create_policy(k8s, namespace, "watched")
    watcher = _watcher(k8s, namespace, "watched")
    guard = threading.Timer(120, watcher.send_signal, args=(signal.SIGINT,))
    guard.start()
    try:
        assert watcher.stdout is not None
        header, first = watcher.stdout.readline(), watcher.stdout.readline()
        assert header.split()[:2] == ["NAMESPACE", "NAME"] and first.split()[1] == "watched"
        create_policy(k8s, namespace, "unwatched")  # no row: another policy
        write_status(k8s, namespace, "watched", {"epoch": 4, "totalLag": 31})
        changed = watcher.stdout.readline()
        assert changed.split()[1] == "watched" and {"31", "4"} <= set(changed.split()), changed
    finally:
        guard.cancel()
        err = _interrupted(watcher)
    assert watcher.returncode == 0, err
    assert "Traceback" not in err
