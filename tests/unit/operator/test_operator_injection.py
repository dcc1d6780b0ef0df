"""injection.inject: what an annotated pod gets (pure; the webhook itself is tested on the real
API server in tests/integration/test_injection_webhook.py)."""

from __future__ import annotations

import argparse
import copy
import re
from typing import Any

import pytest
from kafka_rebalance_operator.webhook.injection import (
    SIDECAR_CONTAINER,
    InjectionError,
    SidecarDefaults,
    inject,
)

from kafka_rebalance import operator_command

SPEC = {
    "groupId": "orders-processor",
    "topics": ["orders", "payments"],
    "kafka": {"bootstrapServers": "kafka:9092"},
    "apply": {"mode": "group"},
}
DEFAULTS = SidecarDefaults(image="kafka-rebalance-operator:0.1.0")


def pod(name: str = "orders-3", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {"kafka-rebalance.io/policy": "orders", **annotations},
        },
        "spec": {
            "containers": [{"name": "app", "image": "app:1"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }


def sidecar(containers: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [c for c in containers if c["name"] == SIDECAR_CONTAINER]
    return found


def test_a_statefulset_pod_watches_its_own_configmap_by_its_exact_name() -> None:
    injected = inject(pod(), "orders", SPEC, DEFAULTS)
    args = sidecar(injected.containers)["args"]
    assert "--assignment-configmap=orders.orders-3" in args
    assert "--group=orders-processor" in args
    assert "--topics=orders,payments" in args
    assert "--bootstrap-servers=kafka:9092" in args
    assert injected.configmap == "orders.orders-3" and injected.watches
    assert [c["name"] for c in injected.containers] == ["app", SIDECAR_CONTAINER]
    assert injected.volumes[0] == {"name": "data", "emptyDir": {}}


def test_a_pod_without_a_name_yet_watches_through_the_downward_api() -> None:
    injected = inject(pod(name=""), "orders", SPEC, DEFAULTS)
    args = sidecar(injected.containers)["args"]
    assert "--assignment-configmap=orders.$(POD_NAME)" in args
    env = {e["name"] for e in sidecar(injected.containers)["env"]}
    assert {"POD_NAME", "POD_NAMESPACE"} <= env
    assert injected.configmap is None and injected.watches


def test_the_file_source_mounts_the_pods_own_configmap_without_a_per_ordinal_list() -> None:
    injected = inject(pod(), "orders", SPEC, SidecarDefaults(image="i", source="file"))
    (volume,) = [v for v in injected.volumes if "configMap" in v]
    assert volume["configMap"]["name"] == "orders.orders-3"
    assert (
        "--assignment=/etc/kafka-rebalance/assignment.json" in sidecar(injected.containers)["args"]
    )
    assert not injected.watches


def test_the_file_source_falls_back_to_the_watch_when_the_name_is_not_known() -> None:
    injected = inject(pod(name=""), "orders", SPEC, SidecarDefaults(image="i", source="file"))
    assert injected.watches
    assert not [v for v in injected.volumes if "configMap" in v]


def test_probes_resources_and_restricted_security_come_with_the_sidecar() -> None:
    container = sidecar(inject(pod(), "orders", SPEC, DEFAULTS).containers)
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8081}
    assert container["resources"]["requests"]["cpu"] == "100m"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_pod_injected_already_is_left_as_it_is() -> None:
    once = inject(pod(), "orders", SPEC, DEFAULTS)
    again = copy.deepcopy(pod())
    again["spec"]["containers"], again["spec"]["volumes"] = once.containers, once.volumes
    twice = inject(again, "orders", SPEC, DEFAULTS)
    assert twice.containers == once.containers and twice.volumes == once.volumes


def test_the_topics_annotation_serves_a_policy_with_a_topic_pattern() -> None:
    spec = {**SPEC, "topics": None, "topicPattern": "orders-.*"}
    with pytest.raises(InjectionError, match=r"kafka-rebalance\.io/topics"):
        inject(pod(), "orders", spec, DEFAULTS)
    injected = inject(
        pod(**{"kafka-rebalance.io/topics": "orders-eu, orders-us"}), "orders", spec, DEFAULTS
    )
    assert "--topics=orders-eu,orders-us" in sidecar(injected.containers)["args"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({**SPEC, "apply": {"mode": "broker"}}, "apply.mode broker"),
        ({**SPEC, "groupId": None}, "spec.groupId"),
        ({**SPEC, "kafka": {}}, "spec.kafka.bootstrapServers"),
    ],
)
def test_a_policy_the_sidecar_cannot_follow_is_refused_naming_why(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(InjectionError, match=message):
        inject(pod(), "orders", spec, DEFAULTS)


def test_a_reserved_volume_name_is_refused() -> None:
    taken = pod()
    taken["spec"]["volumes"].append({"name": "kafka-rebalance-tmp", "emptyDir": {}})
    with pytest.raises(InjectionError, match="reserved"):
        inject(taken, "orders", SPEC, DEFAULTS)


def test_an_unknown_source_is_refused() -> None:
    with pytest.raises(InjectionError, match="watch or file"):
        SidecarDefaults(image="i", source="both")


def _operator_args(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    operator_command.register(parser.add_subparsers())
    return parser.parse_args(["operator", *flags])


def test_the_webhook_is_off_unless_a_port_is_given() -> None:
    assert operator_command._webhook_config(_operator_args()) is None


def test_the_flags_reach_the_sidecar_defaults() -> None:
    config = operator_command._webhook_config(
        _operator_args(
            "--webhook-port=9443",
            "--sidecar-image=img:1",
            "--sidecar-env=HTTPS_PROXY=http://proxy:3128",
            "--sidecar-resources",
            '{"requests": {"cpu": "50m"}}',
        )
    )
    assert config is not None
    sidecar = config.sidecar  # type: ignore[attr-defined]
    assert sidecar.image == "img:1"
    assert sidecar.extra_env == (("HTTPS_PROXY", "http://proxy:3128"),)
    assert sidecar.resources == {"requests": {"cpu": "50m"}}
    assert config.cert_secret is None  # type: ignore[attr-defined]


def test_the_shared_certificate_secret_is_namespace_and_name() -> None:
    config = operator_command._webhook_config(
        _operator_args(
            "--webhook-port=9443", "--sidecar-image=i", "--webhook-cert-secret=ops/kro-tls"
        )
    )
    assert config is not None
    assert config.cert_secret == ("ops", "kro-tls")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--webhook-port=9443",), "--webhook-port needs --sidecar-image"),
        (("--webhook-port=9443", "--sidecar-image=i", "--sidecar-env=NOVALUE"), "NAME=VALUE"),
        (("--webhook-port=9443", "--sidecar-image=i", "--sidecar-resources={"), "not JSON"),
        (("--webhook-port=9443", "--sidecar-image=i", "--sidecar-resources=[]"), "JSON object"),
        (
            ("--webhook-port=9443", "--sidecar-image=i", "--webhook-cert-secret=tls"),
            "NAMESPACE/NAME",
        ),
        (
            ("--webhook-port=9443", "--sidecar-image=i", "--webhook-cert-secret=ops/a/b"),
            "NAMESPACE/NAME",
        ),
        (
            (
                "--webhook-port=9443",
                "--sidecar-image=i",
                "--webhook-cert-secret=ops/tls",
                "--webhook-cert-dir=/certs",
            ),
            "exclude each other",
        ),
    ],
)
def test_bad_webhook_flags_are_refused_naming_the_flag(
    flags: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        operator_command._webhook_config(_operator_args(*flags))


def test_the_injection_example_gets_its_sidecar_from_the_example_policy() -> None:
    """examples/consumer-statefulset-injected.yaml with examples/policies/lag-aware.yaml."""
    import pathlib

    import yaml

    examples = pathlib.Path(__file__).resolve().parents[3] / "examples"
    (statefulset,) = [
        d
        for d in yaml.safe_load_all((examples / "consumer-statefulset-injected.yaml").read_text())
        if d["kind"] == "StatefulSet"
    ]
    policy = yaml.safe_load((examples / "policies" / "lag-aware.yaml").read_text())
    template = statefulset["spec"]["template"]
    name = template["metadata"]["annotations"]["kafka-rebalance.io/policy"]
    assert name == policy["metadata"]["name"]
    pod = {"metadata": {**template["metadata"], "name": "orders-7"}, "spec": template["spec"]}
    injected = inject(pod, name, policy["spec"], DEFAULTS)
    args = sidecar(injected.containers)["args"]
    assert "--assignment-configmap=orders.orders-7" in args
    assert f"--group={policy['spec']['groupId']}" in args
