"""The webhook's serving certificate kept current while it serves: renewed or replaced in its
Secret (shared_cert.py) without a restart, and its expiry exported.

`SharedCertFile` owns the one file the webhook server reads (certificate then key, replaced
atomically: certs.write_combined). Every `refresh_s` it loads the Secret again
(`shared_cert.load`: another replica's renewal is taken as it is; a certificate within
RENEW_BEFORE of its expiry is renewed), and when the pair changed it first points the webhook
configuration at the new bundle (which still holds the previous certificate while valid, so
the API server trusts the old and the new during the switch), then replaces the file; kopf's
server notices the new file (it compares the file's digest every `file_check_interval`) and
serves it on the same port. A failed refresh is logged and tried again at the next interval:
the certificate served stays, and its expiry metric shows how long it lasts.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from kafka_rebalance_operator import metrics
from kafka_rebalance_operator.webhook import certs, shared_cert

log = logging.getLogger(__name__)


def record_expiry(cert_pem: bytes) -> None:
    """Export when the served certificate expires (kafka_rebalance_webhook_certificate_expiry
    _timestamp_seconds); a file that holds no certificate leaves the gauge as it was."""
    try:
        expires = certs.not_after(cert_pem)
    except ValueError:
        log.warning("injection webhook: the served certificate could not be read for its expiry")
        return
    metrics.WEBHOOK_CERT_EXPIRY.set(expires.timestamp())


class SharedCertFile:
    """The Secret's certificate as the file the webhook serves (see the module docstring)."""

    def __init__(
        self,
        secret: tuple[str, str],
        hosts: Sequence[str],
        path: Path,
        point: Callable[[str], None],
    ) -> None:
        self.secret, self.hosts, self.path, self.point = secret, list(hosts), path, point
        self.current = shared_cert.load(*secret, self.hosts)
        certs.write_combined(self.current.pem, path)

    @property
    def bundle(self) -> bytes:
        return self.current.bundle

    def refresh(self) -> bool:
        """Load the Secret again; when its pair differs from the one served, point the
        configuration at the new bundle and replace the file. Returns whether it changed."""
        loaded = shared_cert.load(*self.secret, self.hosts)
        if loaded.pem == self.current.pem:
            return False
        self.point(base64.b64encode(loaded.bundle).decode("ascii"))
        certs.write_combined(loaded.pem, self.path)
        self.current = loaded
        log.info(
            "injection webhook: serving a renewed certificate from Secret %s/%s (expires %s)",
            *self.secret,
            certs.not_after(loaded.pem.cert).isoformat(),
        )
        return True

    async def run(self, refresh_s: float) -> None:
        """Refresh every `refresh_s` seconds, forever (cancel to stop)."""
        while True:
            await asyncio.sleep(refresh_s)
            try:
                await asyncio.to_thread(self.refresh)
            except Exception as error:
                log.warning(
                    "injection webhook: refreshing the certificate from Secret %s/%s failed "
                    "(the one served stays): %s",
                    *self.secret,
                    error,
                )
