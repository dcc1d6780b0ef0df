"""Kubernetes manifests the integration tests share: a group of pause pods under KWOK."""

from typing import Any

import yaml


def pause_statefulset(name: str, replicas: int, *, cpu_request: str | None = None) -> str:
    """A headless Service and a StatefulSet of `replicas` pause pods labelled `app: <name>`.
    KWOK's fake node runs them (no image is pulled); `cpu_request` feeds `weightFrom: resources`."""
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
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    return yaml.safe_dump_all([service, statefulset], sort_keys=False)
