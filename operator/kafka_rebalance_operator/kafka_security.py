"""Kafka client security settings from the Secret a policy names.

Keys (the CRD reference documents the same): securityProtocol, saslMechanism, saslUsername,
saslPassword, ca.crt, tls.crt, tls.key, tls.key.password. Certificates are loaded into an
in-memory SSLContext; the client key touches disk only inside a private temporary directory for
the instant `load_cert_chain` needs a path, then is deleted. The values never reach logs: the
caller registers them with `redaction.register` before anything else sees them.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECRET_KEYS = ("saslPassword", "tls.key", "tls.key.password", "saslUsername")


class SecretError(ValueError):
    """The Secret's content cannot configure a client (message names the key, never a value)."""


def _ssl_context(data: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ca = data.get("ca.crt")
    if ca:
        try:
            context.load_verify_locations(cadata=ca)
        except ssl.SSLError as error:
            raise SecretError("ca.crt: not a PEM certificate") from error
    cert, key = data.get("tls.crt"), data.get("tls.key")
    if bool(cert) != bool(key):
        raise SecretError("tls.crt and tls.key: give both or neither")
    if cert and key:
        with tempfile.TemporaryDirectory(prefix="krb-tls-") as directory:
            os.chmod(directory, 0o700)
            cert_path = os.path.join(directory, "tls.crt")
            key_path = os.path.join(directory, "tls.key")
            for path, text in ((cert_path, cert), (key_path, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(text)
            try:
                context.load_cert_chain(cert_path, key_path, data.get("tls.key.password") or None)
            except ssl.SSLError as error:
                raise SecretError("tls.crt/tls.key: not a matching PEM certificate and key") from (
                    error
                )
    return context


def client_settings(data: Mapping[str, str] | None) -> dict[str, Any]:
    """kafka-python client keyword arguments for the Secret's decoded `data` (None: plaintext)."""
    if not data:
        return {"security_protocol": "PLAINTEXT"}
    protocol = data.get("securityProtocol") or (
        "SASL_SSL" if data.get("saslMechanism") else "SSL" if data.get("ca.crt") else "PLAINTEXT"
    )
    if protocol not in PROTOCOLS:
        raise SecretError(f"securityProtocol: one of {', '.join(PROTOCOLS)}")
    settings: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL"):
        mechanism = data.get("saslMechanism") or "PLAIN"
        if mechanism not in MECHANISMS:
            raise SecretError(f"saslMechanism: one of {', '.join(MECHANISMS)}")
        if not data.get("saslUsername") or not data.get("saslPassword"):
            raise SecretError("saslUsername and saslPassword: required for SASL")
        settings.update(
            sasl_mechanism=mechanism,
            sasl_plain_username=data["saslUsername"],
            sasl_plain_password=data["saslPassword"],
        )
    if protocol.endswith("SSL"):
        settings["ssl_context"] = _ssl_context(data)
    return settings


def fingerprint(data: Mapping[str, str] | None) -> str:
    """A value that changes when the Secret changes (to rebuild the client), revealing nothing."""
    import hashlib

    digest = hashlib.sha256()
    for key in sorted(data or {}):
        digest.update(key.encode() + b"\0" + (data or {})[key].encode() + b"\0")
    return digest.hexdigest()[:16]
