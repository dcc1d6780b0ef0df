"""The Helm chart against a real kube-apiserver: it installs, and its RBAC is exactly enough.

The operator's pod is scheduled onto the KWOK node, which runs no container, so the operator
itself does not run here; what is checked is what the chart creates and what the chart's
ServiceAccount may do. "Exactly enough" is checked two ways: `kubectl auth can-i` for each verb
the operator needs (yes) and for neighbouring ones it must not have (no), and the complete rule
list the API server reports for the account (`auth can-i --list`) compared with the expected
set, so a new permission cannot sneak in unnoticed.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_rebalance_dev.devenv.kube_api import write_kubeconfig

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kafka-rebalance-operator"

# What the operator needs in a namespace it watches (resource -> verbs).
NEEDED = {
    "consumergrouppolicies.kafka-rebalance.io": {"get", "list", "watch", "patch"},
    "consumergrouppolicies.kafka-rebalance.io/status": {"patch"},
    "configmaps": {"get", "list", "watch", "create", "update", "patch", "delete"},
    "pods": {"get", "list", "watch"},
    "secrets": {"get"},
    "events": {"create", "patch"},
    "events.events.k8s.io": {"create", "patch"},
}
# What every authenticated identity may do (system:basic-user and friends), not the chart's doing.
EVERYONE = {
    "selfsubjectreviews.authentication.k8s.io",
    "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
}
# Verbs the operator must NOT have, checked one by one.
FORBIDDEN = [
    ("create", "consumergrouppolicies.kafka-rebalance.io"),
    ("update", "consumergrouppolicies.kafka-rebalance.io"),
    ("delete", "consumergrouppolicies.kafka-rebalance.io"),
    ("update", "consumergrouppolicies.kafka-rebalance.io/status"),
    ("create", "pods"),
    ("patch", "pods"),
    ("delete", "pods"),
    ("create", "pods/eviction"),
    ("list", "secrets"),
    ("watch", "secrets"),
    ("create", "secrets"),
    ("update", "secrets"),
    ("delete", "events"),
    ("get", "deployments.apps"),
    ("patch", "statefulsets.apps"),
    ("create", "rolebindings.rbac.authorization.k8s.io"),
    ("create", "serviceaccounts/token"),
]


class Helm:
    """helm from the toolchain, with private config dirs, against the test's API server."""

    def __init__(self, k8s: Any, home: Path) -> None:
        self.k8s = k8s
        self.env = {
            **os.environ,
            "KUBECONFIG": str(k8s.kubeconfig),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.k8s.tools.helm), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check:
            assert result.returncode == 0, result.stdout + result.stderr
        return result


