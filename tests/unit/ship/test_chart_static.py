"""Static checks of the CRD, the Helm chart, the Dockerfile and the examples (no cluster).

The chart's rendering is checked with the real `helm` from the provisioned toolchain (`helm lint`,
`helm template`), because values.schema.json and the templates only mean something as helm reads
them. The same manifests are applied to a real API server in tests/integration/test_chart.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_rebalance_assignors import STRATEGY_NAMES
from kafka_rebalance_dev.devenv.toolchain import Toolchain, toolchain

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "crds" / "consumergrouppolicies.yaml"
CHART = ROOT / "charts" / "kafka-rebalance-operator"
CHART_CRD = CHART / "crds" / "consumergrouppolicies.yaml"
EXAMPLES = ROOT / "examples"

OPERATOR_RULES = {
    ("kafka-rebalance.io", "consumergrouppolicies"): {"get", "list", "watch", "patch"},
    ("kafka-rebalance.io", "consumergrouppolicies/status"): {"patch"},
    ("", "configmaps"): {"get", "list", "watch", "create", "update", "patch", "delete"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "secrets"): {"get"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
}


def _crd() -> dict[str, Any]:
    return yaml.safe_load(CRD.read_text())


def _version_schema() -> dict[str, Any]:
    (version,) = _crd()["spec"]["versions"]
    return version


def _spec_schema() -> dict[str, Any]:
    return _version_schema()["schema"]["openAPIV3Schema"]["properties"]["spec"]


# ---- the CRD -------------------------------------------------------------------------------------


def test_chart_crd_is_a_byte_identical_copy_of_the_source_of_truth() -> None:
    assert not CHART_CRD.is_symlink()
    assert CHART_CRD.read_bytes() == CRD.read_bytes(), (
        "charts/kafka-rebalance-operator/crds/ differs from crds/: "
        "cp crds/consumergrouppolicies.yaml charts/kafka-rebalance-operator/crds/"
    )
    assert sorted(p.name for p in CHART_CRD.parent.iterdir()) == [CRD.name]


def test_crd_names_follow_docs_naming() -> None:
    crd = _crd()
    assert crd["metadata"]["name"] == "consumergrouppolicies.kafka-rebalance.io"
    spec = crd["spec"]
    assert spec["group"] == "kafka-rebalance.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "ConsumerGroupPolicy"
    assert spec["names"]["plural"] == "consumergrouppolicies"
    assert spec["names"]["shortNames"] == ["cgp"]
    version = _version_schema()
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_crd_strategy_enum_is_exactly_the_planners_strategies() -> None:
    strategy = _spec_schema()["properties"]["strategy"]
    assert strategy["enum"] == list(STRATEGY_NAMES)
    assert strategy["default"] == "lag-aware"


def test_printer_columns_show_strategy_members_lag_imbalance_epoch_ready_age() -> None:
    columns = {
        c["name"]: c["jsonPath"]
        for c in _version_schema()["additionalPrinterColumns"]
        if c.get("priority", 0) == 0
    }
    assert columns == {
        "Strategy": ".spec.strategy",
        "Members": ".status.members",
        "Total Lag": ".status.totalLag",
        "Imbalance": ".status.maxLoadRatio",
        "Epoch": ".status.epoch",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Age": ".metadata.creationTimestamp",
    }


def test_every_cel_rule_says_which_field_it_is_about() -> None:
    """A refusal the user cannot map to a field is useless; every rule's message names one."""
    rules: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(node.get("x-kubernetes-validations", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(_version_schema()["schema"])
    assert len(rules) >= 8
    for rule in rules:
        text = rule.get("message") or rule.get("messageExpression", "")
        assert re.search(r"(spec|metadata)\.[a-zA-Z]+", text), rule


def test_status_is_typed_without_preserve_unknown_fields() -> None:
    status = _version_schema()["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert "x-kubernetes-preserve-unknown-fields" not in json.dumps(status)
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert set(conditions["items"]["required"]) == {
        "type",
        "status",
        "lastTransitionTime",
        "reason",
        "message",
    }


# ---- examples ------------------------------------------------------------------------------------


def test_there_is_one_example_policy_per_strategy() -> None:
    found = {}
    for path in sorted((EXAMPLES / "policies").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        assert doc["apiVersion"] == "kafka-rebalance.io/v1alpha1"
        assert doc["kind"] == "ConsumerGroupPolicy"
        found[path.stem] = doc["spec"]["strategy"]
    assert found == {name: name for name in STRATEGY_NAMES}


def test_consumer_example_wires_the_sidecar_to_its_own_configmap() -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "consumer-statefulset.yaml").read_text()))
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    policy = yaml.safe_load((EXAMPLES / "policies" / "lag-aware.yaml").read_text())
    selector = policy["spec"]["members"]["selector"]["matchLabels"]
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items(), "the lag-aware policy must select these pods"

    pod = sts["spec"]["template"]["spec"]
    (sidecar,) = [c for c in pod["containers"] if c["name"] == "kafka-rebalance"]
    assert sidecar["command"] == ["kafka-rebalance", "sidecar"]
    env = {e["name"]: e for e in sidecar["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # the kubelet probes the pod's address: the health port must be bound there
    assert "--bind=0.0.0.0" in sidecar["args"]
    ports = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    assert f"--health-port={ports['sidecar-health']}" in sidecar["args"]
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "sidecar-health"}
    assert sidecar["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "sidecar-health"}
    (mount,) = [m for m in sidecar["volumeMounts"] if m["name"] == "assignment"]
    assert any(
        a == f"--assignment={mount['mountPath']}/$(POD_NAME)/assignment.json"
        for a in sidecar["args"]
    )

    (volume,) = [v for v in pod["volumes"] if v["name"] == "assignment"]
    sources = volume["projected"]["sources"]
    policy_name = policy["metadata"]["name"]
    for ordinal, source in enumerate(sources):
        pod_name = f"{sts['metadata']['name']}-{ordinal}"
        cm = source["configMap"]
        assert cm["name"] == f"{policy_name}.{pod_name}"  # docs/naming.md: <policy>.<pod>
        assert cm["optional"] is True
        assert cm["items"] == [{"key": "assignment.json", "path": f"{pod_name}/assignment.json"}]
    assert len(sources) >= sts["spec"]["replicas"]


# ---- Dockerfile ----------------------------------------------------------------------------------


def _dockerfile_stages() -> list[list[str]]:
    stages: list[list[str]] = []
    logical = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_dockerfile_is_multi_stage_and_runs_as_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    (base,) = [line for line in text.splitlines() if line.startswith("ARG PYTHON_IMAGE=")]
    # A user's `docker build .` gets Python 3.11 slim, pinned by digest (a tag can move).
    assert base.startswith("ARG PYTHON_IMAGE=python:3.11") and "-slim" in base
    assert re.search(r"@sha256:[0-9a-f]{64}$", base)
    stages = _dockerfile_stages()
    assert len(stages) == 2
    builder, final = stages
    assert builder[0] == "FROM ${PYTHON_IMAGE} AS builder"
    assert final[0] == "FROM ${PYTHON_IMAGE}"
    assert any("pip wheel" in line for line in builder)
    assert not any(line.startswith(("RUN pip", "RUN python -m pip")) for line in final)
    assert any(line.startswith("COPY --from=builder /opt/kafka-rebalance") for line in final)
    (user,) = [line for line in final if line.startswith("USER ")]
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric, so runAsNonRoot can verify it
    assert final[-2:] == ['ENTRYPOINT ["kafka-rebalance"]', 'CMD ["operator"]']
    assert final.index(user) < final.index('ENTRYPOINT ["kafka-rebalance"]')


def test_dockerignore_keeps_exactly_what_the_dockerfile_copies() -> None:
    ignore = (ROOT / ".dockerignore").read_text().split()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = set()
    for stage in _dockerfile_stages():
        for line in stage:
            if line.startswith("COPY ") and "--from=" not in line:
                copied.update(part.rstrip("/") for part in line.split()[1:-1])
    assert "*" in ignore
    assert copied == kept
    for path in copied:
        assert (ROOT / path).exists(), path


# ---- the chart, rendered by the real helm ----------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> Path:
    tools: Toolchain = toolchain()
    if not tools.helm.is_file():
        pytest.fail(
            f"not provisioned: helm {tools.helm_version}; run `scripts/bootstrap`", pytrace=False
        )
    return tools.helm


def _helm(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, check=check, timeout=120
    )


def _render(helm: Path, *sets: str, namespace: str = "ops") -> list[dict[str, Any]]:
    args = ["template", "kro", str(CHART), "--namespace", namespace]
    for value in sets:
        args += ["--set", value]
    out = _helm(helm, *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-"


def _aggregated(role: dict[str, Any]) -> bool:
    """A ClusterRole made to fold into the built-in view/edit/admin roles, not the operator's."""
    return any(k.startswith(AGGREGATE_LABEL) for k in role["metadata"].get("labels", {}))


def _operator_cluster_roles(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in _of_kind(docs, "ClusterRole") if not _aggregated(r)]


def _rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


def test_helm_lint_strict_is_clean(helm: Path) -> None:
    result = _helm(helm, "lint", "--strict", str(CHART), check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_default_render_watches_the_release_namespace_only(helm: Path) -> None:
    docs = _render(helm)
    kinds = sorted(d["kind"] for d in docs if not (d["kind"] == "ClusterRole" and _aggregated(d)))
    assert kinds == ["Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
    (role,) = _of_kind(docs, "Role")
    assert role["metadata"]["namespace"] == "ops"
    assert _rules(role) == OPERATOR_RULES
    assert all("resourceNames" not in r for r in role["rules"])
    (binding,) = _of_kind(docs, "RoleBinding")
    (sa,) = _of_kind(docs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "ops"}
    ]
    assert binding["roleRef"]["kind"] == "Role"


def test_deployment_is_one_recreated_restricted_replica(helm: Path) -> None:
    (deployment,) = _of_kind(_render(helm), "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == "kafka-rebalance-operator:0.1.0"
    assert container["command"] == ["kafka-rebalance"]
    assert container["args"] == [
        "operator",
        "--namespace",
        "ops",
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
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "metrics": 9100}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert "enabled" not in container["livenessProbe"]
    assert "affinity" not in pod and "topologySpreadConstraints" not in pod
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/tmp"}
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    (service,) = [d for d in _render(helm) if d["kind"] == "Service"]
    assert service["spec"]["ports"][0]["port"] == 9100
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]


def test_watch_namespaces_get_one_role_each_and_repeat_the_flag(helm: Path) -> None:
    docs = _render(helm, "watchNamespaces={team-a,team-b}")
    roles = _of_kind(docs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert sorted(b["metadata"]["namespace"] for b in _of_kind(docs, "RoleBinding")) == [
        "team-a",
        "team-b",
    ]
    assert not _operator_cluster_roles(docs) and not _of_kind(docs, "ClusterRoleBinding")
    (deployment,) = _of_kind(docs, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == [
        "operator",
        "--namespace",
        "team-a",
        "--namespace",
        "team-b",
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


def test_all_namespaces_binds_the_same_rules_cluster_wide(helm: Path) -> None:
    docs = _render(helm, "watchAllNamespaces=true")
    assert not _of_kind(docs, "Role") and not _of_kind(docs, "RoleBinding")
    (role,) = _operator_cluster_roles(docs)
    assert _rules(role) == OPERATOR_RULES
    (binding,) = _of_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    (deployment,) = _of_kind(docs, "Deployment")
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


def test_secret_names_narrow_secret_access(helm: Path) -> None:
    (role,) = _of_kind(_render(helm, "rbac.secretNames={kafka-client}"), "Role")
    (secret_rule,) = [r for r in role["rules"] if r["resources"] == ["secrets"]]
    assert secret_rule == {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["kafka-client"],
        "verbs": ["get"],
    }


def test_peering_adds_its_objects_rbac_and_flag(helm: Path) -> None:
    docs = _render(helm, "peering.enabled=true", "replicaCount=2")
    (peering,) = _of_kind(docs, "KopfPeering")
    assert peering["metadata"] == {
        **peering["metadata"],
        "name": "kafka-rebalance-operator",
        "namespace": "ops",
    }
    (role,) = _of_kind(docs, "Role")
    assert _rules(role)[("kopf.dev", "kopfpeerings")] == {"get", "list", "watch", "patch"}
    (deployment,) = _of_kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][-2:] == ["--peering", "kafka-rebalance-operator"]
    # Equal priorities freeze every peer: each pod draws its own before exec'ing the operator.
    assert container["command"] == [
        "bash",
        "-c",
        'exec kafka-rebalance "$@" --priority "$RANDOM"',
        "kafka-rebalance",
    ]

    cluster = _render(helm, "peering.enabled=true", "watchAllNamespaces=true")
    assert [d["metadata"]["name"] for d in _of_kind(cluster, "ClusterKopfPeering")] == [
        "kafka-rebalance-operator"
    ]
    (cluster_role,) = _operator_cluster_roles(cluster)
    assert ("kopf.dev", "clusterkopfpeerings") in _rules(cluster_role)


def test_service_monitor_is_off_by_default_and_renders_when_enabled(helm: Path) -> None:
    assert not _of_kind(_render(helm), "ServiceMonitor")
    (monitor,) = _of_kind(_render(helm, "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_leader_election_adds_a_lease_role_in_the_release_namespace_and_its_flags(
    helm: Path,
) -> None:
    docs = _render(helm, "leaderElection.enabled=true", "replicaCount=2")
    roles = {r["metadata"]["name"]: r for r in _of_kind(docs, "Role")}
    lease_role = roles["kro-kafka-rebalance-operator-leader-election"]
    assert lease_role["metadata"]["namespace"] == "ops"
    assert _rules(lease_role) == {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
    (binding,) = [
        b
        for b in _of_kind(docs, "RoleBinding")
        if b["roleRef"]["name"] == "kro-kafka-rebalance-operator-leader-election"
    ]
    assert binding["subjects"][0]["name"] == "kro-kafka-rebalance-operator"
    (deployment,) = _of_kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--leader-election") :][:3] == [
        "--leader-election",
        "--leader-election-namespace",
        "ops",
    ]
    both = _helm(
        helm,
        "template",
        "kro",
        str(CHART),
        "--set",
        "leaderElection.enabled=true",
        "--set",
        "peering.enabled=true",
        check=False,
    )
    assert both.returncode != 0 and "exclude each other" in both.stderr


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("sets", "image"),
    [
        ([], "kafka-rebalance-operator:0.1.0"),
        (["image.tag=1.2.3"], "kafka-rebalance-operator:1.2.3"),
        (["image.registry=ghcr.io/acme/"], "ghcr.io/acme/kafka-rebalance-operator:0.1.0"),
        (
            ["image.registry=ghcr.io/acme", "image.tag=1.2.3", f"image.digest={DIGEST}"],
            f"ghcr.io/acme/kafka-rebalance-operator@{DIGEST}",
        ),
        (["global.imageRegistry=reg.example"], "reg.example/kafka-rebalance-operator:0.1.0"),
        (
            ["global.imageRegistry=reg.example", "image.registry=ghcr.io/acme"],
            "ghcr.io/acme/kafka-rebalance-operator:0.1.0",
        ),
    ],
    ids=["default", "tag", "registry", "digest-wins", "global-registry", "own-registry-wins"],
)
def test_image_is_registry_repository_then_digest_or_tag(
    helm: Path, sets: list[str], image: str
) -> None:
    (deployment,) = _of_kind(_render(helm, *sets), "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image


def test_a_sidecar_image_of_its_own_comes_from_the_same_registry(helm: Path) -> None:
    docs = _render(
        helm,
        "global.imageRegistry=reg.example",
        "webhook.enabled=true",
        "webhook.sidecar.image.repository=kafka-rebalance-sidecar",
    )
    (deployment,) = _of_kind(docs, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    image = args[args.index("--sidecar-image") + 1]
    assert image == "reg.example/kafka-rebalance-sidecar:0.1.0"


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error"])
def test_log_level_reaches_the_operator(helm: Path, level: str) -> None:
    (deployment,) = _of_kind(_render(helm, f"logLevel={level}"), "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--log-level") + 1] == level


def test_an_unknown_log_level_is_refused_by_name(helm: Path) -> None:
    result = _helm(helm, "template", "kro", str(CHART), "--set", "logLevel=loud", check=False)
    assert result.returncode != 0 and "logLevel" in result.stderr, result.stderr


def test_additional_labels_are_on_every_object_and_the_pods(helm: Path) -> None:
    docs = _render(
        helm,
        "additionalLabels.team=payments",
        "podLabels.tier=ops",
        "webhook.enabled=true",
        "metrics.serviceMonitor.enabled=true",
        "metrics.prometheusRule.enabled=true",
        "metrics.grafanaDashboard.enabled=true",
        "podDisruptionBudget.enabled=true",
        "networkPolicy.enabled=true",
        "leaderElection.enabled=true",
    )
    unlabelled = [
        f"{d['kind']}/{d['metadata']['name']}"
        for d in docs
        if (d["metadata"].get("labels") or {}).get("team") != "payments"
    ]
    assert not unlabelled
    (deployment,) = _of_kind(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["team"] == "payments" and pod_labels["tier"] == "ops"


def test_leader_election_rolls_one_pod_at_a_time_and_spreads_replicas(helm: Path) -> None:
    (deployment,) = _of_kind(
        _render(helm, "leaderElection.enabled=true", "replicaCount=2"), "Deployment"
    )
    spec = deployment["spec"]
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    selector = spec["selector"]["matchLabels"]
    affinity = spec["template"]["spec"]["affinity"]
    assert affinity == {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": selector},
                    },
                }
            ]
        }
    }
    (hard,) = _of_kind(
        _render(
            helm, "leaderElection.enabled=true", "replicaCount=3", "podAntiAffinityPreset=hard"
        ),
        "Deployment",
    )
    required = hard["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert required == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}}
        ]
    }
    for sets in (
        ["leaderElection.enabled=true", "replicaCount=2", "podAntiAffinityPreset=none"],
        ["leaderElection.enabled=true"],  # one replica: nothing to spread
    ):
        (plain,) = _of_kind(_render(helm, *sets), "Deployment")
        assert "affinity" not in plain["spec"]["template"]["spec"]
    (own,) = _of_kind(
        _render(
            helm,
            "leaderElection.enabled=true",
            "replicaCount=2",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].key=pool",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
        ),
        "Deployment",
    )
    assert list(own["spec"]["template"]["spec"]["affinity"]) == ["nodeAffinity"]


def test_topology_spread_gets_the_pod_selector_unless_it_has_its_own(helm: Path) -> None:
    docs = _render(
        helm,
        "topologySpreadConstraints[0].maxSkew=1",
        "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
        "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        "topologySpreadConstraints[1].maxSkew=2",
        "topologySpreadConstraints[1].topologyKey=kubernetes.io/hostname",
        "topologySpreadConstraints[1].whenUnsatisfiable=DoNotSchedule",
        "topologySpreadConstraints[1].labelSelector.matchLabels.team=a",
    )
    (deployment,) = _of_kind(docs, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    zone, host = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert zone == {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": selector},
    }
    assert host["labelSelector"] == {"matchLabels": {"team": "a"}}


def test_extra_volumes_mount_next_to_tmp_and_probes_can_be_tuned_or_off(helm: Path) -> None:
    docs = _render(
        helm,
        "extraVolumes[0].name=ca",
        "extraVolumes[0].secret.secretName=kafka-ca",
        "extraVolumeMounts[0].name=ca",
        "extraVolumeMounts[0].mountPath=/etc/kafka-ca",
        "extraVolumeMounts[0].readOnly=true",
        "readinessProbe.periodSeconds=3",
        "livenessProbe.enabled=false",
    )
    (deployment,) = _of_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"][1:] == [{"name": "ca", "secret": {"secretName": "kafka-ca"}}]
    (container,) = pod["containers"]
    assert container["volumeMounts"][1:] == [
        {"name": "ca", "mountPath": "/etc/kafka-ca", "readOnly": True}
    ]
    assert "livenessProbe" not in container
    assert container["readinessProbe"]["periodSeconds"] == 3


# Keys a KEDA or Strimzi values file carries that this chart now supports (same meaning).
KEDA_STYLE_VALUES = {
    "image": {"registry": "ghcr.io", "repository": "acme/kro", "tag": "1.0", "digest": ""},
    "podAnnotations": {"a": "b"},
    "podLabels": {"team": "data"},
    "priorityClassName": "high",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {},
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
        }
    ],
    "extraVolumes": [{"name": "certs", "emptyDir": {}}],
    "extraVolumeMounts": [{"name": "certs", "mountPath": "/certs"}],
    "livenessProbe": {
        "initialDelaySeconds": 25,
        "periodSeconds": 10,
        "timeoutSeconds": 1,
        "failureThreshold": 3,
        "successThreshold": 1,
    },
    "readinessProbe": {
        "initialDelaySeconds": 5,
        "periodSeconds": 10,
        "timeoutSeconds": 1,
        "failureThreshold": 3,
        "successThreshold": 1,
    },
    "resources": {
        "limits": {"cpu": "1", "memory": "1000Mi"},
        "requests": {"cpu": "100m", "memory": "100Mi"},
    },
    "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
    "serviceAccount": {"create": True, "name": "kro", "annotations": {}},
}


def test_the_schema_accepts_keda_style_keys_it_supports(helm: Path, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(KEDA_STYLE_VALUES))
    out = _helm(helm, "template", "kro", str(CHART), "--namespace", "ops", "-f", str(values)).stdout
    (deployment,) = _of_kind([d for d in yaml.safe_load_all(out) if d], "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "ghcr.io/acme/kro:1.0"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert pod["containers"][0]["readinessProbe"]["successThreshold"] == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("image.digest=sha256:abc", "digest"),
        ("podAntiAffinityPreset=always", "podAntiAffinityPreset"),
        ("topologySpreadConstraints[0].maxSkew=1", "topologyKey"),
        ("livenessProbe.successThreshold=2", "successThreshold"),
        ("extraVolumeMounts[0].name=ca", "mountPath"),
        ("replicaCount=2", "replicaCount > 1 needs leaderElection.enabled=true"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("watchNamespaces={Not_A_Namespace}", "watchNamespaces"),
        ("metrics.port=70000", "port"),
        ("replicas=1", "replicas"),  # a typo of replicaCount is refused, not ignored
        # plan credentials go only to the plan cluster, which must then be named
        ("brokerMode.planKeySecret=plan-keys", "planBootstrapServers"),
        ("brokerMode.planClientSecret=plan-client", "planBootstrapServers"),
        ("brokerMode.planBootstrapServers=kafka", "planBootstrapServers"),
    ],
)
def test_bad_values_are_refused(helm: Path, value: str, expected: str) -> None:
    result = _helm(helm, "template", "kro", str(CHART), "--set", value, check=False)
    assert result.returncode != 0
    assert expected in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        ([], {"namespace": ["ops"], "all_namespaces": False, "peering": None}),
        (
            ["watchNamespaces={team-a,team-b}"],
            {"namespace": ["team-a", "team-b"], "all_namespaces": False, "peering": None},
        ),
        (["watchAllNamespaces=true"], {"namespace": [], "all_namespaces": True, "peering": None}),
        (
            ["peering.enabled=true", "extraArgs={--verbose}"],
            {"namespace": ["ops"], "all_namespaces": False, "peering": "kafka-rebalance-operator"},
        ),
    ],
    ids=["default", "watch-list", "all-namespaces", "peering"],
)
def test_the_operator_command_line_accepts_the_rendered_arguments(
    helm: Path, sets: list[str], expected: dict[str, Any]
) -> None:
    """The chart and `kafka-rebalance operator` agree on flags: parse what the chart renders."""
    from kafka_rebalance.cli import build_parser

    (deployment,) = _of_kind(_render(helm, *sets), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = list(container["args"])
    if container["command"][0] == "bash":
        argv += ["--priority", "12345"]  # what "$RANDOM" expands to in the pod
    args = build_parser("operator").parse_args(argv)
    assert args.command == "operator"
    assert {key: getattr(args, key) for key in expected} == expected
    assert (args.health_port, args.metrics_port) == (8080, 9100)


def test_broker_mode_secrets_are_mounted_and_named_on_the_command_line(helm: Path) -> None:
    """The plan key and the operator's plan-topic credentials come from Secrets mounted
    read-only, and the operator is told where (docs/kip848.md, "Trust")."""
    from kafka_rebalance.cli import build_parser

    sets = [
        "brokerMode.planKeySecret=plan-keys",
        "brokerMode.planClientSecret=plan-client",
        "brokerMode.planBootstrapServers=plans-0:9093\\,plans-1:9093",
    ]
    (deployment,) = _of_kind(_render(helm, *sets), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = build_parser("operator").parse_args(list(container["args"]))
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert args.plan_key_file.startswith(mounts["plan-keys"]["mountPath"] + "/")
    assert args.plan_client_config.startswith(mounts["plan-client"]["mountPath"] + "/")
    assert args.plan_bootstrap_servers == "plans-0:9093,plans-1:9093"
    assert mounts["plan-keys"]["readOnly"] and mounts["plan-client"]["readOnly"]
    assert volumes["plan-keys"]["secret"]["secretName"] == "plan-keys"
    assert volumes["plan-client"]["secret"]["secretName"] == "plan-client"
    (plain,) = _of_kind(_render(helm), "Deployment")
    assert "--plan-key-file" not in plain["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_operator_listens_where_the_probe_and_service_point(helm: Path) -> None:
    docs = _render(helm, "health.port=8181", "metrics.port=9200")
    (deployment,) = _of_kind(docs, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--health-port") + 1] == "8181"
    assert args[args.index("--metrics-port") + 1] == "9200"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8181, "metrics": 9200}
    (service,) = _of_kind(docs, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"

    (quiet,) = _of_kind(_render(helm, "metrics.enabled=false"), "Deployment")
    container = quiet["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][container["args"].index("--metrics-port") + 1] == "0"
    assert [p["name"] for p in container["ports"]] == ["health"]


@pytest.mark.parametrize(
    "sets",
    [
        [],
        ["watchAllNamespaces=true"],
        ["watchNamespaces={team-a,team-b}", "rbac.secretNames={kafka-client}"],
        ["metrics.enabled=false"],
        [
            "brokerMode.planKeySecret=plan-keys",
            "brokerMode.planClientSecret=plan-client",
            "brokerMode.planBootstrapServers=plans:9093",
        ],
        [
            "leaderElection.enabled=true",
            "replicaCount=2",
            "image.registry=ghcr.io/acme",
            f"image.digest={DIGEST}",
            "topologySpreadConstraints[0].maxSkew=1",
            "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
            "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
            "extraVolumes[0].name=ca",
            "extraVolumes[0].configMap.name=kafka-ca",
            "extraVolumeMounts[0].name=ca",
            "extraVolumeMounts[0].mountPath=/etc/kafka-ca",
        ],
    ],
    ids=[
        "default",
        "all-namespaces",
        "watch-list",
        "no-metrics",
        "broker-mode-secrets",
        "ha-and-common-values",
    ],
)
def test_rendered_chart_is_kubeconform_strict_clean(helm: Path, sets: list[str]) -> None:
    """Every rendered object, the CRD included, against the pinned Kubernetes version's strict
    schemas (unknown fields are errors). The API server's own check is in test_chart.py."""
    tools = toolchain()
    missing = [m for m in tools.missing() if m.split(" ", 1)[0] in ("kubeconform", "kube-schemas")]
    if missing:
        pytest.fail(
            f"not provisioned: {', '.join(missing)}; run `scripts/bootstrap`", pytrace=False
        )
    args = ["template", "kro", str(CHART), "--namespace", "ops", "--include-crds"]
    for value in sets:
        args += ["--set", value]
    rendered = _helm(helm, *args).stdout
    count = len([d for d in yaml.safe_load_all(rendered) if d])
    result = subprocess.run(
        [
            str(tools.kubeconform),
            "-strict",
            "-summary",
            "-schema-location",
            tools.kubeconform_schema_location,
            "-",
        ],
        input=rendered,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Valid: {count}, Invalid: 0, Errors: 0, Skipped: 0" in result.stdout, result.stdout


POLICIES = ("kafka-rebalance.io", "consumergrouppolicies")
POLICY_STATUS = ("kafka-rebalance.io", "consumergrouppolicies/status")


def test_aggregated_roles_extend_view_edit_and_admin_with_policies(helm: Path) -> None:
    """view reads, edit also writes (approve is a patch of spec), admin also deletes in bulk;
    nobody but the operator gets to write status, and the roles are bound to no one."""
    docs = _render(helm)
    roles = {
        key[len(AGGREGATE_LABEL) :]: r
        for r in _of_kind(docs, "ClusterRole")
        for key, value in r["metadata"]["labels"].items()
        if key.startswith(AGGREGATE_LABEL) and value == "true"
    }
    read = {"get", "list", "watch"}
    write = read | {"create", "update", "patch", "delete"}
    assert {name: _rules(role) for name, role in roles.items()} == {
        "view": {POLICIES: read, POLICY_STATUS: read},
        "edit": {POLICIES: write, POLICY_STATUS: read},
        "admin": {POLICIES: write | {"deletecollection"}, POLICY_STATUS: read},
    }
    bound = {b["roleRef"]["name"] for b in _of_kind(docs, "ClusterRoleBinding")}
    bound |= {b["roleRef"]["name"] for b in _of_kind(docs, "RoleBinding")}
    assert not bound & {r["metadata"]["name"] for r in roles.values()}


def test_aggregated_roles_can_be_turned_off(helm: Path) -> None:
    docs = _render(helm, "rbac.aggregateToDefaultRoles=false")
    assert not [r for r in _of_kind(docs, "ClusterRole") if _aggregated(r)]
    assert _of_kind(docs, "Role"), "the operator's own Role does not depend on the value"


def _notes(helm: Path, tmp_path: Path, *sets: str) -> str:
    """NOTES.txt as `helm install` prints it (`helm template` leaves NOTES out: the same text is
    rendered here as a YAML string from a copy of the chart)."""
    import shutil

    chart = Path(shutil.copytree(CHART, tmp_path / "chart"))
    notes = (chart / "templates" / "NOTES.txt").read_text()
    indented = "".join(f"  {line}\n" for line in notes.splitlines())
    (chart / "templates" / "notes-as-yaml.yaml").write_text(f"notes: |\n{indented}")
    args = ["template", "kro", str(chart), "--namespace", "ops"]
    args += [a for value in sets for a in ("--set", value)]
    out = _helm(helm, *args, "--show-only", "templates/notes-as-yaml.yaml").stdout
    return str(yaml.safe_load(out)["notes"])


def test_notes_say_how_to_build_and_load_an_image_without_a_registry(
    helm: Path, tmp_path: Path
) -> None:
    notes = _notes(helm, tmp_path)
    assert "kind load docker-image kafka-rebalance-operator:0.1.0" in notes
    assert "ctr -n k8s.io images import images/kafka-rebalance-operator-0.1.0.oci.tar" in notes
    assert "names it docker.io/library/kafka-rebalance-operator:0.1.0" in notes
    assert "images tag" not in notes  # the archive's own name is the kubelet's
    assert "set image.registry (or global.imageRegistry)" in notes
    assert "defaults to observe" in notes


@pytest.mark.parametrize("value", ["image.registry=ghcr.io/acme", "global.imageRegistry=reg.io"])
def test_notes_say_nothing_of_kind_when_a_registry_serves_the_image(
    helm: Path, tmp_path: Path, value: str
) -> None:
    assert "kind load" not in _notes(helm, tmp_path, value)
