"""The namespaces this operator watches, and the policies it can see outside them.

A policy in a namespace the operator does not watch is never polled and gets no status, so
nothing on the policy says why nothing happens. At start the operator reports what it watches
(the log and `kafka_rebalance_watched_namespace`) and, where its RBAC lets it list policies
across the cluster, names each policy outside its namespaces once, with the fix.

`unwatched` is pure. `list_policies` is the one API call: a cluster-wide list, paged; it answers
None when it cannot tell (forbidden: the chart's namespaced RBAC, which is normal and stays
silent; or the API server failing, logged in one line). Nothing here retries or runs again:
the report is for the start of the process.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from kafka_rebalance_operator import metrics
from kafka_rebalance_operator.names import GROUP, PLURAL, VERSION

log = logging.getLogger(__name__)

PAGE = 500  # policies per list request
TIMEOUT_S = 10.0  # one list request; the report must not hold the start up for long
RUNBOOK = "docs/troubleshooting.md#a-policy-gets-no-status-at-all"


@dataclass(frozen=True, order=True)
class UnwatchedPolicy:
    """A policy in a namespace the operator does not watch, and what to change."""

    namespace: str
    name: str
    fix: str


def fix_text(namespace: str, name: str, watched: Collection[str]) -> str:
    """One line: which policy is ignored, why, and the two ways out."""
    return (
        f"ConsumerGroupPolicy {namespace}/{name} is ignored: this operator watches only "
        f"{', '.join(sorted(watched))}. Add {namespace!r} to the chart's watchNamespaces (the "
        f"operator's --namespace), set watchAllNamespaces, or move the policy ({RUNBOOK})"
    )


def unwatched(
    watched: Collection[str] | None, policies: Iterable[tuple[str, str]]
) -> list[UnwatchedPolicy]:
    """The (namespace, name) `policies` outside `watched` (None: every namespace is watched,
    so none is outside), sorted, each with its fix."""
    if watched is None:
        return []
    inside = set(watched)
    return sorted(
        UnwatchedPolicy(namespace, name, fix_text(namespace, name, inside))
        for namespace, name in set(policies)
        if namespace not in inside
    )


def list_policies(api_client: Any) -> list[tuple[str, str]] | None:
    """(namespace, name) of every ConsumerGroupPolicy in the cluster, or None when the API
    server does not say: 403 (no cluster-wide list permission) silently, anything else with
    one log line."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    api: Any = client.CustomObjectsApi(api_client)  # its lists are untyped dicts
    found: list[tuple[str, str]] = []
    token: str | None = None
    try:
        while True:
            page = api.list_cluster_custom_object(
                GROUP,
                VERSION,
                PLURAL,
                limit=PAGE,
                _continue=token,
                _request_timeout=TIMEOUT_S,
            )
            for item in page.get("items") or []:
                meta = item.get("metadata") or {}
                found.append((str(meta.get("namespace")), str(meta.get("name"))))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return found
    except ApiException as error:
        if error.status != 403:
            log.info("could not list policies across namespaces: %s %s", error.status, error.reason)
        return None
    except Exception as error:  # unreachable API server, TLS, timeouts: the urllib3 family
        log.info("could not list policies across namespaces: %s", error)
        return None


def report_at_start(api_client: Any, watched: Collection[str] | None) -> list[UnwatchedPolicy]:
    """Log and export the watched namespaces, then log each policy outside them once (a
    WARNING with its fix); the policies found outside, [] when they cannot be listed."""
    metrics.record_watched_namespaces(watched)
    if watched is None:
        log.info("watching ConsumerGroupPolicies in every namespace")
        return []
    log.info("watching ConsumerGroupPolicies in %s", ", ".join(sorted(watched)))
    policies = list_policies(api_client)
    if policies is None:
        metrics.record_unwatched_policies(None)
        return []
    outside = unwatched(watched, policies)
    metrics.record_unwatched_policies(len(outside))
    for policy in outside:
        log.warning(policy.fix, extra={"namespace": policy.namespace, "policy": policy.name})
    return outside
