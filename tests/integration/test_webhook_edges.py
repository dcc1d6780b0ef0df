"""The injection webhook never blocks a rollout it was told not to block, on the real API server.

The webhook runs in this process (webhook.start: its own kopf operator on a thread) and the API
server calls it over TLS. kopf's own watches log in with the admin kubeconfig; the webhook's
API calls during admission (reading a policy, granting the pod's document through the policy's
Role and RoleBinding) go through a TCP relay in this test that can pass bytes, reset
connections (an unreachable API) or swallow them (a slow one). With failurePolicy Ignore the
pod must then be admitted, unchanged (no sidecar), before the configuration's timeoutSeconds,
and counted as `admitted_unchanged`. With the relay passing, the same pod gets its sidecar.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_rebalance_dev.demo.cluster import pause_statefulset, wait_for
from kafka_rebalance_operator import metrics, names
from kafka_rebalance_operator.kube import kube_io
from kafka_rebalance_operator.webhook import document_access
from kafka_rebalance_operator.webhook import outcomes as webhook_outcomes
from kafka_rebalance_operator.webhook import server as webhook
from kafka_rebalance_operator.webhook.injection import (
    ANNOTATION_POLICY,
    SIDECAR_CONTAINER,
    SidecarDefaults,
)
from kafka_rebalance_operator.webhook.sidecar_annotations import (
    CPU_LIMIT,
    CPU_REQUEST,
    DELIVER_PATH,
    DELIVER_PORT,
    LOG_LEVEL,
    MEMORY_LIMIT,
    MEMORY_REQUEST,
)

from tests.unit.ship.test_chart_static import _of_kind, _render
from tests.unit.ship.test_chart_static import helm as _helm_fixture

pytestmark = [pytest.mark.integration]

helm = _helm_fixture
CRD = Path(__file__).resolve().parents[2] / "crds" / "consumergrouppolicies.yaml"
TIMEOUT_S = 4  # the configuration's timeoutSeconds (the webhook answers by 3 s)
POLICY_SPEC = {
    "groupId": "orders-processor",
    "topics": ["orders"],
    "kafka": {"bootstrapServers": "127.0.0.1:9092"},
    "apply": {"mode": "group"},
    "members": {"selector": {"matchLabels": {"app": "orders"}}},
}


class Relay:
    """127.0.0.1:port -> the API server, bytes passed (`pass`), connections reset at their next
    bytes (`reset`), or bytes swallowed (`stall`). Its threads end with their connections."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.mode = target, "pass"
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            if self.mode == "reset":
                conn.close()
                continue
            upstream = socket.create_connection(self.target)
            self.sockets += [conn, upstream]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if self.mode == "reset":
                    break
                if self.mode == "stall":
                    continue  # swallowed: the caller waits for an answer that never comes
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def relay(k8s: Any) -> Iterator[Relay]:
    host, _, port = k8s.server.removeprefix("https://").rpartition(":")
    relayed = Relay((host, int(port)))
    config = yaml.safe_load(Path(k8s.kubeconfig).read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://{host}:{relayed.port}"
    path = Path(k8s.directory) / f"relay-{relayed.port}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    from kubernetes import config as kube_config

    before = kube_io._API
    kube_io.set_api(kube_config.new_client_from_config(config_file=str(path)))
    try:
        yield relayed
    finally:
        kube_io._API = before
        relayed.close()


def _admitted_unchanged(namespace: str) -> float:
    return float(
        metrics.REGISTRY.get_sample_value(
            "kafka_rebalance_webhook_admissions_total",
            {"namespace": namespace, "policy": "orders", "outcome": "admitted_unchanged"},
        )
        or 0.0
    )


def _skipped() -> dict[str, float]:
    """kafka_rebalance_webhook_pods_total{outcome="skipped"} by reason."""
    return {
        reason: float(
            metrics.REGISTRY.get_sample_value(
                "kafka_rebalance_webhook_pods_total", {"outcome": "skipped", "reason": reason}
            )
            or 0.0
        )
        for reason in webhook_outcomes.ERRORS
    }


@contextlib.contextmanager
def serving_webhook(
    k8s: Any,
    helm: Path,
    monkeypatch: pytest.MonkeyPatch,
    policy: str,
    shared_secret: bool = False,
    served: list[webhook.WebhookConfig] | None = None,
) -> Iterator[tuple[str, Callable[[list[str]], list[dict[str, Any]]]]]:
    """The chart's configuration (failurePolicy Ignore, timeoutSeconds TIMEOUT_S) scoped to a
    fresh namespace holding policy `policy`, served by the webhook in this process: yields the
    namespace and a function creating annotated pods of the given names (returns them as
    admitted). With `shared_secret`, the certificate comes from Secret `tls` of the namespace,
    checked every second (`served` receives the webhook's config)."""
    from kubernetes.config import kube_config

    # kopf's own login (the client library's kubeconfig): the API server direct, not the relay
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(k8s.kubeconfig))
    namespace = f"webhook-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("apply", "--server-side", "-f", str(CRD))
    k8s.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    k8s.kubectl("create", "namespace", namespace)
    body = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": policy, "namespace": namespace},
        "spec": POLICY_SPEC,
    }
    manifests = Path(k8s.directory) / namespace
    manifests.mkdir()
    (manifests / "policy.json").write_text(json.dumps(body))
    wait_for(
        "the policy created (the CRD served)",
        lambda: (
            k8s.kubectl("apply", "-f", str(manifests / "policy.json"), check=False).returncode == 0
        ),
        30,
        0.5,
    )
    (configuration,) = _of_kind(
        _render(helm, "webhook.enabled=true", f"watchNamespaces={{{namespace}}}"),
        "MutatingWebhookConfiguration",
    )
    name = f"kro-{namespace}"
    configuration["metadata"] = {"name": name}
    (hook,) = configuration["webhooks"]
    assert hook["failurePolicy"] == "Ignore"  # the chart's default
    hook["timeoutSeconds"] = TIMEOUT_S
    hook.pop("objectSelector", None)
    (manifests / "configuration.json").write_text(json.dumps(configuration))
    k8s.kubectl("apply", "-f", str(manifests / "configuration.json"))
    wait_for(
        "the namespace's default ServiceAccount",
        lambda: k8s.kubectl("get", "sa", "default", "-n", namespace, check=False).returncode == 0,
        60,
    )
    if shared_secret:
        k8s.kubectl("-n", namespace, "create", "secret", "generic", "tls")
    config = webhook.WebhookConfig(
        port=_free_port(),
        configuration=name,
        sidecar=SidecarDefaults(image="kafka-rebalance-operator:test"),
        bind="127.0.0.1",
        url_host="127.0.0.1",
        failure_policy="Ignore",
        timeout_s=TIMEOUT_S,
        cert_secret=(namespace, "tls") if shared_secret else None,
        cert_refresh_s=1.0,
        cert_check_s=1.0,
    )
    if served is not None:
        served.append(config)

    def create(pods: list[str]) -> list[dict[str, Any]]:
        return create_pods(k8s, namespace, [annotated_pod(pod, policy) for pod in pods])[0]

    serving = threading.Event()
    thread = webhook.start(config, clusterwide=False, namespaces=[namespace], serving=serving)
    try:
        assert serving.wait(60), "the webhook did not start serving"
        yield namespace, create
    finally:
        thread.stop()
        k8s.kubectl("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found")
        k8s.kubectl("delete", "namespace", namespace, "--wait=false")


