"""The CRD's validation, enforced by a real kube-apiserver.

Every refusal is what `kubectl apply` of a bad policy gets: the API server evaluates the
OpenAPI schema and the CEL rules of crds/consumergrouppolicies.yaml. Each case asserts that the
error names the offending field, since a refusal that does not say where is the user's problem
to decode. Every example policy (one per strategy) must be accepted as it is shipped.
"""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "consumergrouppolicies.yaml"
EXAMPLES = ROOT / "examples"
POLICY_EXAMPLES = sorted((EXAMPLES / "policies").glob("*.yaml"))

BASE: dict[str, Any] = {
    "apiVersion": "kafka-rebalance.io/v1alpha1",
    "kind": "ConsumerGroupPolicy",
    "metadata": {"name": "orders"},
    "spec": {
        "groupId": "orders-processor",
        "kafka": {"bootstrapServers": "kafka:9092"},
        "topics": ["orders"],
        "members": {"selector": {"matchLabels": {"app": "orders"}}},
    },
}


def _run(k8s: Any, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(k8s.tools.kubectl), f"--kubeconfig={k8s.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _create(k8s: Any, namespace: str, document: dict[str, Any] | str):
    text = document if isinstance(document, str) else json.dumps(document)
    return _run(k8s, ["-n", namespace, "create", "-f", "-"], text)


@pytest.fixture(scope="module")
def crd(k8s: Any) -> None:
    """Install the CRD the way a user would (server-side apply) and wait until it serves."""
    result = _run(k8s, ["apply", "--server-side", "-f", str(CRD)])
    assert result.returncode == 0, result.stderr
    result = _run(
        k8s,
        [
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/consumergrouppolicies.kafka-rebalance.io",
        ],
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def api(k8s: Any) -> Iterator[Any]:
    """An API client for the tests' own plumbing (namespaces, listing); what a user meets (the
    refusals, the stored objects, the printer columns) goes through kubectl."""
    client = k8s.api_client()
    yield client
    client.close()


@pytest.fixture
def namespace(api: Any, crd: None) -> str:
    """A fresh namespace per test, so a policy one case wrongly let in is seen by that case."""
    from kubernetes import client

    name = f"cgp-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def _stored(api: Any, namespace: str) -> list[str]:
    """The names of the policies stored in `namespace`."""
    from kubernetes import client

    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "kafka-rebalance.io", "v1alpha1", namespace, "consumergrouppolicies"
    )
    return [item["metadata"]["name"] for item in listed["items"]]


def _with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    policy = copy.deepcopy(BASE)
    change(policy["spec"])
    return policy


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = spec
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda spec: spec.pop(key)


# (case id, mutation of BASE.spec, text the API server's refusal must contain)
REFUSED: list[tuple[str, Callable[[dict[str, Any]], None], list[str]]] = [
    (
        "unknown-strategy",
        _set("strategy", "least-loaded"),
        ["spec.strategy", 'Unsupported value: "least-loaded"'],
    ),
    ("missing-groupId", _drop("groupId"), ["spec.groupId", "Required value"]),
    ("empty-groupId", _set("groupId", ""), ["spec.groupId"]),
    ("groupId-bad-chars", _set("groupId", "orders processor/1"), ["spec.groupId"]),
    (
        "weight-zero",
        _set("members.weights", [{"selector": {"matchLabels": {"size": "l"}}, "weight": 0}]),
        ["spec.members.weights[0].weight", "should be greater than 0"],
    ),
    (
        "weight-negative",
        _set("members.weights", [{"selector": {"matchLabels": {"size": "l"}}, "weight": -2}]),
        ["spec.members.weights[0].weight", "should be greater than 0"],
    ),
    (
        "weight-missing",
        _set("members.weights", [{"selector": {"matchLabels": {"size": "l"}}}]),
        ["spec.members.weights[0].weight", "Required value"],
    ),
    ("unknown-weightFrom", _set("members.weightFrom", "memory"), ["spec.members.weightFrom"]),
    (
        "pollInterval-below-floor",
        _set("rebalance.pollInterval", "500ms"),
        ["spec.rebalance.pollInterval", "must be at least 1s, got 500ms"],
    ),
    (
        "pollInterval-ms-below-floor",
        _set("rebalance.pollInterval", "999ms"),
        ["spec.rebalance.pollInterval", "must be at least 1s"],
    ),
    (
        "pollInterval-not-a-duration",
        _set("rebalance.pollInterval", "30 seconds"),
        ["spec.rebalance.pollInterval"],
    ),
    ("cooldown-not-a-duration", _set("rebalance.cooldown", "5"), ["spec.rebalance.cooldown"]),
    (
        "maxMoves-zero",
        _set("rebalance.maxMovesPerRound", 0),
        ["spec.rebalance.maxMovesPerRound", "integer >= 1 or a percentage from 1% to 100%"],
    ),
    (
        "maxMoves-zero-percent",
        _set("rebalance.maxMovesPerRound", "0%"),
        ["spec.rebalance.maxMovesPerRound"],
    ),
    (
        "maxMoves-over-100-percent",
        _set("rebalance.maxMovesPerRound", "101%"),
        ["spec.rebalance.maxMovesPerRound"],
    ),
    (
        "maxMoves-number-as-string",
        _set("rebalance.maxMovesPerRound", "5"),
        ["spec.rebalance.maxMovesPerRound"],
    ),
    (
        "topics-and-topicPattern",
        _set("topicPattern", "orders.*"),
        ["spec.topicPattern", "mutually exclusive"],
    ),
    ("neither-topics-nor-pattern", _drop("topics"), ["spec.topics", "is required"]),
    (
        "topicPattern-lookahead",
        lambda spec: (_drop("topics")(spec), _set("topicPattern", "orders-(?!test).*")(spec)),
        ["spec.topicPattern", "lookarounds", "RE2 syntax"],
    ),
    (
        "topicPattern-atomic-group",
        lambda spec: (_drop("topics")(spec), _set("topicPattern", "(?>orders|payments)-.*")(spec)),
        ["spec.topicPattern", "atomic groups"],
    ),
    ("empty-topics", _set("topics", []), ["spec.topics"]),
    ("bad-topic-name", _set("topics", ["orders!"]), ["spec.topics[0]"]),
    ("missing-bootstrap", _set("kafka", {}), ["spec.kafka.bootstrapServers", "Required value"]),
    (
        "bootstrap-without-port",
        _set("kafka.bootstrapServers", "kafka"),
        ["spec.kafka.bootstrapServers"],
    ),
    ("missing-selector", _set("members", {}), ["spec.members.selector", "Required value"]),
    (
        "empty-selector",
        _set("members.selector", {}),
        ["spec.members.selector", "must not be empty"],
    ),
    (
        "selector-In-without-values",
        _set("members.selector", {"matchExpressions": [{"key": "app", "operator": "In"}]}),
        ["spec.members.selector.matchExpressions[0]", "In and NotIn need values"],
    ),
    ("unknown-load-model", _set("load.model", "bytes"), ["spec.load.model"]),
    (
        "targetDrainSeconds-zero",
        _set("load.targetDrainSeconds", 0),
        ["spec.load.targetDrainSeconds", "should be greater than or equal to 1"],
    ),
    ("unknown-offsetResetPolicy", _set("load.offsetResetPolicy", "none"), ["offsetResetPolicy"]),
    ("unknown-mode", _set("rebalance.mode", "auto"), ["spec.rebalance.mode"]),
    ("unknown-approval", _set("rebalance.approval", "manual"), ["spec.rebalance.approval"]),
    ("minImprovement-one", _set("rebalance.minImprovement", 1), ["spec.rebalance.minImprovement"]),
    (
        "minImprovement-negative",
        _set("rebalance.minImprovement", -0.1),
        ["spec.rebalance.minImprovement"],
    ),
    ("unknown-countBalance", _set("rebalance.countBalance", "exact"), ["countBalance"]),
    ("unknown-apply-mode", _set("apply.mode", "subscribe"), ["spec.apply.mode"]),
    ("unknown-field", _set("stratgy", "range"), ['unknown field "spec.stratgy"']),
    ("unknown-groupType", _set("groupType", "queue"), ["spec.groupType", "Unsupported value"]),
    (
        "streams-without-broker-mode",
        _set("groupType", "streams"),
        ["spec.groupType: Invalid value: spec.groupType streams and share require spec.apply"],
    ),
    (
        "streams-in-assign-mode",
        lambda spec: (_set("groupType", "streams")(spec), _set("apply.mode", "assign")(spec)),
        ["spec.groupType", "streams and share require spec.apply.mode broker"],
    ),
    (
        "share-in-group-mode",
        lambda spec: (_set("groupType", "share")(spec), _set("apply.mode", "group")(spec)),
        ["spec.groupType", "streams and share require spec.apply.mode broker"],
    ),
]


@pytest.mark.parametrize(
    ("change", "expected"),
    [pytest.param(change, expected, id=case) for case, change, expected in REFUSED],
)
def test_api_server_refuses_bad_policy_naming_the_field(
    k8s: Any,
    api: Any,
    namespace: str,
    change: Callable[[dict[str, Any]], None],
    expected: list[str],
) -> None:
    result = _create(k8s, namespace, _with(change))
    assert result.returncode != 0, "the API server accepted an invalid policy"
    for text in expected:
        assert text in result.stderr, result.stderr
    assert _stored(api, namespace) == []


def test_a_policy_name_with_a_dot_is_refused_naming_why(k8s: Any, namespace: str) -> None:
    """ConfigMaps are `<policy>.<pod>`: a dot in the policy name would let two collide."""
    dotted = copy.deepcopy(BASE)
    dotted["metadata"]["name"] = "orders.eu"
    result = _create(k8s, namespace, dotted)
    assert result.returncode != 0, "the API server accepted a dotted policy name"
    assert "metadata.name may not contain '.'" in result.stderr, result.stderr


def test_the_base_policy_is_accepted_and_defaulted(k8s: Any, namespace: str) -> None:
    """The refusals above are caused by their one change, not by a bad base."""
    result = _create(k8s, namespace, BASE)
    assert result.returncode == 0, result.stderr
    spec = json.loads(k8s.kubectl("-n", namespace, "get", "cgp", "orders", "-o", "json").stdout)[
        "spec"
    ]
    assert spec["strategy"] == "lag-aware"
    assert spec["load"] == {"targetDrainSeconds": 300, "offsetResetPolicy": "earliest"}
    assert spec["rebalance"] == {
        "mode": "observe",
        "approval": "Auto",
        "pollInterval": "30s",
        "cooldown": "5m",
        "minImprovement": 0.1,
        "countBalance": "relaxed",
    }
    assert spec["apply"] == {"mode": "group", "handoffTimeout": "60s"}
    assert spec["groupType"] == "consumer"


@pytest.mark.parametrize("group_type", ["streams", "share"])
def test_a_streams_or_share_policy_in_broker_mode_needs_no_topics(
    k8s: Any, namespace: str, group_type: str
) -> None:
    policy = _with(
        lambda spec: (
            _drop("topics")(spec),
            _set("groupType", group_type)(spec),
            _set("apply.mode", "broker")(spec),
        )
    )
    result = _create(k8s, namespace, policy)
    assert result.returncode == 0, result.stderr


def test_group_type_is_immutable(k8s: Any, namespace: str) -> None:
    assert _create(k8s, namespace, _with(_set("apply.mode", "broker"))).returncode == 0
    patch = json.dumps({"spec": {"groupType": "streams"}})
    result = _run(k8s, ["-n", namespace, "patch", "cgp", "orders", "--type=merge", "-p", patch])
    assert result.returncode != 0
    assert "spec.groupType: Forbidden: spec.groupType is immutable" in result.stderr, result.stderr


@pytest.mark.parametrize("pattern", ["([a-z]+-?)*x", "(?P<env>eu|us)-orders", "(?i)orders\\..*"])
def test_re2_topic_patterns_are_accepted(k8s: Any, namespace: str, pattern: str) -> None:
    result = _create(
        k8s,
        namespace,
        _with(lambda spec: (_drop("topics")(spec), _set("topicPattern", pattern)(spec))),
    )
    assert result.returncode == 0, result.stderr


def test_a_cluster_ca_secret_reference_is_kept(k8s: Any, namespace: str) -> None:
    """spec.kafka.caSecretRef (a Strimzi cluster CA Secret) survives the API server's pruning."""
    result = _create(
        k8s,
        namespace,
        _with(
            lambda spec: (
                _set("kafka.secretRef", {"name": "orders-user"})(spec),
                _set("kafka.caSecretRef", {"name": "my-cluster-cluster-ca-cert"})(spec),
            )
        ),
    )
    assert result.returncode == 0, result.stderr
    kafka = json.loads(k8s.kubectl("-n", namespace, "get", "cgp", "orders", "-o", "json").stdout)[
        "spec"
    ]["kafka"]
    assert kafka["caSecretRef"] == {"name": "my-cluster-cluster-ca-cert"}


@pytest.mark.parametrize(
    "value", [1, 40, "1%", "25%", "100%"], ids=lambda v: f"maxMoves={v}".replace("%", "pct")
)
def test_move_budget_boundaries_are_accepted(k8s: Any, namespace: str, value: Any) -> None:
    result = _create(k8s, namespace, _with(_set("rebalance.maxMovesPerRound", value)))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("value", ["1s", "1000ms", "2s", "5s", "1m", "1h30m", "7.5s"])
def test_poll_interval_at_or_above_the_floor_is_accepted(
    k8s: Any, namespace: str, value: str
) -> None:
    result = _create(k8s, namespace, _with(_set("rebalance.pollInterval", value)))
    assert result.returncode == 0, result.stderr


def test_group_id_is_immutable(k8s: Any, namespace: str) -> None:
    assert _create(k8s, namespace, BASE).returncode == 0
    patch = json.dumps({"spec": {"groupId": "another-group"}})
    result = _run(k8s, ["-n", namespace, "patch", "cgp", "orders", "--type=merge", "-p", patch])
    assert result.returncode != 0
    assert "spec.groupId" in result.stderr and "immutable" in result.stderr, result.stderr
    other = json.dumps({"spec": {"strategy": "sticky"}})
    result = _run(k8s, ["-n", namespace, "patch", "cgp", "orders", "--type=merge", "-p", other])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", POLICY_EXAMPLES, ids=lambda p: p.stem)
def test_every_example_policy_is_accepted(k8s: Any, namespace: str, path: Path) -> None:
    result = _run(k8s, ["-n", namespace, "apply", "-f", str(path)])
    assert result.returncode == 0, result.stderr
    name = yaml.safe_load(path.read_text())["metadata"]["name"]
    stored = json.loads(k8s.kubectl("-n", namespace, "get", "cgp", name, "-o", "json").stdout)
    assert stored["spec"]["strategy"] == path.stem


def test_example_consumer_and_secret_pass_server_side_validation(k8s: Any, namespace: str) -> None:
    for name in ("consumer-statefulset.yaml", "kafka-client-secret.yaml"):
        result = _run(
            k8s, ["-n", namespace, "apply", "--dry-run=server", "-f", str(EXAMPLES / name)]
        )
        assert result.returncode == 0, f"{name}: {result.stderr}"


def test_status_subresource_and_printer_columns(k8s: Any, namespace: str) -> None:
    """The operator writes status through /status; `kubectl get cgp` shows it in columns."""
    assert _create(k8s, namespace, BASE).returncode == 0
    status = {
        "status": {
            "observedGeneration": 1,
            "epoch": 12,
            "members": 3,
            "totalLag": 160012,
            "maxLoadRatio": 1.25,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Balanced",
                    "message": "assignment matches epoch 12",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ],
            "proposal": {"hash": "abc123", "moves": 4, "before": 1.9, "after": 1.25},
        }
    }
    result = _run(
        k8s,
        [
            "-n",
            namespace,
            "patch",
            "cgp",
            "orders",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
        ],
    )
    assert result.returncode == 0, result.stderr
    # A status written through the main resource is ignored (the subresource owns it).
    _run(
        k8s,
        [
            "-n",
            namespace,
            "patch",
            "cgp",
            "orders",
            "--type=merge",
            "-p",
            json.dumps({"status": {"epoch": 99}}),
        ],
    )
    table = k8s.kubectl("-n", namespace, "get", "cgp", "orders").stdout.splitlines()
    header = table[0].split()
    row = table[1].split()
    assert header == [
        "NAME",
        "STRATEGY",
        "MEMBERS",
        "TOTAL",
        "LAG",
        "IMBALANCE",
        "EPOCH",
        "READY",
        "AGE",
    ]
    assert row[:7] == ["orders", "lag-aware", "3", "160012", "1.25", "12", "True"]

    bad = {"status": {"conditions": [{"type": "Ready", "status": "Yes"}]}}
    result = _run(
        k8s,
        [
            "-n",
            namespace,
            "patch",
            "cgp",
            "orders",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(bad),
        ],
    )
    assert result.returncode != 0
    assert "status.conditions[0].status" in result.stderr, result.stderr


def test_short_name_and_category_resolve(k8s: Any, namespace: str) -> None:
    assert _create(k8s, namespace, BASE).returncode == 0
    for kind in ("cgp", "consumergrouppolicy", "kafka-rebalance"):
        out = k8s.kubectl("-n", namespace, "get", kind, "-o", "name").stdout.split()
        assert out == ["consumergrouppolicy.kafka-rebalance.io/orders"], kind
