"""sidecar_annotations.read and what injection builds from it, webhook_outcomes and the event
helpers (pure parts; the webhook itself meets the real API server in
tests/integration/test_webhook_edges.py)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from kafka_rebalance_operator import metrics
from kafka_rebalance_operator.webhook import events as webhook_events
from kafka_rebalance_operator.webhook import outcomes as webhook_outcomes
from kafka_rebalance_operator.webhook import sidecar_annotations
from kafka_rebalance_operator.webhook.injection import SIDECAR_CONTAINER, SidecarDefaults, inject
from kafka_rebalance_operator.webhook.sidecar_annotations import (
    CPU_LIMIT,
    CPU_REQUEST,
    DELIVER_PATH,
    DELIVER_PORT,
    LOG_LEVEL,
    MEMORY_LIMIT,
    MEMORY_REQUEST,
)

from kafka_rebalance import sidecar_command

DEFAULTS = SidecarDefaults(image="kafka-rebalance-operator:0.1.0")  # health 8081, metrics 9101
SPEC = {
    "groupId": "orders-processor",
    "topics": ["orders"],
    "kafka": {"bootstrapServers": "kafka:9092"},
}


def read(**annotations: str) -> tuple[SidecarDefaults, list[sidecar_annotations.Problem]]:
    return sidecar_annotations.read(annotations, DEFAULTS)


def test_no_annotation_leaves_the_defaults() -> None:
    assert read() == (DEFAULTS, [])


def test_good_annotations_replace_the_port_path_resources_and_level() -> None:
    settings, problems = sidecar_annotations.read(
        {
            DELIVER_PORT: "9000",
            DELIVER_PATH: "/v1/batches",
            CPU_REQUEST: "250m",
            CPU_LIMIT: "1",
            MEMORY_REQUEST: " 64Mi ",
            MEMORY_LIMIT: "1Gi",
            LOG_LEVEL: "DEBUG",
        },
        DEFAULTS,
    )
    assert problems == []
    assert settings.deliver_to == "http://127.0.0.1:9000/v1/batches"
    assert settings.resources == {
        "requests": {"cpu": "250m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    assert settings.log_level == "debug"
    assert DEFAULTS.resources["requests"]["cpu"] == "100m"  # the defaults are not changed


def test_the_sidecar_gets_the_settings_as_flags_and_resources() -> None:
    settings, _ = read(**{DELIVER_PORT: "9000", LOG_LEVEL: "warning", CPU_LIMIT: "2"})
    pod = {"metadata": {"name": "orders-0"}, "spec": {"containers": [{"name": "app"}]}}
    injected = inject(pod, "orders", SPEC, settings)
    (sidecar,) = [c for c in injected.containers if c["name"] == SIDECAR_CONTAINER]
    assert "--deliver-to=http://127.0.0.1:9000/records" in sidecar["args"]
    assert sidecar["args"][-1] == "--log-level=warning"  # after extra args: the pod's wins
    assert sidecar["resources"]["limits"] == {"memory": "256Mi", "cpu": "2"}
    parsed = argparse.ArgumentParser()
    sidecar_command.register(parsed.add_subparsers())
    args = parsed.parse_args(["sidecar", *sidecar["args"]])
    assert args.log_level == "warning" and args.deliver_to.endswith(":9000/records")


def test_without_a_level_no_log_flag_is_added() -> None:
    pod = {"metadata": {"name": "orders-0"}, "spec": {"containers": [{"name": "app"}]}}
    (sidecar,) = [
        c
        for c in inject(pod, "orders", SPEC, DEFAULTS).containers
        if c["name"] == "kafka-rebalance"
    ]
    assert not [a for a in sidecar["args"] if a.startswith("--log-level")]


@pytest.mark.parametrize(
    ("annotation", "value", "rule"),
    [
        (DELIVER_PORT, "0", "1-65535"),
        (DELIVER_PORT, "65536", "1-65535"),
        (DELIVER_PORT, "http", "1-65535"),
        (DELIVER_PORT, "+80", "1-65535"),
        (DELIVER_PORT, "8081", "own 8081 and 9101"),  # the sidecar's health port
        (DELIVER_PORT, "9101", "own 8081 and 9101"),  # its metrics port
        (DELIVER_PATH, "records", "starting with '/'"),
        (DELIVER_PATH, "/a b", "without spaces"),
        (DELIVER_PATH, "", "starting with '/'"),
        (CPU_REQUEST, "lots", "Kubernetes quantity"),
        (CPU_LIMIT, "-1", "not negative"),
        (MEMORY_REQUEST, "1GB", "Kubernetes quantity"),
        (MEMORY_LIMIT, "1Gi ram", "Kubernetes quantity"),
        (LOG_LEVEL, "trace", "one of debug, info, warning, error"),
    ],
)
def test_a_bad_value_is_left_out_and_named_with_its_rule(
    annotation: str, value: str, rule: str
) -> None:
    settings, problems = read(**{annotation: value})
    assert settings == DEFAULTS
    (problem,) = problems
    assert (problem.annotation, problem.value) == (annotation, value)
    message = problem.message()
    assert message.startswith(f"{annotation}: {value!r} ignored, it must be")
    assert rule in message and "the default" in message and "\n" not in message


def test_the_message_names_the_default_used() -> None:
    (port,) = read(**{DELIVER_PORT: "8081"})[1]
    assert port.message().endswith("the default 8000 is used")
    (memory,) = read(**{MEMORY_REQUEST: "x"})[1]
    assert memory.message().endswith("the default 128Mi is used")
    (cpu,) = read(**{CPU_LIMIT: "x"})[1]
    assert cpu.message().endswith("the default (none) is used")


def test_a_request_above_the_default_limit_is_left_out() -> None:
    settings, problems = read(**{MEMORY_REQUEST: "512Mi"})  # the chart's limit is 256Mi
    assert settings.resources == DEFAULTS.resources
    (problem,) = problems
    assert problem.annotation == MEMORY_REQUEST
    assert "at most the memory limit 256Mi" in problem.message()


def test_a_limit_below_the_default_request_is_left_out() -> None:
    settings, problems = read(**{CPU_LIMIT: "50m"})  # the chart requests 100m
    assert settings.resources == DEFAULTS.resources
    (problem,) = problems
    assert "at least the cpu request 100m" in problem.message()


def test_a_request_above_its_annotated_limit_leaves_both_out_and_the_other_resource_in() -> None:
    settings, problems = read(
        **{CPU_REQUEST: "2", CPU_LIMIT: "1", MEMORY_REQUEST: "200Mi", MEMORY_LIMIT: "300Mi"}
    )
    assert sorted(p.annotation for p in problems) == [CPU_LIMIT, CPU_REQUEST]
    assert settings.resources == {
        "requests": {"cpu": "100m", "memory": "200Mi"},
        "limits": {"memory": "300Mi"},
    }


def test_equal_request_and_limit_and_a_raised_pair_are_kept() -> None:
    settings, problems = read(**{MEMORY_REQUEST: "1Gi", MEMORY_LIMIT: "1024Mi"})
    assert problems == []
    assert settings.resources["requests"]["memory"] == "1Gi"
    assert settings.resources["limits"]["memory"] == "1024Mi"


def test_one_bad_annotation_does_not_spoil_the_good_ones() -> None:
    settings, problems = read(**{DELIVER_PORT: "99999", DELIVER_PATH: "/in", LOG_LEVEL: "error"})
    assert [p.annotation for p in problems] == [DELIVER_PORT]
    assert settings.deliver_to == "http://127.0.0.1:8000/in"
    assert settings.log_level == "error"


def test_the_port_replaces_only_the_port_of_the_charts_url() -> None:
    defaults = SidecarDefaults(image="i", deliver_to="https://[::1]:8443/r?x=1")
    settings, _ = sidecar_annotations.read({DELIVER_PORT: "9443"}, defaults)
    assert settings.deliver_to == "https://[::1]:9443/r?x=1"
    defaults = SidecarDefaults(image="i", deliver_to="http://localhost/r", metrics_port=0)
    settings, problems = sidecar_annotations.read({DELIVER_PORT: "9101"}, defaults)
    assert problems == [] and settings.deliver_to == "http://localhost:9101/r"


def test_other_annotations_are_ignored() -> None:
    assert read(**{"kafka-rebalance.io/unknown": "x", "example.com/port": "1"}) == (DEFAULTS, [])


def test_every_outcome_is_counted_once_with_a_listed_reason() -> None:
    def sample(outcome: str, reason: str) -> float:
        return float(
            metrics.REGISTRY.get_sample_value(
                "kafka_rebalance_webhook_pods_total", {"outcome": outcome, "reason": reason}
            )
            or 0.0
        )

    before = sample("mutated", "defaults_used")
    webhook_outcomes.count("ns", "orders", "mutated", "defaults_used")
    assert sample("mutated", "defaults_used") == before + 1
    with pytest.raises(ValueError, match="not one of the listed"):
        webhook_outcomes.count("ns", "orders", "mutated", "a-pod-name")


def test_errors_map_onto_three_reasons() -> None:
    from kubernetes.client.rest import ApiException

    assert webhook_outcomes.reason_of(TimeoutError()) == "api_timeout"
    assert webhook_outcomes.reason_of(ApiException(status=500)) == "api_error"
    assert webhook_outcomes.reason_of(ConnectionResetError()) == "api_error"
    assert webhook_outcomes.reason_of(KeyError("x")) == "internal"


def _pod(**metadata: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", **metadata}}


def test_the_event_goes_to_the_pods_controller_else_the_pod_else_nowhere() -> None:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d", "uid": "u1"}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2"}
    assert webhook_events.pod_reference(
        _pod(generateName="web-7d-", ownerReferences=[other, {**owner, "controller": True}])
    ) == {**owner, "namespace": "shop"}
    assert webhook_events.pod_reference(_pod(name="solo", ownerReferences=[other])) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "solo",
        "namespace": "shop",
    }
    assert webhook_events.pod_reference(_pod(generateName="solo-")) is None


def test_the_throttle_lets_one_event_per_key_and_window_through() -> None:
    throttle = webhook_events.Throttle(window_s=60, size=2)
    assert throttle.due("a", now=0)
    assert not throttle.due("a", now=59)
    assert throttle.due("b", now=59)
    assert throttle.due("a", now=61)
    assert throttle.due("c", now=62)  # "b" is forgotten: at most two keys are kept
    assert throttle.due("b", now=63)


def test_the_operators_sidecar_log_level_flag_is_the_default_an_annotation_overrides() -> None:
    from kafka_rebalance import operator_command

    parser = argparse.ArgumentParser()
    operator_command.register(parser.add_subparsers())
    flags = ["operator", "--webhook-port=9443", "--sidecar-image=i", "--sidecar-log-level=error"]
    config = operator_command._webhook_config(parser.parse_args(flags))
    defaults = config.sidecar  # type: ignore[attr-defined]
    assert defaults.log_level == "error"
    assert sidecar_annotations.read({}, defaults)[0].log_level == "error"
    assert sidecar_annotations.read({LOG_LEVEL: "info"}, defaults)[0].log_level == "info"
    with pytest.raises(SystemExit):
        parser.parse_args([*flags[:-1], "--sidecar-log-level=trace"])


@pytest.mark.parametrize(
    ("flags", "root", "kafka"),
    [([], "INFO", "WARNING"), (["--log-level=error"], "ERROR", "ERROR"), (["-v"], "DEBUG", "")],
)
def test_the_sidecars_log_level_sets_its_loggers(
    flags: list[str], root: str, kafka: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    parser = argparse.ArgumentParser()
    sidecar_command.register(parser.add_subparsers())
    args = parser.parse_args(
        [
            "sidecar",
            "--bootstrap-servers=b",
            "--group=g",
            "--topics=t",
            "--member=m",
            "--assignment=a.json",
            "--deliver-to=http://127.0.0.1:1/r",
            *flags,
        ]
    )
    root_logger = logging.getLogger()
    kept = (root_logger.level, list(root_logger.handlers))
    monkeypatch.setattr(root_logger, "handlers", [])
    for name in ("kafka", "kubernetes"):
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    try:
        sidecar_command._configure_logging(args)
        assert logging.getLevelName(root_logger.level) == root
        assert logging.getLevelName(logging.getLogger("kafka").level) == (kafka or "NOTSET")
    finally:
        root_logger.setLevel(kept[0])
