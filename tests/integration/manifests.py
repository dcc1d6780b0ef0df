"""Kubernetes manifests the integration tests share: a group of pause pods under KWOK."""

import yaml
from kafka_rebalance_dev.demo.cluster import pause_statefulset as pause_statefulset_objects


def pause_statefulset(name: str, replicas: int, *, cpu_request: str | None = None) -> str:
    """The demo's pause-pod Service and StatefulSet as YAML for `kubectl apply -f -`.

    The tests keep the StatefulSet's default (OrderedReady) pod management, as they always had,
    so the real controller's ordinary path is the one they exercise."""
    objects = pause_statefulset_objects(name, replicas, cpu_request=cpu_request, parallel=False)
    return yaml.safe_dump_all(list(objects), sort_keys=False)
