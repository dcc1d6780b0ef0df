"""The self-signed webhook certificate every operator replica serves, kept in one Secret.

The chart renders the Secret with no data (`--webhook-cert-secret NAMESPACE/NAME`); the first
replica to start fills it with a key and a certificate for the webhook's hosts, and every
other replica, and every restart, serves that one. So any replica behind the webhook's Service
can answer an admission, and the webhook configuration's caBundle stays the same across
replicas and restarts.

Rules (`usable`, `renewed`: pure):
- the Secret's certificate covers every host and is valid for more than RENEW_BEFORE: serve it;
- otherwise a replica makes a new one at its start. The caBundle (`ca.crt`) keeps the previous
  certificate while it is still valid, beside the new, so replicas that started earlier and
  still serve it stay trusted until they restart.

Invariant: a write is conditional on the resourceVersion that was read. Of two replicas filling
or renewing the Secret at once the API server accepts one; the other reads the winner's and
serves that, so no two replicas ever settle on different certificates.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.rest import ApiException

from kafka_rebalance_operator.kube import kube_io
from kafka_rebalance_operator.webhook import certs

RENEW_BEFORE = datetime.timedelta(days=30)
CERT, KEY, BUNDLE = "tls.crt", "tls.key", "ca.crt"
ATTEMPTS = 5


class SharedCertError(RuntimeError):
    """The Secret cannot be read or written (the message names it and the reason)."""


@dataclass(frozen=True)
class Shared:
    pem: certs.Pem  # what this replica serves
    bundle: bytes  # the webhook configuration's caBundle (PEM, the serving certificate first)


def usable(
    data: Mapping[str, bytes], hosts: Iterable[str], now: datetime.datetime
) -> Shared | None:
    """The Secret's certificate, when it is one, covers `hosts` and is valid beyond
    `now + RENEW_BEFORE`; else None."""
    cert, key = data.get(CERT) or b"", data.get(KEY) or b""
    if not cert or not key:
        return None
    try:
        covered = set(hosts) <= certs.hosts_of(cert)
        fresh = certs.not_after(cert) > now + RENEW_BEFORE
    except ValueError:
        return None
    if not (covered and fresh):
        return None
    return Shared(certs.Pem(cert, key), data.get(BUNDLE) or cert)


def renewed(data: Mapping[str, bytes], hosts: Iterable[str], now: datetime.datetime) -> Shared:
    """A new certificate for `hosts`; the bundle also keeps the Secret's previous serving
    certificate while it is valid at `now` (never more than that one)."""
    pem = certs.generate(hosts, now)
    previous = data.get(CERT) or b""
    try:
        keep = bool(previous) and certs.not_after(previous) > now
    except ValueError:
        keep = False
    return Shared(pem, pem.cert + (previous if keep else b""))


def _decode(data: Mapping[str, str | bytes] | None) -> dict[str, bytes]:
    """A Secret's `data` (base64 text) as bytes."""
    return {k: base64.b64decode(v) for k, v in (data or {}).items()}


def load(
    namespace: str, name: str, hosts: Iterable[str], now: datetime.datetime | None = None
) -> Shared:
    """The certificate to serve, from Secret `namespace/name` (filled or renewed there when it
    has none usable). Raises SharedCertError naming the Secret."""
    hosts = [h for h in dict.fromkeys(hosts) if h]
    core = client.CoreV1Api(kube_io.api())
    for _ in range(ATTEMPTS):
        try:
            secret = core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            raise SharedCertError(
                f"webhook certificate Secret {namespace}/{name}: cannot read it "
                f"(HTTP {error.status} {error.reason}); the chart creates it with webhook.enabled"
            ) from None
        data = _decode(secret.data)
        at = now or datetime.datetime.now(datetime.UTC)
        found = usable(data, hosts, at)
        if found is not None:
            return found
        made = renewed(data, hosts, at)
        # The object as read: its resourceVersion makes the write conditional.
        body = kube_io.api().sanitize_for_serialization(secret)
        body["data"] = {
            k: base64.b64encode(v).decode("ascii")
            for k, v in {CERT: made.pem.cert, KEY: made.pem.key, BUNDLE: made.bundle}.items()
        }
        try:
            core.replace_namespaced_secret(name, namespace, body)
            return made
        except ApiException as error:
            if error.status != 409:
                raise SharedCertError(
                    f"webhook certificate Secret {namespace}/{name}: cannot write it "
                    f"(HTTP {error.status} {error.reason})"
                ) from None
            # another replica wrote it first: serve theirs (read again)
    raise SharedCertError(
        f"webhook certificate Secret {namespace}/{name}: still conflicting after "
        f"{ATTEMPTS} attempts"
    )
