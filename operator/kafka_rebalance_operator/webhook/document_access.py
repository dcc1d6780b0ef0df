"""The API objects the injection webhook keeps: per-policy read access to its documents, and the
chart's webhook configuration.

- Role `kafka-rebalance-documents.<policy>` (shortened with a hash past 253 characters, so a
  policy name of any legal length works): get/list/watch on ConfigMaps, `resourceNames` limited
  to the documents (`<policy>.<pod>`) of that policy's pods that exist. The sidecar lists and
  watches with a `metadata.name` field selector, which the API server authorizes by that name,
  so the Role never needs a wider grant. A name is added when its pod is admitted or seen, and
  removed when its pod is gone (`remove_gone`), so the Role is as large as the policy's pods,
  not as the pods it ever had.
- RoleBinding of the same name: the ServiceAccounts of the pods injected for the policy.
  Both are owned by the policy (ownerReferences), so they go with it.
- `point_configuration`: the chart's MutatingWebhookConfiguration gets the serving
  certificate's CA (caBundle) and, for development, a URL instead of the chart's Service.

Every write is read-modify-write on the object's resourceVersion (a conflict is retried after a
jittered backoff, so replicas that collided do not collide again in step), so two admissions
at once never lose each other's names. Every API call carries a request timeout (`timeout_s`):
the webhook passes one well below its own, so a slow API server never holds an admission past
the webhook's deadline.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from kafka_rebalance_operator import names
from kafka_rebalance_operator.kube import kube_io

log = logging.getLogger(__name__)

ROLE_PREFIX = "kafka-rebalance-documents."
T = TypeVar("T")


def role_name(policy: str) -> str:
    """The Role and RoleBinding of `policy` (at most 253 characters, an object name's limit)."""
    return names.shorten(f"{ROLE_PREFIX}{policy}", 253)


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


DEFAULT_TIMEOUT_S = 10.0  # per API call, outside admission (the webhook passes its own)


def _conflict(error: BaseException) -> bool:
    return isinstance(error, ApiException) and error.status == 409


def _retry_conflicts(step: Callable[[], T], attempts: int = 5, wait_max_s: float = 0.4) -> T:
    """`step()`, run again after a conflict (409) with a random wait of up to 25 ms, 50 ms,
    ... doubling to `wait_max_s` (tenacity's full jitter), at most `attempts` times; the last
    conflict and any other error are raised unchanged."""
    retrying = Retrying(
        retry=retry_if_exception(_conflict),
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=0.025, max=wait_max_s),
        reraise=True,
    )
    result: T = retrying(step)
    return result


