"""Per-pod settings of an injected sidecar, read from the pod's annotations.

`read(annotations, defaults)` returns the `SidecarDefaults` this pod's sidecar is built from
(the chart's, with each valid annotation in place of its default) and one `Problem` per
annotation whose value was not used:

- `kafka-rebalance.io/deliver-port`: the port of `--deliver-to`; 1-65535, not the sidecar's
  health or metrics port;
- `kafka-rebalance.io/deliver-path`: the path of `--deliver-to`; starts with `/`, no spaces or
  control characters;
- `kafka-rebalance.io/sidecar-cpu-request`, `-cpu-limit`, `-memory-request`, `-memory-limit`:
  the container's `resources`; a Kubernetes quantity, not negative (the client's parser);
- `kafka-rebalance.io/sidecar-log-level`: `--log-level`; one of `logformat.LEVELS`.

Invariants: pure (no I/O); a bad value never makes the pod unadmittable: it is left out (the
default is used) and reported; after `read`, each resource's request is at most its limit
whenever an annotation set either (an annotation that would break that is left out), so the
API server never refuses the pod for what an annotation did. Annotations not in the table are
ignored.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kafka_rebalance_common.logformat import LEVELS
from kubernetes.utils import parse_quantity

from kafka_rebalance_operator import names
from kafka_rebalance_operator.webhook.injection import SidecarDefaults

DELIVER_PORT = f"{names.GROUP}/deliver-port"
DELIVER_PATH = f"{names.GROUP}/deliver-path"
CPU_REQUEST = f"{names.GROUP}/sidecar-cpu-request"
CPU_LIMIT = f"{names.GROUP}/sidecar-cpu-limit"
MEMORY_REQUEST = f"{names.GROUP}/sidecar-memory-request"
MEMORY_LIMIT = f"{names.GROUP}/sidecar-memory-limit"
LOG_LEVEL = f"{names.GROUP}/sidecar-log-level"
# (annotation, resources section, resource) for the four resource annotations
RESOURCES = (
    (CPU_REQUEST, "requests", "cpu"),
    (CPU_LIMIT, "limits", "cpu"),
    (MEMORY_REQUEST, "requests", "memory"),
    (MEMORY_LIMIT, "limits", "memory"),
)
ANNOTATIONS = (DELIVER_PORT, DELIVER_PATH, *(a for a, _, _ in RESOURCES), LOG_LEVEL)

_PORT = re.compile(r"[0-9]{1,5}")
_UNSAFE_PATH = re.compile(r"[\s\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Problem:
    """An annotation whose value was not used: `rule` says what the value must be."""

    annotation: str
    value: str
    rule: str  # "must be ..."
    default: str  # what the sidecar gets instead

    def message(self) -> str:
        """One line naming the annotation, the value, the rule and the default used."""
        return (
            f"{self.annotation}: {self.value[:100]!r} ignored, it {self.rule}; "
            f"the default {self.default} is used"
        )


def read(
    annotations: Mapping[str, Any], defaults: SidecarDefaults
) -> tuple[SidecarDefaults, list[Problem]]:
    """This pod's sidecar settings and the annotations left out (see the module docstring)."""
    problems: list[Problem] = []
    given = {a: str(annotations[a]) for a in ANNOTATIONS if a in annotations}
    deliver_to = _deliver_to(given, defaults, problems)
    resources = _resources(given, defaults.resources, problems)
    log_level = defaults.log_level
    if LOG_LEVEL in given:
        level = given[LOG_LEVEL].strip().lower()
        if level in LEVELS:
            log_level = level
        else:
            rule = f"must be one of {', '.join(LEVELS)}"
            problems.append(Problem(LOG_LEVEL, given[LOG_LEVEL], rule, log_level or "info"))
    settings = dataclasses.replace(
        defaults, deliver_to=deliver_to, resources=resources, log_level=log_level
    )
    return settings, problems


def _deliver_to(given: dict[str, str], defaults: SidecarDefaults, problems: list[Problem]) -> str:
    """`defaults.deliver_to` with the annotated port and path (each when valid)."""
    parts = urlsplit(defaults.deliver_to)
    netloc, path = parts.netloc, parts.path
    if DELIVER_PORT in given:
        value = given[DELIVER_PORT].strip()
        own = sorted({p for p in (defaults.health_port, defaults.metrics_port) if p})
        rule = "must be a port 1-65535 other than the sidecar's own " + " and ".join(map(str, own))
        port = int(value) if _PORT.fullmatch(value) else 0
        if 1 <= port <= 65535 and port not in own:
            host = parts.hostname or "127.0.0.1"
            netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        else:
            default = str(parts.port or {"https": 443}.get(parts.scheme, 80))
            problems.append(Problem(DELIVER_PORT, given[DELIVER_PORT], rule, default))
    if DELIVER_PATH in given:
        value = given[DELIVER_PATH].strip()
        if value.startswith("/") and not _UNSAFE_PATH.search(value):
            path = value
        else:
            rule = "must be a path starting with '/', without spaces or control characters"
            problems.append(Problem(DELIVER_PATH, given[DELIVER_PATH], rule, parts.path or "/"))
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


def _quantity(value: Any) -> Decimal | None:
    """The quantity's value, None when it is not a Kubernetes quantity or is negative."""
    try:
        parsed: Decimal = parse_quantity(value)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, ArithmeticError):
        return None
    return parsed if parsed >= 0 else None


def _resources(
    given: dict[str, str], defaults: Mapping[str, Any], problems: list[Problem]
) -> dict[str, Any]:
    """The chart's resources with the annotated quantities; a quantity that does not parse, or
    that would put a request above its limit, is left out."""
    resources = copy.deepcopy(dict(defaults))
    valid: dict[str, str] = {}
    for annotation, section, resource in RESOURCES:
        if annotation in given:
            value = given[annotation].strip()
            if _quantity(value) is None:
                rule = "must be a Kubernetes quantity (such as 250m, 1, 256Mi or 1Gi), not negative"
                default = _default(defaults, section, resource) or "(none)"
                problems.append(Problem(annotation, given[annotation], rule, default))
            else:
                valid[annotation] = value
    for resource in ("cpu", "memory"):
        request_a, limit_a = (a for a, _, r in RESOURCES if r == resource)
        request = valid.get(request_a, _default(defaults, "requests", resource))
        limit = valid.get(limit_a, _default(defaults, "limits", resource))
        if request is None or limit is None:
            continue
        wanted, bound = _quantity(request), _quantity(limit)
        if wanted is not None and bound is not None and wanted > bound:
            for annotation, section, rule in (
                (request_a, "requests", f"must be at most the {resource} limit {limit}"),
                (limit_a, "limits", f"must be at least the {resource} request {request}"),
            ):
                if annotation in valid:
                    default = _default(defaults, section, resource) or "(none)"
                    problems.append(Problem(annotation, given[annotation], rule, default))
                    del valid[annotation]
    for annotation, section, resource in RESOURCES:
        if annotation in valid:
            resources[section] = {**(resources.get(section) or {}), resource: valid[annotation]}
    return resources


def _default(resources: Mapping[str, Any], section: str, resource: str) -> str | None:
    value = (resources.get(section) or {}).get(resource)
    return None if value is None else str(value)
