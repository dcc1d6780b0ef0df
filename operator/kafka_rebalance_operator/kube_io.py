"""Kubernetes reads and writes the poll needs beyond what kopf does: the policy's ConfigMaps and
its Secret. Blocking (the official client): call from a worker thread.

Least privilege: ConfigMaps are listed by the policy's label (list/create/patch/delete on
configmaps), the Secret is read by name (get on secrets).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

__all__ = [
    "ApiException",
    "SecretMissing",
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
        secret = core.read_namespaced_secret(name, namespace)
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
    )
    return list(json.loads(response.data).get("items") or [])


def upsert_configmap(
    body: Mapping[str, Any], *, api_client: client.ApiClient | None = None
) -> None:
    core = client.CoreV1Api(api_client or api())
    namespace = body["metadata"]["namespace"]
    name = body["metadata"]["name"]
    try:
        core.create_namespaced_config_map(namespace, body)
    except ApiException as error:
        if error.status != 409:
            raise
        core.replace_namespaced_config_map(name, namespace, body)


def delete_configmap(
    namespace: str, name: str, *, api_client: client.ApiClient | None = None
) -> None:
    core = client.CoreV1Api(api_client or api())
    try:
        core.delete_namespaced_config_map(name, namespace)
    except ApiException as error:
        if error.status != 404:
            raise