def _rules(documents: Iterable[str]) -> list[dict[str, Any]]:
    """The Role's rules for `documents`: none at all when there are none (a rule with an empty
    `resourceNames` would grant every ConfigMap of the namespace)."""
    names_ = sorted(set(documents))
    if not names_:
        return []
    return [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": names_,
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
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> None:
    """Add `documents` to the policy's Role (created when `create`, owned by `owner_uid`, else
    only if it exists)."""
    wanted = set(documents)
    rbac = client.RbacAuthorizationV1Api(kube_io.api())

    def step() -> None:
        try:
            role = rbac.read_namespaced_role(
                role_name(policy), namespace, _request_timeout=timeout_s
            )
        except ApiException as error:
            if error.status != 404 or not create:
                if error.status == 404:
                    return
                raise
            rbac.create_namespaced_role(
                namespace,
                {"metadata": _owned(policy, owner_uid), "rules": _rules(wanted)},  # type: ignore[arg-type]  # the client takes the object as a dict too
                _request_timeout=timeout_s,
            )
            return
        held = _role_documents(role)
        if wanted <= held:
            return
        # The object as read (its resourceVersion, labels and ownerReferences kept).
        body = kube_io.api().sanitize_for_serialization(role)
        body["rules"] = _rules(held | wanted)
        rbac.replace_namespaced_role(role_name(policy), namespace, body, _request_timeout=timeout_s)

    _retry_conflicts(step)


# Up to this many pods are looked up one by one; more are found in one list of the namespace.
FEW_PODS = 3


def _existing(core: Any, namespace: str, pods: set[str], timeout_s: float) -> set[str]:
    """Which of `pods` exist in `namespace`."""
    if len(pods) <= FEW_PODS:
        found = set()
        for pod in pods:
            try:
                core.read_namespaced_pod(pod, namespace, _request_timeout=timeout_s)
            except ApiException as error:
                if error.status == 404:
                    continue
                raise
            found.add(pod)
        return found
    listed = core.list_namespaced_pod(namespace, _request_timeout=timeout_s, _preload_content=False)
    return pods & {item["metadata"]["name"] for item in json.loads(listed.data)["items"]}


def remove_gone(
    namespace: str, policy: str, pods: Iterable[str], timeout_s: float = DEFAULT_TIMEOUT_S
) -> set[str]:
    """Take the documents of those of `pods` that no longer exist out of the policy's Role, in
    one write; returns the pods whose documents were removed. A pod of one of these names
    admitted meanwhile (a StatefulSet's replacement) keeps or gets its name back: the pods are
    looked up before and again after the removal, and one created later adds its name when the
    webhook sees it (`add_documents`)."""
    core = client.CoreV1Api(kube_io.api())
    rbac = client.RbacAuthorizationV1Api(kube_io.api())
    candidates = set(pods)
    gone = candidates - _existing(core, namespace, candidates, timeout_s)
    if not gone:
        return set()
    pod_of = {names.configmap_name(policy, pod): pod for pod in gone}

    def step() -> set[str]:
        try:
            role = rbac.read_namespaced_role(
                role_name(policy), namespace, _request_timeout=timeout_s
            )
        except ApiException as error:
            if error.status == 404:
                return set()
            raise
        held = _role_documents(role)
        dropped = held & pod_of.keys()
        if not dropped:
            return set()
        body = kube_io.api().sanitize_for_serialization(role)
        body["rules"] = _rules(held - dropped)
        rbac.replace_namespaced_role(role_name(policy), namespace, body, _request_timeout=timeout_s)
        return {pod_of[document] for document in dropped}

    removed = _retry_conflicts(step)
    back = _existing(core, namespace, removed, timeout_s) if removed else set()
    if back:
        documents = [names.configmap_name(policy, pod) for pod in back]
        add_documents(namespace, policy, documents, timeout_s=timeout_s)
    return removed - back


def _bind(
    namespace: str, policy: str, accounts: Iterable[str], owner_uid: str | None, timeout_s: float
) -> None:
    rbac = client.RbacAuthorizationV1Api(kube_io.api())
    wanted = [
        {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        for account in sorted(set(accounts))
    ]

    def step() -> None:
        try:
            binding = rbac.read_namespaced_role_binding(
                role_name(policy), namespace, _request_timeout=timeout_s
            )
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
                    "subjects": wanted,
                },
                _request_timeout=timeout_s,
            )
            return
        subjects = [
            {"kind": s.kind, "name": s.name, "namespace": s.namespace}
            for s in binding.subjects or []
        ]
        missing = [subject for subject in wanted if subject not in subjects]
        if not missing:
            return
        body = kube_io.api().sanitize_for_serialization(binding)
        body["subjects"] = [*subjects, *missing]
        rbac.replace_namespaced_role_binding(
            role_name(policy), namespace, body, _request_timeout=timeout_s
        )

    _retry_conflicts(step)


def grant(
    namespace: str,
    policy: str,
    owner_uid: str,
    accounts: Iterable[str],
    documents: Iterable[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> None:
    """The ServiceAccounts `accounts` may read the policy's `documents` (and those added
    later): at most one write of the Role and one of the RoleBinding, whatever the number of
    pods granted together; each API call times out after `timeout_s`."""
    add_documents(
        namespace, policy, documents, create=True, owner_uid=owner_uid, timeout_s=timeout_s
    )
    _bind(namespace, policy, accounts, owner_uid, timeout_s)


def point_configuration(
    name: str, ca_bundle: str | None, url: str | None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> None:
    """Every webhook of MutatingWebhookConfiguration `name` gets `ca_bundle` (base64 PEM, as
    kopf hands it) and, when given, `url` in place of its Service."""
    api = client.AdmissionregistrationV1Api(kube_io.api())

    def step() -> None:
        current = api.read_mutating_webhook_configuration(name, _request_timeout=timeout_s)
        raw = kube_io.api().sanitize_for_serialization(current)
        for hook in raw.get("webhooks") or []:
            config = hook.setdefault("clientConfig", {})
            if url:
                config.pop("service", None)
                config["url"] = url
            if ca_bundle:
                base64.b64decode(ca_bundle, validate=True)  # kopf gives base64 already
                config["caBundle"] = ca_bundle
        api.replace_mutating_webhook_configuration(name, raw, _request_timeout=timeout_s)

    _retry_conflicts(step)
