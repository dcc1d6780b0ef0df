"""Kafka client security settings from the Secret a policy names.

The project's keys (the CRD reference documents the same): securityProtocol, saslMechanism,
saslUsername, saslPassword, ca.crt, tls.crt, tls.key, tls.key.password. Secrets that Strimzi
writes are accepted as they come (`normalize`): a KafkaUser Secret (SCRAM: `password` and
`sasl.jaas.config`; TLS: `user.crt`, `user.key`) and a cluster CA Secret (`ca.crt`). A project
key always wins over the Strimzi key it maps from, and keys the operator does not use (Strimzi's
binary `user.p12`, `ca.p12`, their `*.password`) are ignored, whatever their content.

Certificates are loaded into an in-memory SSLContext; the client key touches disk only inside a
private temporary directory for the instant `load_cert_chain` needs a path, then is deleted. The
values never reach logs: the caller registers the SECRET_KEYS values with `redaction.register`
before anything else sees them (usernames are not among them: see redaction's docstring).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Values to mask in logs, under the project's and Strimzi's key names (raw Secret data).
SECRET_KEYS = (
    "saslPassword",
    "tls.key",
    "tls.key.password",
    "password",
    "sasl.jaas.config",
    "user.key",
    "user.password",
    "ca.password",
)
# Strimzi key -> the project's key (documented in docs/crd-reference.md).
STRIMZI_KEYS = {"password": "saslPassword", "user.crt": "tls.crt", "user.key": "tls.key"}
PROJECT_KEYS = (
    "securityProtocol",
    "saslMechanism",
    "saslUsername",
    "saslPassword",
    "ca.crt",
    "tls.crt",
    "tls.key",
    "tls.key.password",
)
# A JAAS login module -> the SASL mechanism (Strimzi's SCRAM users are SCRAM-SHA-512 only).
_JAAS_MECHANISMS = {
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM-SHA-512",
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


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


def _text(value: Any) -> str | None:
    """A Secret value as text, or None for a value that is not UTF-8 (binary keystores)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def _jaas(config: str) -> tuple[str | None, dict[str, str]]:
    """The login module and the quoted options of a `sasl.jaas.config` value."""
    module = config.strip().split(None, 1)[0] if config.strip() else None
    options = {key: value.replace('\\"', '"') for key, value in _JAAS_OPTION.findall(config)}
    return module, options


def normalize(
    data: Mapping[str, Any] | None, ca: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The project's keys from a Secret's decoded `data`, in the project's or Strimzi's shape.

    `ca` is an optional second Secret holding the cluster CA (Strimzi's
    `<cluster>-cluster-ca-cert`): its `ca.crt` verifies the brokers, ahead of a `ca.crt` in
    `data` (in a Strimzi KafkaUser Secret that one is the *clients* CA). Keys the operator does
    not use are dropped; values may be str or bytes, and a binary value is dropped unless the
    operator needs its key.
    """
    raw = {k: _text(v) for k, v in (data or {}).items()}
    result = {k: v for k in PROJECT_KEYS if (v := raw.get(k))}
    for strimzi, ours in STRIMZI_KEYS.items():
        if ours not in result and raw.get(strimzi):
            result[ours] = raw[strimzi]  # type: ignore[assignment]
    jaas = raw.get("sasl.jaas.config")
    if jaas:
        module, options = _jaas(jaas)
        result.setdefault("saslUsername", options.get("username", ""))
        result.setdefault("saslPassword", options.get("password", ""))
        if module in _JAAS_MECHANISMS:
            result.setdefault("saslMechanism", _JAAS_MECHANISMS[module])
        result = {k: v for k, v in result.items() if v}
    cluster_ca = _text((ca or {}).get("ca.crt"))
    if cluster_ca:
        result["ca.crt"] = cluster_ca
    for key in PROJECT_KEYS:
        if key in (data or {}) and key not in result and (data or {}).get(key):
            raise SecretError(f"{key}: not UTF-8 text")
    return result


def client_settings(
    data: Mapping[str, Any] | None, ca: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """kafka-python client keyword arguments for the Secret's decoded `data` (None: plaintext),
    in the project's or Strimzi's key names, with the cluster CA Secret `ca` if given."""
    data = normalize(data, ca)
    if not data:
        return {"security_protocol": "PLAINTEXT"}
    protocol = data.get("securityProtocol") or (
        "SASL_SSL"
        if data.get("saslMechanism")
        else "SSL"
        if data.get("ca.crt") or data.get("tls.crt")
        else "PLAINTEXT"
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


def fingerprint(*secrets: Mapping[str, Any] | None) -> str:
    """A value that changes when a Secret changes (to rebuild the client), revealing nothing.
    Values may be str or bytes (binary keystores count too: a rotated p12 rebuilds the client)."""
    import hashlib

    digest = hashlib.sha256()
    for data in secrets:
        for key in sorted(data or {}):
            value = (data or {})[key]
            encoded = value if isinstance(value, bytes) else str(value).encode()
            digest.update(key.encode() + b"\0" + encoded + b"\0")
        digest.update(b"\1")
    return digest.hexdigest()[:16]