@pytest.fixture(scope="module")
def helm(k8s: Any, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(k8s, tmp_path_factory.mktemp("helm"))


def _namespace(k8s: Any, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def release(helm: Helm, k8s: Any) -> Iterator[list[tuple[str, str]]]:
    """Releases a test installs, uninstalled afterwards (cluster-scoped RBAC must not leak)."""
    installed: list[tuple[str, str]] = []
    yield installed
    for name, namespace in installed:
        helm("uninstall", name, "--namespace", namespace, "--wait", check=False)


def _install(helm: Helm, release: list, namespace: str, *sets: str, name: str = "kro") -> None:
    args = ["install", name, str(CHART), "--namespace", namespace, "--wait", "--timeout=4m"]
    for value in sets:
        args += ["--set", value]
    release.append((name, namespace))
    result = helm(*args, check=False)
    if result.returncode != 0:
        state = helm.k8s.kubectl(
            "-n", namespace, "get", "deploy,rs,pods,events", "-o", "wide", check=False
        )
        pytest.fail(f"helm install failed: {result.stderr}\n{state.stdout}{state.stderr}")


def _get(k8s: Any, *args: str) -> dict[str, Any]:
    return json.loads(k8s.kubectl("get", "-o", "json", *args).stdout)


def _can_i(k8s: Any, account: str, verb: str, resource: str, namespace: str | None) -> bool:
    where = ["-n", namespace] if namespace else ["--all-namespaces"]
    result = k8s.kubectl("auth", "can-i", verb, resource, f"--as={account}", *where, check=False)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), result.stderr
    return answer == "yes"


def _granted(k8s: Any, account: str, namespace: str) -> dict[str, set[str]]:
    """Every resource rule the API server reports for `account` in `namespace`."""
    out = k8s.kubectl(
        "auth", "can-i", "--list", f"--as={account}", "-n", namespace, "--no-headers"
    ).stdout
    granted: dict[str, set[str]] = {}
    for line in out.splitlines():
        # Columns: Resources, Non-Resource URLs, Resource Names, Verbs ("[get list]").
        resource = line.split()[0]
        if resource.startswith("["):
            continue  # no resource: a non-resource URL row ([/api/*], [/healthz], ...)
        verbs = line[line.rindex("[") + 1 : line.rindex("]")].split()
        granted.setdefault(resource, set()).update(verbs)
    return {r: v for r, v in granted.items() if r not in EVERYONE}


def _account(namespace: str, name: str = "kro-kafka-rebalance-operator") -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def test_default_install_creates_the_operator_and_exactly_its_permissions(
    helm: Helm, k8s: Any, release: list, tmp_path: Path
) -> None:
    ns = f"kro-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", ns)
    elsewhere = _namespace(k8s, "other")
    _install(helm, release, ns)

    crd = _get(k8s, "crd", "consumergrouppolicies.kafka-rebalance.io")
    assert crd["spec"]["names"]["shortNames"] == ["cgp"]
    deployment = _get(k8s, "-n", ns, "deployment", "kro-kafka-rebalance-operator")
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert deployment["status"]["readyReplicas"] == 1  # a pod was scheduled and is Ready (KWOK)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == [
        "operator",
        "--namespace",
        ns,
        "--health-port",
        "8080",
        "--metrics-port",
        "9100",
        "--max-partition-series",
        "10000",
        "--max-partitions-per-policy",
        "20000",
        "--min-poll-interval",
        "5s",
        "--log-format",
        "text",
        "--log-level",
        "info",
    ]
    sa = _get(k8s, "-n", ns, "serviceaccount", "kro-kafka-rebalance-operator")
    assert sa["metadata"]["labels"]["app.kubernetes.io/instance"] == "kro"
    service = _get(k8s, "-n", ns, "service", "kro-kafka-rebalance-operator-metrics")
    assert service["spec"]["ports"][0]["port"] == 9100
    pods = _get(k8s, "-n", ns, "pods", "-l", "app.kubernetes.io/instance=kro")["items"]
    assert [p["spec"]["serviceAccountName"] for p in pods] == ["kro-kafka-rebalance-operator"]

    account = _account(ns)
    assert _granted(k8s, account, ns) == NEEDED
    for resource, verbs in NEEDED.items():
        for verb in verbs:
            assert _can_i(k8s, account, verb, resource, ns), (verb, resource)
            assert not _can_i(k8s, account, verb, resource, elsewhere), (verb, resource)
    for verb, resource in FORBIDDEN:
        assert not _can_i(k8s, account, verb, resource, ns), (verb, resource)
    for verb, resource in [("list", "namespaces"), ("list", "nodes"), ("list", "crd")]:
        assert not _can_i(k8s, account, verb, resource, None), (verb, resource)

    # Not only the review API: a real request with the account's token obeys the same rules.
    token = k8s.kubectl("-n", ns, "create", "token", "kro-kafka-rebalance-operator").stdout
    config = write_kubeconfig(
        tmp_path / "operator.kubeconfig", k8s.server, k8s.ca, user=account, token=token.strip()
    )
    ok = k8s.kubectl("-n", ns, "get", "pods", "-o", "name", kubeconfig=config, check=False)
    assert ok.returncode == 0, ok.stderr
    refused = k8s.kubectl("-n", elsewhere, "get", "pods", kubeconfig=config, check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower()


def test_watch_namespaces_grant_those_namespaces_only(helm: Helm, k8s: Any, release: list) -> None:
    home = f"kro-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", home)
    team_a, team_b, other = (_namespace(k8s, p) for p in ("team-a", "team-b", "other"))
    _install(helm, release, home, f"watchNamespaces={{{team_a},{team_b}}}")

    account = _account(home)
    for ns in (team_a, team_b):
        assert _granted(k8s, account, ns) == NEEDED, ns
    for ns in (home, other):
        assert _granted(k8s, account, ns) == {}, ns
    assert not _can_i(k8s, account, "list", "pods", None)


