"""One line for each way a `kubectl cgp` request fails. Pure: no client import.

The Kubernetes client raises an `ApiException` with the API server's Status object as its body,
or, when no server answers, urllib3's retry error whose text is a traceback-sized repr. People
need what kubectl says instead: which server could not be reached, who may not do which verb on
which resource where, which object does not exist. Every line here is a single line (no newline
from a server message survives), because `main` prints it after the command name and exits 1.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

RESOURCE = "consumergrouppolicies.kafka-rebalance.io"
ROLES_HINT = (
    "a namespace's view role reads policies and its edit role writes and approves them when "
    "the chart's aggregated roles are installed"
)


@dataclass(frozen=True)
class Request:
    """What the plugin asked for, so a refusal can name it (the server's text may not)."""

    verb: str
    namespace: str | None  # None: every namespace
    name: str | None = None
    resource: str = RESOURCE


def _server_message(body: str | bytes | None) -> str:
    if not body:
        return ""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return ""
    return str(data.get("message") or "") if isinstance(data, dict) else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def api_error(status: int, reason: str, body: str | bytes | None, request: Request) -> str:
    """The line for an HTTP error answer of the API server to `request`."""
    message = _server_message(body)
    where = f"namespace {request.namespace}" if request.namespace else "any namespace"
    if status == 403:
        user = re.search(r'User "([^"]+)"', message)
        who = user.group(1) if user else "you"
        return _one_line(
            f"forbidden: {who} may not {request.verb} {request.resource} in {where} ({ROLES_HINT})"
        )
    if status == 404:
        if request.name is not None:
            return f"policy {request.namespace}/{request.name} not found"
        return (
            f"the API server does not serve {request.resource}: is the CRD installed? "
            "(kubectl get crd consumergrouppolicies.kafka-rebalance.io)"
        )
    if status == 401:
        return "unauthorized: the API server refused the kubeconfig's credentials (expired?)"
    return _one_line(f"HTTP {status}: {message or reason}")


def unreachable(server: str, error: BaseException) -> str:
    """The line for a request no API server answered (refused, no route, TLS, DNS)."""
    cause: BaseException = error
    reason = getattr(error, "reason", None)  # urllib3's MaxRetryError carries the last error
    if isinstance(reason, BaseException):
        cause = reason
    text = str(cause)
    # urllib3 puts "<object at 0x...>: " before the OS error; keep what follows.
    text = text.split(">: ", 1)[-1]
    for marker, plain in (
        ("Connection refused", "connection refused"),
        ("Name or service not known", "unknown host"),
        ("nodename nor servname", "unknown host"),
        ("timed out", "timed out"),
        ("CERTIFICATE_VERIFY_FAILED", "its certificate is not trusted"),
        ("No route to host", "no route to host"),
    ):
        if marker in text:
            text = plain
            break
    return _one_line(f"cannot reach the API server at {server}: {text} (is the cluster up?)")
