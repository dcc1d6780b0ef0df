"""What the mutating webhook adds to a pod annotated `kafka-rebalance.io/policy: <policy>`.

`inject(pod, policy, spec, defaults)` returns the pod's new `spec.containers` and
`spec.volumes`: the sidecar container (flags from the policy, image, ports, probes and
resources from `defaults`: the operator's, with the pod's own annotations applied by
sidecar_annotations.py) and the pod's own assignment document, wired without a per-ordinal
list:

- source `watch` (the default): the sidecar watches ConfigMap `<policy>.<pod>` through the API
  (`--assignment-configmap`); a new document reaches it in well under a second. The name is
  exact when the pod's name is known at admission (StatefulSet pods), else `<policy>.$(POD_NAME)`
  (expanded by the kubelet from the downward API);
- source `file`: a ConfigMap volume of `<policy>.<pod>` when the pod's name is known (the
  kubelet refreshes it on its sync period, about a minute), else the API watch as above.

Invariants: pure (no I/O); a pod that already has a container named `SIDECAR_CONTAINER` is
returned unchanged (admission may be re-invoked); nothing of the pod's own containers or
volumes is changed or reordered. Anything the sidecar cannot run without raises
`InjectionError` with a one-line reason naming the field.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_operator import names

ANNOTATION_POLICY = f"{names.GROUP}/policy"
ANNOTATION_TOPICS = f"{names.GROUP}/topics"  # overrides spec.topics (needed with topicPattern)
SIDECAR_CONTAINER = "kafka-rebalance"
DOCUMENT_VOLUME = "kafka-rebalance-assignment"
TMP_VOLUME = "kafka-rebalance-tmp"
DOCUMENT_DIR = "/etc/kafka-rebalance"
SOURCES = ("watch", "file")

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


class InjectionError(ValueError):
    """The annotated pod cannot get a working sidecar (the message names the reason)."""


@dataclass(frozen=True)
class SidecarDefaults:
    """What the chart decides for every injected sidecar (`webhook.sidecar.*` values)."""

    image: str
    source: str = "watch"  # watch | file (see the module docstring)
    health_port: int = 8081
    metrics_port: int = 9101
    deliver_to: str = "http://127.0.0.1:8000/records"
    resources: Mapping[str, Any] = field(
        default_factory=lambda: {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "256Mi"},
        }
    )
    image_pull_policy: str | None = None
    extra_args: tuple[str, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = ()  # (name, value), after POD_NAME/POD_NAMESPACE
    log_level: str | None = None  # --log-level, after extra_args; None: the sidecar's own (info)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise InjectionError(f"sidecar source: watch or file, got {self.source!r}")


@dataclass(frozen=True)
class Injected:
    """The pod's new containers and volumes, and the ConfigMap its sidecar follows."""

    containers: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    configmap: str | None  # exact `<policy>.<pod>`, None when the pod's name is not known yet
    watches: bool  # the sidecar reads its document through the API (needs the Role)


def already_injected(pod: Mapping[str, Any]) -> bool:
    containers = (pod.get("spec") or {}).get("containers") or []
    return any(c.get("name") == SIDECAR_CONTAINER for c in containers)


def _topics(pod: Mapping[str, Any], policy: str, spec: Mapping[str, Any]) -> str:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    override = str(annotations.get(ANNOTATION_TOPICS) or "").strip()
    if override:
        return ",".join(t.strip() for t in override.split(",") if t.strip())
    topics = spec.get("topics") or []
    if not topics:
        raise InjectionError(
            f"policy {policy!r} selects topics by spec.topicPattern: annotate the pod with "
            f"{ANNOTATION_TOPICS}: t1,t2 (the sidecar subscribes to named topics)"
        )
    return ",".join(str(t) for t in topics)


