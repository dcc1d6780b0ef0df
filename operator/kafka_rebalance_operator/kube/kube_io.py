"""Kubernetes reads and writes the poll needs beyond what kopf does: the policy's ConfigMaps and
its Secret. Blocking (the official client): call from a worker thread.

Least privilege: ConfigMaps are listed by the policy's label (list/create/patch/delete on
configmaps), the Secret is read by name (get on secrets).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, cast

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

__all__ = [
    "ApiException",
    "ForeignConfigMap",
    "SecretMissing",
    "WriteConflict",
    "api",
    "connect",
    "delete_configmap",
    "list_configmaps",
    "read_secret",
    "set_api",
    "upsert_configmap",
]

from kafka_rebalance_operator import names

_API: client.ApiClient | None = None
# No call waits on the API server for longer: a half-open connection fails the poll (retried at
# the next tick) rather than holding its thread, and the poll's liveness, for ever.
REQUEST_TIMEOUT_S = 30.0


def connect() -> client.ApiClient:
    """A new API client: in-cluster credentials, else $KUBECONFIG / ~/.kube/config."""
    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        return config.new_client_from_config()


def api() -> client.ApiClient:
    """One shared API client, for scripts and tests that call these functions without passing
    one (the operator builds its own with `connect` and hands it to its ports)."""
    global _API
    if _API is None:
        _API = connect()
    return _API


def set_api(api_client: client.ApiClient) -> None:
    global _API
    _API = api_client


class SecretMissing(LookupError):
    pass


def read_secret(
    namespace: str, name: str, *, api_client: client.ApiClient | None = None
) -> dict[str, str]:
    """The Secret's data, decoded. Values are returned to the caller only, never logged."""
    core = client.CoreV1Api(api_client or api())
    try:
        secret = core.read_namespaced_secret(name, namespace, _request_timeout=REQUEST_TIMEOUT_S)
    except ApiException as error:
        if error.status in (403, 404):
            raise SecretMissing(f"Secret {namespace}/{name}: HTTP {error.status}") from None
        raise
    data: dict[str, str] = {}
    for key, value in (secret.data or {}).items():
        try:
            data[key] = base64.b64decode(value).decode("utf-8")
        except UnicodeDecodeError:
            continue  # a binary keystore (Strimzi's user.p12, ca.p12): the operator uses none
    return data


def list_configmaps(
    namespace: str, policy: str, *, api_client: client.ApiClient | None = None
) -> list[dict[str, Any]]:
    core = client.CoreV1Api(api_client or api())
    response = core.list_namespaced_config_map(
        namespace,
        label_selector=f"{names.LABEL_POLICY}={names.label_value(policy)},"
        f"{names.LABEL_MANAGED_BY}={names.MANAGER}",
        _preload_content=False,
        _request_timeout=REQUEST_TIMEOUT_S,
    )
    return list(json.loads(_raw_body(response)).get("items") or [])


# Only names and uids are needed: the API server sends metadata alone when asked this way.
_METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def list_pod_uids(namespace: str, *, api_client: client.ApiClient | None = None) -> dict[str, str]:
    """Name -> uid of every pod in the namespace, as the API server has them now."""
    core = client.CoreV1Api(api_client or api())
    response = core.list_namespaced_pod(
        namespace,
        _preload_content=False,
        _headers={"Accept": _METADATA_ONLY},
        _request_timeout=REQUEST_TIMEOUT_S,
    )
    items = json.loads(_raw_body(response)).get("items") or []
    return {
        str(item["metadata"].get("name")): str(item["metadata"].get("uid") or "")
        for item in items
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict)
    }


class ForeignConfigMap(Exception):
    """A ConfigMap with the name the operator would write exists and no policy of that name
    owns it: it is somebody else's, and the operator never overwrites it."""

    def __init__(self, namespace: str, name: str, owners: str) -> None:
        super().__init__(
            f"ConfigMap {namespace}/{name} exists and is not this policy's ({owners}); the "
            "operator does not overwrite it: rename or delete it"
        )
        self.namespace, self.name = namespace, name


