"""The one naming prefix (docs/naming.md) as constants, so no module spells it twice."""

from __future__ import annotations

import hashlib

GROUP = "kafka-rebalance.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ConsumerGroupPolicy"
PLURAL = "consumergrouppolicies"
LABEL_POLICY = f"{GROUP}/policy"
LABEL_MEMBER = f"{GROUP}/member"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kafka-rebalance-operator"
DATA_KEY = "assignment.json"
FINALIZER = f"{GROUP}/operator"


def shorten(text: str, limit: int) -> str:
    """`text` if it fits, else a prefix plus a hash of the whole (still unique, still valid)."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{text[: limit - 11].rstrip('-.')}-{digest}"


def configmap_name(policy: str, member: str) -> str:
    """`<policy>.<pod>`, shortened with a hash only past the 253-character object-name limit.

    A policy's name may not contain a dot (a rule of the CRD), so the first dot says where the
    policy ends and no two (policy, pod) pairs share a name. (With a hyphen, policy `orders` with
    pod `eu-orders-0` and policy `orders-eu` with pod `orders-0` would.)"""
    return shorten(f"{policy}.{member}", 253)


def label_value(text: str) -> str:
    """A label value (63 characters at most)."""
    return shorten(text, 63)
