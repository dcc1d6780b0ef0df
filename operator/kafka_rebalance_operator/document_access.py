"""The API objects the injection webhook keeps: per-policy read access to its documents, and the
chart's webhook configuration.

- Role `kafka-rebalance-documents.<policy>`: get/list/watch on ConfigMaps, `resourceNames`
  limited to that policy's documents (`<policy>.<pod>`). The sidecar lists and watches with a
  `metadata.name` field selector, which the API server authorizes by that name, so the Role
  never needs a wider grant. Names are only ever added (a document of a pod that is gone is
  deleted by the operator; a name left in the Role grants nothing).
- RoleBinding of the same name: the ServiceAccounts of the pods injected for the policy.
  Both are owned by the policy (ownerReferences), so they go with it.
- `point_configuration`: the chart's MutatingWebhookConfiguration gets the serving
  certificate's CA (caBundle) and, for development, a URL instead of the chart's Service.

Every write is read-modify-write on the object's resourceVersion (a conflict is retried), so two
admissions at once never lose each other's names.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException

from kafka_rebalance_operator import kube_io, names

log = logging.getLogger(__name__)

ROLE_PREFIX = "kafka-rebalance-documents."
T = TypeVar("T")


def role_name(policy: str) -> str:
    return f"{ROLE_PREFIX}{policy}"


def _labels(policy: str) -> dict[str, str]:
    return {names.LABEL_MANAGED_BY: names.MANAGER, names.LABEL_POLICY: names.label_value(policy)}


def _owned(policy: str, owner_uid: str | None) -> dict[str, Any]:
    """New object metadata: name, labels and (with the policy's uid) its ownerReference."""
    metadata: dict[str, Any] = {"name": role_name(policy), "labels": _labels(policy)}
    if owner_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": names.API_VERSION, "kind": names.KIND, "name": policy, "uid": owner_uid}
        ]
    return metadata


def _retry_conflicts(step: Callable[[], T], attempts: int = 5) -> T:
    for attempt in range(attempts):
        try:
            return step()
        except ApiException as error:
            if error.status != 409 or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _rules(documents: Iterable[str]) -> list[dict[str, Any]]:
    return [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": sorted(set(documents)),
            "verbs": ["get", "list", "watch"],
        }
    ]


def _role_documents(role: Any) -> set[str]:
    return {n for rule in role.rules or [] for n in rule.resource_names or []}


def add_documents(
    namespace: str,
    policy: str,
    documents: Iterable[str],
    create: bool = False,
    owner_uid: str | None = None,
) -> None:
    """Add `documents` to the policy's Role (created when `create`, owned by `owner_uid`, else
    only if it exists)."""
    wanted = set(documents)
    rbac = client.RbacAuthorizationV1Api(kube_io.api())

    def step() -> None:
        try:
            role = rbac.read_namespaced_role(role_name(policy), namespace)
        except ApiException as error:
            if error.status != 404 or not create:
                if error.status == 404:
                    return
                raise
            rbac.create_namespaced_role(
                namespace,
                {"metadata": _owned(policy, owner_uid), "rules": _rules(wanted)},  # type: ignore[arg-type]  # the client takes the object as a dict too
            )
            return
        held = _role_documents(role)
        if wanted <= held:
            return
        # The object as read (its resourceVersion, labels and ownerReferences kept).
        body = kube_io.api().sanitize_for_serialization(role)
        body["rules"] = _rules(held | wanted)
        rbac.replace_namespaced_role(role_name(policy), namespace, body)

    _retry_conflicts(step)


def _bind(namespace: str, policy: str, account: str, owner_uid: str | None) -> None:
    rbac = client.RbacAuthorizationV1Api(kube_io.api())
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}

    def step() -> None:
        try:
            binding = rbac.read_namespaced_role_binding(role_name(policy), namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            rbac.create_namespaced_role_binding(
                namespace,
                {  # type: ignore[arg-type]  # the client takes the object as a dict too
                    "metadata": _owned(policy, owner_uid),
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": role_name(policy),
                    },
                    "subjects": [subject],
                },
            )
            return
        subjects = [
            {"kind": s.kind, "name": s.name, "namespace": s.namespace}
            for s in binding.subjects or []
        ]
        if subject in subjects:
            return
        body = kube_io.api().sanitize_for_serialization(binding)
        body["subjects"] = [*subjects, subject]
        rbac.replace_namespaced_role_binding(role_name(policy), namespace, body)

    _retry_conflicts(step)


def grant(
    namespace: str, policy: str, owner_uid: str, account: str, documents: Iterable[str]
) -> None:
    """ServiceAccount `account` may read the policy's `documents` (and those added later)."""
    add_documents(namespace, policy, documents, create=True, owner_uid=owner_uid)
    _bind(namespace, policy, account, owner_uid)


def point_configuration(name: str, ca_bundle: str | None, url: str | None) -> None:
    """Every webhook of MutatingWebhookConfiguration `name` gets `ca_bundle` (base64 PEM, as
    kopf hands it) and, when given, `url` in place of its Service."""
    api = client.AdmissionregistrationV1Api(kube_io.api())

    def step() -> None:
        current = api.read_mutating_webhook_configuration(name)
        raw = kube_io.api().sanitize_for_serialization(current)
        for hook in raw.get("webhooks") or []:
            config = hook.setdefault("clientConfig", {})
            if url:
                config.pop("service", None)
                config["url"] = url
            if ca_bundle:
                base64.b64decode(ca_bundle, validate=True)  # kopf gives base64 already
                config["caBundle"] = ca_bundle
        api.replace_mutating_webhook_configuration(name, raw)

    _retry_conflicts(step)