class WriteConflict(Exception):
    """A conditional write found the ConfigMap changed since the poll read it (409 Conflict):
    another writer (a deposed or a new operator leader, a person) got there first. Nothing is
    overwritten; the next poll reads again."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(
            f"ConfigMap {namespace}/{name} changed since this poll read it; not overwritten, "
            "the next poll reads it again"
        )
        self.namespace, self.name = namespace, name


def upsert_configmap(body: Mapping[str, Any], *, api_client: client.ApiClient | None = None) -> str:
    """Write the policy's ConfigMap and return its new resourceVersion.

    With `metadata.resourceVersion` (the version the poll read) the write replaces exactly that
    version: WriteConflict if it changed since, or was deleted. Without, the ConfigMap is
    created: WriteConflict if another writer created it since the poll listed the policy's
    ConfigMaps; if one exists that the listing could not show (a policy of the same name owns
    it, an earlier incarnation counts, but its policy label was removed by hand), it is
    replaced conditioned on the version just read. Raises ForeignConfigMap for any other
    ConfigMap of that name."""
    core = client.CoreV1Api(api_client or api())
    namespace = body["metadata"]["namespace"]
    name = body["metadata"]["name"]
    if body["metadata"].get("resourceVersion"):
        return _replace(core, namespace, name, body)
    try:
        created = core.create_namespaced_config_map(
            namespace,
            body,  # type: ignore[arg-type]  # the client takes the object as a dict too
            _request_timeout=REQUEST_TIMEOUT_S,
        )
        return _resource_version(created)
    except ApiException as error:
        if error.status != 409:
            raise
    existing = core.read_namespaced_config_map(name, namespace, _request_timeout=REQUEST_TIMEOUT_S)
    existing_meta = existing.metadata
    assert existing_meta is not None  # the API server always sends metadata
    owners = existing_meta.owner_references or []
    policy = body["metadata"]["ownerReferences"][0]["name"]
    if not any(
        o.kind == names.KIND and o.api_version == names.API_VERSION and o.name == policy
        for o in owners
    ):
        described = ", ".join(f"owned by {o.kind} {o.name}" for o in owners) or "no owner"
        raise ForeignConfigMap(namespace, name, described) from None
    labels = existing_meta.labels or {}
    if labels.get(names.LABEL_POLICY) == body["metadata"]["labels"].get(names.LABEL_POLICY):
        raise WriteConflict(namespace, name)  # listed by the poll had it existed: created since
    metadata = {**body["metadata"], "resourceVersion": existing_meta.resource_version}
    return _replace(core, namespace, name, {**body, "metadata": metadata})


def _replace(core: client.CoreV1Api, namespace: str, name: str, body: Mapping[str, Any]) -> str:
    try:
        replaced = core.replace_namespaced_config_map(
            name,
            namespace,
            body,  # type: ignore[arg-type]  # the client takes the object as a dict too
            _request_timeout=REQUEST_TIMEOUT_S,
        )
    except ApiException as error:
        if error.status in (404, 409):  # changed or deleted since it was read
            raise WriteConflict(namespace, name) from None
        raise
    return _resource_version(replaced)


def _resource_version(configmap: client.V1ConfigMap) -> str:
    assert configmap.metadata is not None  # the API server always sends metadata
    return str(configmap.metadata.resource_version)


def _raw_body(response: object) -> bytes:
    """The body of a call made with `_preload_content=False`: the client then returns urllib3's
    response, not the model its signature names."""
    return cast(urllib3.BaseHTTPResponse, response).data


def delete_configmap(
    namespace: str,
    name: str,
    resource_version: str = "",
    *,
    api_client: client.ApiClient | None = None,
) -> None:
    """Delete the ConfigMap; with `resource_version`, only that version (WriteConflict if it
    changed since). One already gone is fine."""
    core = client.CoreV1Api(api_client or api())
    options = (
        client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version=resource_version)
        )
        if resource_version
        else None
    )
    try:
        core.delete_namespaced_config_map(
            name, namespace, body=options, _request_timeout=REQUEST_TIMEOUT_S
        )
    except ApiException as error:
        if error.status == 409:
            raise WriteConflict(namespace, name) from None
        if error.status != 404:
            raise
