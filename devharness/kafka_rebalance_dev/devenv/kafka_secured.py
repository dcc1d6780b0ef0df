"""The dev broker's secured listeners: SASL_PLAINTEXT, SSL (client certificate) and SASL_SSL.

They sit next to the PLAINTEXT listener (which everything else keeps using, and which stays the
inter-broker and readiness listener) so tests and developers can reach the same broker the way a
production cluster is reached. Everything is inline in server.properties: listener-scoped
`sasl.jaas.config` (no JAAS file, no `java.security.auth.login.config`), and PEM key material
(`ssl.keystore.type=PEM`) issued by the same small CA code the control plane uses. SCRAM users
live in the KRaft metadata, so they are written at `format` time (`--add-scram`); PLAIN users are
listed in the JAAS line. One fixed development user serves every mechanism.

Each listener is named after its security protocol, so `listener.name.<protocol lowercase>.*`
scopes a setting to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalance_dev.devenv.pki import CertificateAuthority, KeyPair

DEV_USERNAME = "dev"
DEV_PASSWORD = "dev-secret"  # a published development credential, not a secret
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
LISTENERS = ("SASL_PLAINTEXT", "SSL", "SASL_SSL")
SASL_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class ClusterTls:
    """PEM files of one cluster: its CA, the brokers' serving pair and a client pair."""

    ca: Path
    server: KeyPair
    client: KeyPair


def issue_tls(directory: Path) -> ClusterTls:
    """A fresh CA, a serving certificate for 127.0.0.1/localhost and a client certificate.

    One serving certificate covers every node: they all listen on 127.0.0.1, which is what
    clients verify the certificate against (kafka-python checks the hostname by default).
    """
    authority = CertificateAuthority(directory)
    server = authority.issue(
        "broker", "kafka-broker", server=True, dns_names=("localhost",), ips=("127.0.0.1",)
    )
    client = authority.issue("client", DEV_USERNAME, client=True)
    return ClusterTls(ca=authority.pair.cert, server=server, client=client)


def _jaas(mechanism: str) -> str:
    if mechanism == "PLAIN":
        return f'{_PLAIN_MODULE} required user_{DEV_USERNAME}="{DEV_PASSWORD}";'
    return f"{_SCRAM_MODULE} required;"


def listener_properties(ports: Mapping[str, int], tls: ClusterTls) -> dict[str, str]:
    """server.properties entries for the secured listeners (ports: listener name -> port).

    The caller appends `listeners`/`advertised.listeners` entries from `listener_addresses`; this
    gives the protocol map additions and the per-listener SASL and TLS settings. The keystore and
    truststore are broker-wide (only SSL listeners read them); client certificates are required
    on the SSL listener alone, so SASL_SSL clients need only the CA.
    """
    props: dict[str, str] = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": tls.server.cert.read_text(),
        "ssl.keystore.key": tls.server.key.read_text(),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": tls.ca.read_text(),
        "listener.name.ssl.ssl.client.auth": "required",
    }
    for listener in SASL_LISTENERS:
        if listener not in ports:
            continue
        scope = f"listener.name.{listener.lower()}"
        props[f"{scope}.sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
        for mechanism in SASL_MECHANISMS:
            props[f"{scope}.{mechanism.lower()}.sasl.jaas.config"] = _jaas(mechanism)
    return props


def listener_addresses(host: str, ports: Mapping[str, int]) -> list[str]:
    """`NAME://host:port` for each secured listener, in LISTENERS order."""
    return [f"{name}://{host}:{ports[name]}" for name in LISTENERS if name in ports]


def protocol_map_entries(ports: Mapping[str, int]) -> list[str]:
    return [f"{name}:{name}" for name in LISTENERS if name in ports]


def scram_format_args() -> list[str]:
    """`kafka-storage format` arguments that create the dev user for each SCRAM mechanism."""
    args: list[str] = []
    for mechanism in SCRAM_MECHANISMS:
        args += ["--add-scram", f'{mechanism}=[name="{DEV_USERNAME}",password="{DEV_PASSWORD}"]']
    return args


def escape_property(value: str) -> str:
    """A value as java.util.Properties reads it back: backslashes and line breaks escaped, so a
    multi-line PEM block stays one logical line."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