def test_all_namespaces_binds_cluster_wide_and_uninstall_removes_it(
    helm: Helm, k8s: Any, release: list
) -> None:
    home = f"kro-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", home)
    anywhere = _namespace(k8s, "any")
    name = f"kro{uuid.uuid4().hex[:4]}"
    _install(helm, release, home, "watchAllNamespaces=true", name=name)

    account = _account(home, f"{name}-kafka-rebalance-operator")
    assert _granted(k8s, account, anywhere) == NEEDED
    assert _can_i(k8s, account, "watch", "consumergrouppolicies.kafka-rebalance.io", None)
    assert not _can_i(k8s, account, "list", "secrets", None)
    deployment = _get(k8s, "-n", home, "deployment", f"{name}-kafka-rebalance-operator")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "operator",
        "--all-namespaces",
        "--health-port",
        "8080",
        "--metrics-port",
        "9100",
        "--max-partition-series",
        "10000",
        "--max-partitions-per-policy",
        "20000",
        "--min-poll-interval",
        "5s",
        "--log-format",
        "text",
        "--log-level",
        "info",
    ]

    helm("uninstall", name, "--namespace", home, "--wait")
    release.clear()
    gone = k8s.kubectl("get", "clusterrole", f"{name}-kafka-rebalance-operator", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    # Helm never deletes CRDs from a chart's crds/ directory, so policies survive an uninstall.
    assert _get(k8s, "crd", "consumergrouppolicies.kafka-rebalance.io")["kind"] == (
        "CustomResourceDefinition"
    )


def test_secret_names_narrow_get_to_the_listed_secrets(helm: Helm, k8s: Any, release: list) -> None:
    ns = f"kro-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", ns)
    _install(helm, release, ns, "rbac.secretNames={kafka-client}")
    account = _account(ns)
    assert _can_i(k8s, account, "get", "secrets/kafka-client", ns)
    assert not _can_i(k8s, account, "get", "secrets/kafka-admin", ns)
    assert not _can_i(k8s, account, "get", "secrets", ns)


