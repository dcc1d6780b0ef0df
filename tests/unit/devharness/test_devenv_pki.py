"""The dev control plane's PKI: chains verify and identities are what RBAC expects."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kafka_rebalance_dev.devenv import pki


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_issued_certificates_chain_to_the_ca_and_carry_identity(tmp_path: Path) -> None:
    ca = pki.CertificateAuthority(tmp_path)
    admin = ca.issue("admin", "someone", organizations=("system:masters",), client=True)
    server = ca.issue(
        "srv", "kube-apiserver", server=True, dns_names=("localhost",), ips=("127.0.0.1",)
    )
    ca_cert = _load(ca.pair.cert)

    admin_cert = _load(admin.cert)
    admin_cert.verify_directly_issued_by(ca_cert)
    assert admin_cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == (
        "system:masters"
    )
    assert admin_cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "someone"
    eku = admin_cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]

    server_cert = _load(server.cert)
    server_cert.verify_directly_issued_by(ca_cert)
    sans = server_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert oct(server.key.stat().st_mode & 0o777) == "0o600"


def test_service_account_key_pair_matches(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    pair = pki.service_account_keys(tmp_path)
    private = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    public = serialization.load_pem_public_key(pair.cert.read_bytes())
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]
