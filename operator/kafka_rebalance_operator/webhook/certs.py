"""A self-signed serving certificate for the injection webhook (when cert-manager is not used).

`generate` makes a key and a certificate for the given DNS names and IP addresses (the chart's
Service names; in development 127.0.0.1); `write` puts them into a private temporary directory
for kopf's server. The certificate is its own CA: the operator puts it into the webhook
configuration's caBundle, so the API server trusts exactly this key and nothing else. It is
valid for a year. With the chart, every replica serves the one kept in a Secret
(shared_cert.py); without it, each start makes a new one (`self_signed`).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class Pem:
    """A certificate and its private key, PEM-encoded."""

    cert: bytes
    key: bytes


@dataclass(frozen=True)
class CertFiles:
    cert: Path  # PEM certificate (also the CA bundle)
    key: Path  # PEM private key (mode 0600)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def generate(hosts: Iterable[str], now: datetime.datetime | None = None) -> Pem:
    """Key and certificate for `hosts` (at least one), valid from `now` (default: now) for
    VALIDITY."""
    hosts = [h for h in dict.fromkeys(hosts) if h]
    if not hosts:
        raise ValueError("a webhook certificate needs at least one host name or address")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])])
    now = now or datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
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
    return Pem(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def write(pem: Pem, directory: Path | None = None) -> CertFiles:
    """`pem` as files in `directory` (default: a new private temporary directory)."""
    where = directory or Path(tempfile.mkdtemp(prefix="kafka-rebalance-webhook-"))
    files = CertFiles(where / "tls.crt", where / "tls.key")
    files.cert.write_bytes(pem.cert)
    files.key.touch(mode=0o600)
    files.key.write_bytes(pem.key)
    return files


def write_combined(pem: Pem, path: Path) -> Path:
    """`pem` as one file at `path`, certificate then key (mode 0600), replaced atomically: a
    reader sees the old pair or the new, never a certificate with another's key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".tls-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(pem.cert + pem.key)
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise
    return path


def self_signed(hosts: Iterable[str], directory: Path | None = None) -> CertFiles:
    """A new key and certificate for `hosts`, written to `directory` (see `write`)."""
    return write(generate(hosts), directory)


def hosts_of(cert_pem: bytes) -> set[str]:
    """The DNS names and IP addresses a PEM certificate is for (raises ValueError if it is not
    one)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {*san.get_values_for_type(x509.DNSName)} | {
        str(a) for a in san.get_values_for_type(x509.IPAddress)
    }


def not_after(cert_pem: bytes) -> datetime.datetime:
    """When a PEM certificate expires (raises ValueError if it is not one)."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def split_bundle(bundle: bytes) -> list[bytes]:
    """The PEM certificates of a bundle, each as its own PEM (raises ValueError on a malformed
    one)."""
    found = []
    for cert in x509.load_pem_x509_certificates(bundle) if bundle.strip() else []:
        found.append(cert.public_bytes(serialization.Encoding.PEM))
    return found
