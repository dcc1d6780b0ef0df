"""A tiny HTTPS JSON client for the local API server, plus kubeconfig files.

The harness needs a handful of calls (readiness, create the fake Node, check its condition);
the standard library does that with client-certificate TLS in a few lines and keeps `dev status`
quick. Tests that exercise real API behaviour use the `kubernetes` client or kubectl instead.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml


class KubeApiError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status}: {body[:500]}")


class KubeClient:
    """Client-certificate authenticated requests against https://127.0.0.1:<port>."""

    def __init__(self, server: str, ca: Path, cert: Path, key: Path, timeout: float = 5.0) -> None:
        self.server = server.rstrip("/")
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=str(ca))
        self.context.load_cert_chain(str(cert), str(key))

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=self.timeout) as resp:
                raw = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise KubeApiError(exc.code, exc.read().decode(errors="replace")) from exc
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, body: Any) -> Any:
        """POST, treating 409 AlreadyExists as success (start-up steps may be retried)."""
        try:
            return self.request("POST", path, body)
        except KubeApiError as exc:
            if exc.status == 409:
                return None
            raise


def probe_https(url: str, timeout: float = 2.0, context: ssl.SSLContext | None = None) -> bool:
    """GET url and report whether it answered 200 'ok'.

    Used for the controller manager's and scheduler's /healthz, which serve a self-signed
    certificate from their cert dir: verification is off for this local loopback probe only.
    """
    if context is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    user: str,
    cert: Path | None = None,
    key: Path | None = None,
    token: str | None = None,
    namespace: str | None = None,
    cluster: str = "kafka-rebalance-dev",
) -> Path:
    """A self-contained kubeconfig (certificates embedded) for one identity."""
    credentials: dict[str, str] = {}
    if cert is not None and key is not None:
        credentials = {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)}
    if token is not None:
        credentials = {"token": token}
    context: dict[str, str] = {"cluster": cluster, "user": user}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": user, "context": context}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