def annotated_pod(name: str, policy: str, **annotations: str) -> dict[str, Any]:
    """A pod manifest annotated for `policy` (and with `annotations`)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {ANNOTATION_POLICY: policy, **annotations}},
        "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1"}]},
    }


def create_pods(
    k8s: Any, namespace: str, items: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """`kubectl create` the pods in `namespace`: the pods as admitted, and kubectl's stderr
    (where the admission warnings are)."""
    manifests = Path(k8s.directory) / namespace
    path = manifests / f"pods-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    created = k8s.kubectl("create", "-n", namespace, "-f", str(path), "-o", "json")
    decoder, text, at, answers = json.JSONDecoder(), created.stdout, 0, []
    while text[at:].strip():  # one JSON document per pod, concatenated
        at += len(text[at:]) - len(text[at:].lstrip())
        answer, at = decoder.raw_decode(text, at)
        answers += list(answer["items"]) if answer.get("kind") == "List" else [answer]
    return answers, created.stderr


def _containers(pod: dict[str, Any]) -> list[str]:
    return [c["name"] for c in pod["spec"]["containers"]]


def test_an_unreachable_or_slow_api_admits_the_pod_unchanged_with_ignore(
    k8s: Any, helm: Path, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving_webhook(k8s, helm, monkeypatch, "orders") as (namespace, create):
        # The policy in the webhook's index, the API passing: the sidecar is injected.
        injected = wait_for(
            "a pod injected through the relay",
            lambda: (
                (p := create([f"ok-{uuid.uuid4().hex[:4]}"])[0])
                and SIDECAR_CONTAINER in _containers(p)
                and p
            ),
            60,
            1.0,
        )
        assert _containers(injected) == ["app", SIDECAR_CONTAINER]
        try:
            for mode in ("reset", "stall"):
                relay.mode = mode
                before = _admitted_unchanged(namespace)
                skipped = _skipped()
                started = time.monotonic()
                (pod,) = create([f"{mode}-pod"])
                took = time.monotonic() - started
                print(f"API {mode}: pod admitted in {took:.2f} s (kubectl create, end to end)")
                assert _containers(pod) == ["app"], mode  # admitted unchanged
                assert took < TIMEOUT_S, (mode, took)  # the webhook answered, not the timeout
                assert _admitted_unchanged(namespace) == before + 1, mode
                now = _skipped()
                assert sum(now.values()) == sum(skipped.values()) + 1, (mode, now)
                assert now["internal"] == skipped["internal"], mode  # an API error, named so
                relay.mode = "pass"
        finally:
            relay.mode = "pass"

        def events() -> list[str]:
            got = k8s.kubectl(
                "get",
                "events",
                "-n",
                namespace,
                "--field-selector",
                "reason=SidecarNotInjected",
                "-o",
                "json",
            )
            return [e["message"] for e in json.loads(got.stdout)["items"]]

        posted = wait_for("the SidecarNotInjected events on the policy", events, 30, 0.5)
        assert "admitted without the sidecar" in posted[0], posted


def _sample(name: str, **labels: str) -> float:
    return float(metrics.REGISTRY.get_sample_value(name, labels) or 0.0)


def _sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in pod["spec"]["containers"] if c["name"] == SIDECAR_CONTAINER]
    return found


def _bad_annotation_events(k8s: Any, namespace: str, kind: str, name: str) -> list[str]:
    got = k8s.kubectl(
        "get", "events", "-n", namespace, "-o", "json", "--field-selector",
        f"reason={webhook.BAD_ANNOTATION},involvedObject.kind={kind},involvedObject.name={name}",
    )  # fmt: skip
    return sorted(e["message"] for e in json.loads(got.stdout)["items"])


def test_per_pod_annotations_shape_the_sidecar_and_bad_values_are_named_in_events(
    k8s: Any, helm: Path, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Good annotations reach the injected container as the API server stores it; bad ones are
    ignored (the pod admitted with the defaults, never refused), each named with its value and
    rule in an admission warning and a SidecarAnnotationInvalid event on the pod, or on its
    StatefulSet once for all its pods; every pod and ignored annotation is counted."""
    pods, bad = (
        "kafka_rebalance_webhook_pods_total",
        "kafka_rebalance_webhook_bad_annotations_total",
    )
    with serving_webhook(k8s, helm, monkeypatch, "orders") as (namespace, create):
        wait_for(
            "the webhook injecting",
            lambda: SIDECAR_CONTAINER in _containers(create([f"first-{uuid.uuid4().hex[:4]}"])[0]),
            60,
            1.0,
        )
        injected = _sample(pods, outcome="mutated", reason="injected")
        with_defaults = _sample(pods, outcome="mutated", reason="defaults_used")
        ignored = {
            a: _sample(bad, annotation=a)
            for a in (DELIVER_PORT, MEMORY_REQUEST, LOG_LEVEL, CPU_LIMIT)
        }
        started = time.monotonic()

        good = {
            DELIVER_PORT: "9000", DELIVER_PATH: "/v1/in", CPU_REQUEST: "200m", CPU_LIMIT: "1",
            MEMORY_REQUEST: "64Mi", MEMORY_LIMIT: "512Mi", LOG_LEVEL: "debug",
        }  # fmt: skip
        (pod,), stderr = create_pods(k8s, namespace, [annotated_pod("good", "orders", **good)])
        sidecar = _sidecar(pod)
        assert "--deliver-to=http://127.0.0.1:9000/v1/in" in sidecar["args"]
        assert sidecar["args"][-1] == "--log-level=debug"
        assert sidecar["resources"] == {
            "requests": {"cpu": "200m", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        }
        assert [(p["name"], p["containerPort"]) for p in sidecar["ports"]] == [
            ("krb-health", 8081),
            ("krb-metrics", 9101),
        ]
        assert [e["name"] for e in sidecar["env"]] == ["POD_NAME", "POD_NAMESPACE"]
        assert "kafka-rebalance sidecar" not in stderr
        assert _sample(pods, outcome="mutated", reason="injected") == injected + 1

        # A server-side dry run gets the warning, and writes no event (sideEffects NoneOnDryRun).
        dry = Path(k8s.directory) / namespace / "dry.json"
        dry.write_text(json.dumps(annotated_pod("dry", "orders", **{LOG_LEVEL: "loud"})))
        previewed = k8s.kubectl("create", "-n", namespace, "--dry-run=server", "-f", str(dry))
        assert f"{LOG_LEVEL}: 'loud' ignored" in previewed.stderr, previewed.stderr

        wrong = {
            DELIVER_PORT: "8081",  # the sidecar's own health port
            DELIVER_PATH: "/ok",  # good: kept beside the bad ones
            MEMORY_REQUEST: "2Gi",  # above the chart's limit, 256Mi
            LOG_LEVEL: "trace",
        }
        (pod,), stderr = create_pods(k8s, namespace, [annotated_pod("bad", "orders", **wrong)])
        sidecar = _sidecar(pod)  # admitted and injected, with the defaults
        assert "--deliver-to=http://127.0.0.1:8000/ok" in sidecar["args"]
        assert not [a for a in sidecar["args"] if a.startswith("--log-level")]
        assert sidecar["resources"] == {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "256Mi"},
        }
        for annotation in (DELIVER_PORT, MEMORY_REQUEST, LOG_LEVEL):
            assert f"kafka-rebalance sidecar: {annotation}: " in stderr, stderr
        messages = wait_for(
            "three events on the pod",
            lambda: (
                (got := _bad_annotation_events(k8s, namespace, "Pod", "bad"))
                and len(got) == 3
                and got
            ),
            30,
            0.5,
        )
        assert messages == [
            "pod bad: kafka-rebalance.io/deliver-port: '8081' ignored, it must be a port "
            "1-65535 other than the sidecar's own 8081 and 9101; the default 8000 is used",
            "pod bad: kafka-rebalance.io/sidecar-log-level: 'trace' ignored, it must be one of "
            "debug, info, warning, error; the default info is used",
            "pod bad: kafka-rebalance.io/sidecar-memory-request: '2Gi' ignored, it must be at "
            "most the memory limit 256Mi; the default 128Mi is used",
        ]

        # A StatefulSet's pods: created by its controller, the event on the StatefulSet, once.
        service, statefulset = pause_statefulset("web", 2)
        template = statefulset["spec"]["template"]
        template["metadata"]["annotations"] = {ANNOTATION_POLICY: "orders", CPU_LIMIT: "lots"}
        manifest = Path(k8s.directory) / namespace / "web.yaml"
        manifest.write_text(yaml.safe_dump_all([service, statefulset]))
        k8s.kubectl("apply", "-n", namespace, "-f", str(manifest))

        def web_pods() -> list[dict[str, Any]]:
            got = k8s.kubectl("get", "pods", "-n", namespace, "-l", "app=web", "-o", "json")
            return list(json.loads(got.stdout)["items"])

        admitted = wait_for("both web pods", lambda: len(got := web_pods()) == 2 and got, 60, 0.5)
        for web in admitted:
            assert _sidecar(web)["resources"]["limits"] == {"memory": "256Mi"}
        (message,) = wait_for(
            "the event on the StatefulSet",
            lambda: _bad_annotation_events(k8s, namespace, "StatefulSet", "web"),
            30,
            0.5,
        )
        assert (
            "kafka-rebalance.io/sidecar-cpu-limit: 'lots' ignored, it must be a Kubernetes quantity"
            in message
        )
        time.sleep(2)  # a second event would have been posted by now
        assert len(_bad_annotation_events(k8s, namespace, "StatefulSet", "web")) == 1
        assert _bad_annotation_events(k8s, namespace, "Pod", "dry") == []
        took = time.monotonic() - started
        print(f"per-pod annotations: 4 pods and a dry run admitted, events checked in {took:.1f} s")

        assert (
            _sample(pods, outcome="mutated", reason="defaults_used") == with_defaults + 4
        )  # dry run too
        for annotation, times in (
            (DELIVER_PORT, 1),
            (MEMORY_REQUEST, 1),
            (LOG_LEVEL, 2),  # the dry run's too
            (CPU_LIMIT, 2),
        ):
            assert _sample(bad, annotation=annotation) == ignored[annotation] + times, annotation


