"""Which pods are members of a policy's group, and what weight each gets.

Pure: works on the small pod summaries the kopf index keeps (never whole pod bodies, which
would cost memory per pod in the namespace).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.utils import parse_quantity

from kafka_rebalance_operator.kube.selectors import matches
from kafka_rebalance_operator.policy import PolicySpec

ADAPTIVE_MIN, ADAPTIVE_MAX = 0.1, 10.0


@dataclass(frozen=True)
class PodSummary:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str = ""
    ready: bool = False
    deleting: bool = False
    cpu_request: float | None = None  # cores, summed over the pod's containers
    uid: str = ""  # tells a pod from a later one of the same name (StatefulSets reuse names)


def parse_cpu(quantity: Any) -> float | None:
    """A Kubernetes CPU quantity in cores ("500m" 0.5, "2" 2, "2k" 2000, "1e3" 1000); None when
    it is not a quantity. Kubernetes' own grammar, through the client's `parse_quantity`: every
    suffix the API server accepts is read, so no valid request silently becomes weight 1."""
    if quantity is None:
        return None
    try:
        return float(parse_quantity(str(quantity).strip()))
    except (ValueError, ArithmeticError):
        return None


def summarise_pod(body: Mapping[str, Any]) -> PodSummary:
    """The index entry of one pod: only what membership and weights need."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    spec = body.get("spec") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    total = 0.0
    known = False
    for container in spec.get("containers") or []:
        cpu = parse_cpu(((container.get("resources") or {}).get("requests") or {}).get("cpu"))
        if cpu is not None:
            total += cpu
            known = True
    return PodSummary(
        name=metadata.get("name", ""),
        labels=dict(metadata.get("labels") or {}),
        phase=status.get("phase", ""),
        ready=ready,
        deleting=metadata.get("deletionTimestamp") is not None,
        cpu_request=total if known and total > 0 else None,
        uid=str(metadata.get("uid") or ""),
    )


def select_members(
    spec: PolicySpec, pods: Iterable[PodSummary], admitted: Collection[str] = ()
) -> list[PodSummary]:
    """Running, not terminating pods that match the selector and are Ready or already
    `admitted` (they have an assignment document), sorted by name.

    Readiness admits a pod; it does not keep one. A pod that was never Ready gets no partitions
    (they would stall until it is). But a member's sidecar reports NotReady while it hands
    partitions over, and a member that is Running may still be consuming: dropping it on
    NotReady would replan, which starts another hand-over, which flips readiness again (a
    rebalance storm), and in assign mode would grant its partitions while it may still hold
    them. So a member leaves when its pod stops running or is deleted, as Kafka's own group
    membership ends with the session, not with a slow batch."""
    known = set(admitted)
    chosen = {
        pod.name: pod
        for pod in pods
        if pod.name
        and not pod.deleting
        and pod.phase == "Running"
        and (pod.ready or pod.name in known)
        and matches(spec.selector, pod.labels)
    }
    return [chosen[name] for name in sorted(chosen)]


def resolve_weights(
    spec: PolicySpec,
    members: Iterable[PodSummary],
    adaptive_weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Weight per member.

    Base: `weightFrom: resources` -> the pod's CPU request in cores (1 when it has none);
    `adaptive` -> the weight `capacity.CapacityEstimator` measured (1 when it has none; clamped
    again to [0.1, 10] so no caller can starve or flood a member); otherwise 1. An explicit
    `weights` rule (the first whose selector matches) overrides the base.
    """
    adaptive = adaptive_weights or {}
    weights: dict[str, float] = {}
    for member in members:
        weight = 1.0
        if spec.weight_from == "resources" and member.cpu_request:
            weight = member.cpu_request
        elif spec.weight_from == "adaptive":
            weight = adaptive.get(member.name, 1.0)
            if math.isfinite(weight) and weight > 0:
                weight = min(ADAPTIVE_MAX, max(ADAPTIVE_MIN, weight))
        for rule in spec.weights:
            if matches(rule.selector, member.labels):
                weight = rule.weight
                break
        if not math.isfinite(weight) or weight <= 0:
            weight = 1.0
        weights[member.name] = weight
    return weights
