"""The Kubernetes side of one demo group: CRD, namespace, a StatefulSet under KWOK, the policy.

Reads go through the Python client (the live table reads every second; a kubectl process per
read would cost more CPU than the consumers on a 2-core machine); the CRD goes through kubectl
because it is a YAML file the user would apply the same way.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "crds" / "consumergrouppolicies.yaml"
GROUP, VERSION, PLURAL = "kafka-rebalance.io", "v1alpha1", "consumergrouppolicies"
CRD_NAME = f"{PLURAL}.{GROUP}"
POLICY_LABEL = "kafka-rebalance.io/policy"
# The demo's and the tests' policies poll this often (the CRD admits 1s and more; the operator
# they start honours it: OperatorProcess passes --min-poll-interval 1s).
POLL_INTERVAL = "2s"


def wait_for(
    what: str,
    check: Callable[[], Any],
    timeout: float = 60,
    every: float = 0.25,
    abort: Callable[[], str | None] | None = None,
) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` and the last answer.
    `abort` is asked first each round: a message from it fails at once (a crashed process
    will not recover by waiting)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if abort is not None and (reason := abort()):
            raise RuntimeError(f"while waiting for {what}: {reason}")
        try:
            last = check()
        except Exception as error:  # the object may not exist yet
            last = error
        else:
            if last:
                return last
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def install_crd(kubectl: Path, kubeconfig: Path) -> None:
    """Apply the CRD and wait until discovery serves it (a namespaced watch needs that)."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kubectl), f"--kubeconfig={kubeconfig}", *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=90,
        )

    run("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")
    wait_for(
        "the CRD in discovery",
        lambda: PLURAL in run("api-resources", f"--api-group={GROUP}").stdout,
    )


def pause_statefulset(
    name: str, replicas: int, *, cpu_request: str | None = None, parallel: bool = True
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A headless Service and a StatefulSet of pause pods labelled `app: <name>`. KWOK's fake
    node "runs" them (no image is pulled); the sidecar processes stand in for what would run
    inside each pod. `cpu_request` feeds `weightFrom: resources`; `parallel` starts and stops
    the pods together, so a demo scale step does not wait for them one by one."""
    container: dict[str, Any] = {"name": "app", "image": "registry.k8s.io/pause:3.10"}
    if cpu_request is not None:
        container["resources"] = {"requests": {"cpu": cpu_request}}
    labels = {"app": name}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": 80}]},
    }
    spec: dict[str, Any] = {"serviceName": name, "replicas": replicas}
    if parallel:
        spec["podManagementPolicy"] = "Parallel"
    spec["selector"] = {"matchLabels": labels}
    spec["template"] = {"metadata": {"labels": labels}, "spec": {"containers": [container]}}
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": spec,
    }
    return service, statefulset


def policy_body(
    name: str,
    *,
    group: str,
    bootstrap: str,
    topic: str,
    app: str,
    strategy: str,
    mode: str,
    weight_from: str | None = None,
    load: Mapping[str, Any] | None = None,
    rebalance: Mapping[str, Any] | None = None,
    apply: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ConsumerGroupPolicy for the demo group, polled every POLL_INTERVAL with a 4 s cooldown
    (`rebalance` overrides either)."""
    members: dict[str, Any] = {"selector": {"matchLabels": {"app": app}}}
    if weight_from:
        members["weightFrom"] = weight_from
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": name},
        "spec": {
            "groupId": group,
            "kafka": {"bootstrapServers": bootstrap},
            "topics": [topic],
            "members": members,
            "strategy": strategy,
            "load": dict(load or {"model": "drain", "targetDrainSeconds": 30}),
            "rebalance": {
                "mode": mode,
                "pollInterval": POLL_INTERVAL,
                "cooldown": "4s",
                "minImprovement": 0.1,
                **(rebalance or {}),
            },
            "apply": dict(apply or {"mode": "group"}),
        },
    }


class Cluster:
    """One namespace of the API server, through the admin kubeconfig."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.namespace = namespace
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()

    # -- set-up ----------------------------------------------------------------------------------
    def create_namespace(self) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": self.namespace}})
        except ApiException as error:
            if error.status != 409:
                raise

    def delete_namespace(self) -> None:
        try:
            self.core.delete_namespace(self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise

    def create_statefulset(self, app: str, replicas: int) -> None:
        service, statefulset = pause_statefulset(app, replicas)
        self.core.create_namespaced_service(self.namespace, service)
        self.apps.create_namespaced_stateful_set(self.namespace, statefulset)

    def scale(self, app: str, replicas: int) -> None:
        self.apps.patch_namespaced_stateful_set_scale(
            app, self.namespace, {"spec": {"replicas": replicas}}
        )

    def ready_pods(self, app: str) -> list[str]:
        """Names of the pods of `app` that are Running and Ready and not being deleted."""
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"app={app}").items
        ready = []
        for pod in pods:
            conditions = pod.status.conditions or []
            if (
                pod.metadata.deletion_timestamp is None
                and pod.status.phase == "Running"
                and any(c.type == "Ready" and c.status == "True" for c in conditions)
            ):
                ready.append(pod.metadata.name)
        return sorted(ready)

    def wait_pods(self, app: str, names: list[str], timeout: float = 120) -> None:
        """Wait until exactly `names` are the Ready pods of `app`."""
        wait_for(f"pods {names} Ready", lambda: self.ready_pods(app) == sorted(names), timeout)

    # -- the policy ------------------------------------------------------------------------------
    def apply_policy(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, dict(body)
            )
        except ApiException as error:
            if error.status != 409:
                raise
            self.patch_policy(name, {"spec": body["spec"]})

    def patch_policy(self, name: str, patch: Mapping[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, dict(patch)
        )

    def policy_status(self, name: str) -> dict[str, Any]:
        try:
            body = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name
            )
        except ApiException as error:
            if error.status == 404:
                return {}
            raise
        return dict(body.get("status") or {})

    def delete_policy(self, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name
            )
        except ApiException as error:
            if error.status != 404:
                raise

    def assignments(self, policy: str) -> dict[str, dict[str, Any]]:
        """member -> its assignment document, from the policy's ConfigMaps."""
        items = self.core.list_namespaced_config_map(
            self.namespace, label_selector=f"{POLICY_LABEL}={policy}"
        ).items
        documents: dict[str, dict[str, Any]] = {}
        for item in items:
            text = (item.data or {}).get("assignment.json")
            if text:
                document = json.loads(text)
                documents[str(document.get("member"))] = document
        return documents