PODS = 500  # admitted and deleted in one test
CREATORS = 4  # concurrent `kubectl create`s: admissions race on the Role (conflicts retried)
CHUNK = 25  # pods per `kubectl create` (each call well inside kubectl's timeout)
LONG_POLICY = "orders-" + "x" * 246  # 253 characters: the longest legal object name


def _role_names(k8s: Any, namespace: str) -> list[str] | None:
    """The documents the policy's Role grants (None: no Role yet)."""
    got = k8s.kubectl("get", "roles", "-n", namespace, "-o", "json")
    roles = [
        r
        for r in json.loads(got.stdout)["items"]
        if r["metadata"]["name"].startswith(document_access.ROLE_PREFIX)
    ]
    if not roles:
        return None
    (role,) = roles
    return sorted(n for rule in role.get("rules") or [] for n in rule.get("resourceNames") or [])


def test_pods_admitted_and_deleted_leave_the_role_as_large_as_the_pods_left(
    k8s: Any, helm: Path, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy name of 253 characters; PODS pods admitted by CREATORS concurrent creators,
    all but one deleted: the Role grants the one pod's document only."""
    with serving_webhook(k8s, helm, monkeypatch, LONG_POLICY) as (namespace, create):
        wait_for(
            "the webhook injecting",
            lambda: SIDECAR_CONTAINER in _containers(create([f"first-{uuid.uuid4().hex[:4]}"])[0]),
            60,
            1.0,
        )
        pods = [f"pod-{i}" for i in range(PODS)]
        started = time.monotonic()
        with ThreadPoolExecutor(CREATORS) as creators:
            chunks = [pods[i : i + CHUNK] for i in range(0, PODS, CHUNK)]
            admitted = [pod for chunk in creators.map(create, chunks) for pod in chunk]
        assert len(admitted) == PODS
        assert all(SIDECAR_CONTAINER in _containers(p) for p in admitted)
        documents = {names.configmap_name(LONG_POLICY, p) for p in pods}
        grown = _role_names(k8s, namespace) or []
        assert documents <= set(grown)  # each admission granted its pod's document
        peak = len(grown)
        admitted_s = time.monotonic() - started
        k8s.kubectl(
            "delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force",
            "--wait=false", timeout=300,
        )  # fmt: skip
        wait_for(
            "the pods gone",
            lambda: not k8s.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.strip(),
            240,
            2.0,
        )
        deleted_s = time.monotonic() - started

        def injected_keeper() -> str | None:
            """A new pod, once one is injected (on an overloaded API the webhook admits a pod
            unchanged, as failurePolicy Ignore says; that pod goes again)."""
            name = f"keeper-{uuid.uuid4().hex[:4]}"
            if SIDECAR_CONTAINER in _containers(create([name])[0]):
                return name
            k8s.kubectl("delete", "pod", name, "-n", namespace, "--grace-period=0", "--force")
            return None

        keeper = wait_for("a pod injected after the deletions", injected_keeper, 120, 2.0)
        wanted = [names.configmap_name(LONG_POLICY, keeper)]
        final = wait_for(
            "the Role pruned to the pod left",
            lambda: (got := _role_names(k8s, namespace)) == wanted and got,
            240,
            1.0,
        )
        print(
            f"{PODS + 2} pods admitted, {PODS + 1} deleted: the Role granted {peak} names, "
            f"then {len(final)} ({PODS} admitted at {admitted_s:.1f} s, gone at "
            f"{deleted_s:.1f} s, pruned at {time.monotonic() - started:.1f} s)"
        )
        assert all(len(n) <= 253 for n in final)


def _served_cert(port: int) -> bytes:
    """The certificate the webhook presents (PEM), as the API server would get it."""
    return ssl.get_server_certificate(("127.0.0.1", port)).encode()


def _same_cert(a: bytes, b: bytes) -> bool:
    return ssl.PEM_cert_to_DER_cert(a.decode()) == ssl.PEM_cert_to_DER_cert(b.decode())


def test_a_renewed_certificate_is_served_without_a_restart(
    k8s: Any, helm: Path, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica renews the shared certificate in its Secret: this webhook serves the new
    one on the same port, the API server trusts it (the bundle moved first), and the expiry
    metric follows."""
    from kafka_rebalance_operator.webhook import certs

    served: list[webhook.WebhookConfig] = []
    with serving_webhook(k8s, helm, monkeypatch, "orders", True, served) as (namespace, create):
        (config,) = served
        first = _served_cert(config.port)
        stored = _secret(k8s, namespace)
        assert _same_cert(first, stored["tls.crt"])
        expiry = "kafka_rebalance_webhook_certificate_expiry_timestamp_seconds"
        assert metrics.REGISTRY.get_sample_value(expiry) == certs.not_after(first).timestamp()
        wait_for(
            "the webhook injecting",
            lambda: SIDECAR_CONTAINER in _containers(create([f"a-{uuid.uuid4().hex[:4]}"])[0]),
            60,
            1.0,
        )

        renewed = certs.generate(["127.0.0.1"])  # what a renewing replica writes
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "tls", "namespace": namespace},
            "data": {
                k: base64.b64encode(v).decode()
                for k, v in {
                    "tls.crt": renewed.cert,
                    "tls.key": renewed.key,
                    "ca.crt": renewed.cert + stored["tls.crt"],
                }.items()
            },
        }
        path = Path(k8s.directory) / f"{namespace}-secret.json"
        path.write_text(json.dumps(secret))
        started = time.monotonic()
        k8s.kubectl("replace", "-f", str(path))
        wait_for(
            "the renewed certificate served",
            lambda: _same_cert(_served_cert(config.port), renewed.cert),
            30,
            0.2,
        )
        print(f"renewed certificate served after {time.monotonic() - started:.1f} s")
        # The gauge follows once the configuration is pointed at the new bundle (an API call
        # after the new certificate is served), so it may trail the served certificate briefly.
        wanted = certs.not_after(renewed.cert).timestamp()
        wait_for(
            "the expiry metric of the renewed certificate",
            lambda: metrics.REGISTRY.get_sample_value(expiry) == wanted,
            10,
            0.1,
        )
        (pod,) = create(["after-renewal"])
        assert SIDECAR_CONTAINER in _containers(pod)  # the API server trusts the new one


def _secret(k8s: Any, namespace: str) -> dict[str, bytes]:
    got = k8s.kubectl("-n", namespace, "get", "secret", "tls", "-o", "json")
    data = json.loads(got.stdout).get("data") or {}
    return {k: base64.b64decode(v) for k, v in data.items()}