@pytest.mark.parametrize(
    "sets",
    [
        [],
        ["watchAllNamespaces=true"],
        ["watchNamespaces={dry-a,dry-b}", "rbac.secretNames={kafka-client}"],
        [
            "leaderElection.enabled=true",
            "replicaCount=3",
            "podAntiAffinityPreset=hard",
            "image.registry=registry.example.org/team",
            "image.digest=sha256:" + "ab" * 32,
            "topologySpreadConstraints[0].maxSkew=1",
            "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
            "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
            "extraVolumes[0].name=ca",
            "extraVolumes[0].configMap.name=kafka-ca",
            "extraVolumeMounts[0].name=ca",
            "extraVolumeMounts[0].mountPath=/etc/kafka-ca",
            "readinessProbe.periodSeconds=5",
        ],
    ],
    ids=["default", "all-namespaces", "watch-list", "ha-and-common-values"],
)
def test_rendered_manifests_pass_server_side_validation(
    helm: Helm, k8s: Any, sets: list[str]
) -> None:
    """The API server's own validation of every rendered object (kubeconform's job, done by the
    authority itself: the provisioned kubeconform has no schemas offline)."""
    for ns in ("dry-home", "dry-a", "dry-b"):
        k8s.kubectl("create", "namespace", ns, check=False)
    args = ["template", "kro", str(CHART), "--namespace", "dry-home", "--include-crds"]
    for value in sets:
        args += ["--set", value]
    rendered = helm(*args).stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered) if d]
    assert "Deployment" in kinds and "CustomResourceDefinition" in kinds
    result = subprocess.run(
        [
            str(k8s.tools.kubectl),
            f"--kubeconfig={k8s.kubeconfig}",
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
        ],
        input=rendered,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(kinds)


def _token_config(k8s: Any, tmp_path: Path, namespace: str, account: str) -> Path:
    """A kubeconfig with a real TokenRequest token of `account`: requests, not reviews."""
    k8s.kubectl("-n", namespace, "create", "serviceaccount", account)
    k8s.kubectl(
        "-n", namespace, "create", "rolebinding", account, f"--clusterrole={account}",
        f"--serviceaccount={namespace}:{account}",
    )  # fmt: skip
    token = k8s.kubectl("-n", namespace, "create", "token", account).stdout.strip()
    return write_kubeconfig(
        tmp_path / f"{account}.kubeconfig",
        k8s.server,
        k8s.ca,
        user=_account(namespace, account),
        token=token,
    )


def test_namespace_edit_and_view_users_get_policies_through_aggregation(
    helm: Helm, k8s: Any, release: list, tmp_path: Path
) -> None:
    """Bound in one namespace to the built-in roles, `edit` (named for the service accounts
    below) creates and approves a policy, `view` lists it and may not write it."""
    home = _namespace(k8s, "kro")
    app = _namespace(k8s, "app")
    _install(helm, release, home, "replicaCount=0")
    editor = _token_config(k8s, tmp_path, app, "edit")
    viewer = _token_config(k8s, tmp_path, app, "view")
    policy = tmp_path / "policy.yaml"
    policy.write_text((ROOT / "examples" / "policies" / "lag-aware.yaml").read_text())

    # The controller-manager folds the chart's ClusterRoles into edit/view asynchronously.
    deadline = time.monotonic() + 60
    while True:
        created = k8s.kubectl(
            "-n", app, "create", "-f", str(policy), kubeconfig=editor, check=False
        )
        if created.returncode == 0 or time.monotonic() > deadline:
            break
        assert "forbidden" in created.stderr.lower(), created.stderr
        time.sleep(0.5)
    assert created.returncode == 0, created.stderr
    approve = k8s.kubectl(
        "-n", app, "patch", "cgp", "orders", "--type=merge",
        "-p", '{"spec": {"approvedPlan": "0123456789abcdef0123"}}', kubeconfig=editor, check=False,
    )  # fmt: skip
    assert approve.returncode == 0, approve.stderr
    assert k8s.kubectl("-n", app, "get", "cgp", "-o", "name", kubeconfig=viewer).stdout.split() == [
        "consumergrouppolicy.kafka-rebalance.io/orders"
    ]
    refused = k8s.kubectl("-n", app, "delete", "cgp", "orders", kubeconfig=viewer, check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
    # Only where they are bound, and never the operator's status.
    policies = "consumergrouppolicies.kafka-rebalance.io"
    assert not _can_i(k8s, _account(app, "edit"), "list", policies, home)
    # (`can-i VERB RESOURCE/NAME` names an object; the subresource needs its own flag.)
    status = k8s.kubectl(
        "auth", "can-i", "patch", policies, "--subresource=status",
        f"--as={_account(app, 'edit')}", "-n", app, check=False,
    )  # fmt: skip
    assert status.stdout.strip() == "no", status.stdout + status.stderr

    helm("uninstall", "kro", "--namespace", home, "--wait")
    release.clear()
    forgotten = k8s.kubectl("-n", app, "get", "cgp", kubeconfig=viewer, check=False)
    deadline = time.monotonic() + 60
    while forgotten.returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        forgotten = k8s.kubectl("-n", app, "get", "cgp", kubeconfig=viewer, check=False)
    assert "forbidden" in forgotten.stderr.lower(), "uninstall takes the grants with it"


def _operator_client(k8s: Any, tmp_path: Path, namespace: str) -> Any:
    """An API client with a real token of the chart's operator ServiceAccount."""
    from kubernetes import config

    name = "kro-kafka-rebalance-operator"
    token = k8s.kubectl("-n", namespace, "create", "token", name).stdout.strip()
    kubeconfig = write_kubeconfig(
        tmp_path / f"{namespace}-operator.kubeconfig", k8s.server, k8s.ca,
        user=_account(namespace), token=token,
    )  # fmt: skip
    return config.new_client_from_config(config_file=str(kubeconfig))


@pytest.mark.parametrize("listing", [False, True], ids=["default", "list-cluster-wide"])
def test_the_operator_lists_policies_outside_its_namespaces_only_when_allowed(
    helm: Helm, k8s: Any, release: list, tmp_path: Path, listing: bool
) -> None:
    """rbac.listPoliciesClusterWide grants `list` on policies everywhere and nothing more, so
    namespace_scope can name a policy the operator would ignore; by default it may not."""
    from kafka_rebalance_operator.kube.namespace_scope import list_policies

    home = _namespace(k8s, "kro")
    elsewhere = _namespace(k8s, "app")
    k8s.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    sets = ["replicaCount=0", f"rbac.listPoliciesClusterWide={str(listing).lower()}"]
    _install(helm, release, home, *sets)
    policy = (ROOT / "examples" / "policies" / "lag-aware.yaml").read_text()
    subprocess.run(
        [str(k8s.tools.kubectl), f"--kubeconfig={k8s.kubeconfig}", "-n", elsewhere, "apply",
         "-f", "-"], input=policy, text=True, check=True, capture_output=True,
    )  # fmt: skip
    api = _operator_client(k8s, tmp_path, home)
    try:
        found = list_policies(api)
    finally:
        api.close()
    if listing:
        assert found is not None and (elsewhere, "orders") in found
        account = _account(home)
        policies = "consumergrouppolicies.kafka-rebalance.io"
        assert not _can_i(k8s, account, "get", policies, elsewhere)
        assert not _can_i(k8s, account, "watch", policies, elsewhere)
    else:
        assert found is None
