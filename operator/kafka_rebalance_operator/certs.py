"""A self-signed serving certificate for the injection webhook (when cert-manager is not used).

Generated at every start, in a private temporary directory, for the given DNS names and IP
addresses (the chart's Service names; in development 127.0.0.1). The certificate is its own CA:
the operator puts it into the webhook configuration's caBundle, so the API server trusts
exactly this key and nothing else. It is valid for a year; a restart makes a new one.
"""

from __future__ import annotations

import datetime
import ipaddress
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class CertFiles:
    cert: Path  # PEM certificate (also the CA bundle)
    key: Path  # PEM private key (mode 0600)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def self_signed(hosts: Iterable[str], directory: Path | None = None) -> CertFiles:
    """Key and certificate for `hosts` (at least one), written to `directory` (default: a new
    private temporary directory)."""
    hosts = [h for h in dict.fromkeys(hosts) if h]
    if not hosts:
        raise ValueError("a webhook certificate needs at least one host name or address")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                key_cert_sign=True,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    where = directory or Path(tempfile.mkdtemp(prefix="kafka-rebalance-webhook-"))
    files = CertFiles(where / "tls.crt", where / "tls.key")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files
