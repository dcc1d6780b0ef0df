"""Kubernetes label selectors (matchLabels + matchExpressions), evaluated locally.

The pod index holds every pod of a namespace once; each policy filters it with its own selector,
so many policies share one watch instead of opening one per selector.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """True when `labels` satisfy `selector`. An empty or missing selector matches nothing:
    the CRD forbids it, and matching everything would sweep unrelated pods into a group."""
    if not selector:
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return False
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expression in expressions:
        key = expression.get("key")
        operator = expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In":
            if not present or labels[key] not in values:
                return False
        elif operator == "NotIn":
            if present and labels[key] in values:
                return False
        elif operator == "Exists":
            if not present:
                return False
        elif operator == "DoesNotExist":
            if present:
                return False
        else:
            return False  # unknown operator: refuse rather than guess
    return True