def inject(
    pod: Mapping[str, Any],
    policy: str,
    spec: Mapping[str, Any],
    defaults: SidecarDefaults,
) -> Injected:
    """The pod with its sidecar (see the module docstring); `spec` is the policy's spec."""
    pod_spec = pod.get("spec") or {}
    containers = copy.deepcopy(list(pod_spec.get("containers") or []))
    volumes = copy.deepcopy(list(pod_spec.get("volumes") or []))
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    exact = names.configmap_name(policy, pod_name) if pod_name else None
    if already_injected(pod):
        return Injected(containers, volumes, exact, defaults.source == "watch" or exact is None)
    group, servers, apply_mode = _group_fields(policy, spec)
    topics = _topics(pod, policy, spec)
    taken = {v.get("name") for v in volumes}
    for volume in (DOCUMENT_VOLUME, TMP_VOLUME):
        if volume in taken:
            raise InjectionError(f"spec.volumes: the name {volume!r} is reserved for the sidecar")
    watches = defaults.source == "watch" or exact is None
    source_args, mounts = _document_source(policy, exact, watches, volumes)
    volumes.append({"name": TMP_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}})
    args = [
        *source_args,
        f"--bootstrap-servers={servers}",
        f"--group={group}",
        f"--topics={topics}",
        f"--apply-mode={apply_mode}",
        f"--deliver-to={defaults.deliver_to}",
        f"--health-port={defaults.health_port}",
        f"--metrics-port={defaults.metrics_port}",
        "--bind=0.0.0.0",  # the kubelet probes, and Prometheus scrapes, the pod's address
        *defaults.extra_args,
        *([f"--log-level={defaults.log_level}"] if defaults.log_level else []),
    ]
    containers.append(_sidecar(defaults, args, mounts))
    return Injected(containers, volumes, exact, watches)


def _group_fields(policy: str, spec: Mapping[str, Any]) -> tuple[str, str, str]:
    """The policy's group id, bootstrap servers and apply mode; InjectionError when one is
    missing, or the mode has no sidecar (broker)."""
    group = spec.get("groupId")
    if not group:
        raise InjectionError(f"policy {policy!r} has no spec.groupId")
    servers = str((spec.get("kafka") or {}).get("bootstrapServers") or "")
    if not servers:
        raise InjectionError(f"policy {policy!r} has no spec.kafka.bootstrapServers")
    apply_mode = str((spec.get("apply") or {}).get("mode") or "group")
    if apply_mode not in ("group", "assign"):
        raise InjectionError(
            f"policy {policy!r} applies plans with apply.mode {apply_mode}: the brokers follow "
            "them, there is no sidecar to inject (remove the annotation)"
        )
    return str(group), servers, apply_mode


def _document_source(
    policy: str, exact: str | None, watches: bool, volumes: list[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The sidecar's flags for its assignment document and its volume mounts: the ConfigMap
    through the API watch, or (file source, pod name known) the ConfigMap mounted, whose volume
    is added to `volumes`."""
    mounts: list[dict[str, Any]] = [{"name": TMP_VOLUME, "mountPath": "/tmp"}]
    if watches:
        configmap = exact or f"{policy}.$(POD_NAME)"
        return [f"--assignment-configmap={configmap}", "--namespace=$(POD_NAMESPACE)"], mounts
    assert exact is not None
    mounts.append({"name": DOCUMENT_VOLUME, "mountPath": DOCUMENT_DIR, "readOnly": True})
    volumes.append(
        {
            "name": DOCUMENT_VOLUME,
            "configMap": {
                "name": exact,
                "optional": True,
                "items": [{"key": names.DATA_KEY, "path": names.DATA_KEY}],
            },
        }
    )
    return [f"--assignment={DOCUMENT_DIR}/{names.DATA_KEY}"], mounts


def _sidecar(
    defaults: SidecarDefaults, args: list[str], mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The sidecar container: the image, its flags, the pod's name and namespace in its
    environment, ports, probes, resources and the restricted security context."""
    health = {"port": defaults.health_port}
    sidecar: dict[str, Any] = {
        "name": SIDECAR_CONTAINER,
        "image": defaults.image,
        "command": ["kafka-rebalance", "sidecar"],
        "args": args,
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            *({"name": name, "value": value} for name, value in defaults.extra_env),
        ],
        "ports": [
            {"name": "krb-health", "containerPort": defaults.health_port},
            *(
                [{"name": "krb-metrics", "containerPort": defaults.metrics_port}]
                if defaults.metrics_port and defaults.metrics_port != defaults.health_port
                else []
            ),
        ],
        "readinessProbe": {"httpGet": {"path": "/readyz", **health}, "periodSeconds": 5},
        "livenessProbe": {
            "httpGet": {"path": "/healthz", **health},
            "initialDelaySeconds": 20,
            "periodSeconds": 10,
        },
        "resources": copy.deepcopy(dict(defaults.resources)),
        "securityContext": dict(RESTRICTED),
        "volumeMounts": mounts,
    }
    if defaults.image_pull_policy:
        sidecar["imagePullPolicy"] = defaults.image_pull_policy
    return sidecar
