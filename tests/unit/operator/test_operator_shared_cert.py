"""Which certificate a replica serves from the shared Secret (shared_cert.usable / renewed: pure;
the Secret itself, with replicas racing for it, in tests/integration/test_injection_webhook.py)."""

from __future__ import annotations

import datetime

from kafka_rebalance_operator.webhook import certs, shared_cert

NOW = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.UTC)
HOSTS = ["kro-webhook.ops.svc", "kro-webhook.ops.svc.cluster.local"]


def _secret(pem: certs.Pem, bundle: bytes | None = None) -> dict[str, bytes]:
    data = {shared_cert.CERT: pem.cert, shared_cert.KEY: pem.key}
    if bundle is not None:
        data[shared_cert.BUNDLE] = bundle
    return data


def test_an_empty_secret_has_nothing_to_serve() -> None:
    assert shared_cert.usable({}, HOSTS, NOW) is None


def test_a_valid_certificate_for_every_host_is_served_as_it_is() -> None:
    pem = certs.generate(HOSTS, NOW)
    found = shared_cert.usable(_secret(pem, pem.cert), HOSTS, NOW + datetime.timedelta(days=300))
    assert found is not None
    assert found.pem == pem and found.bundle == pem.cert


def test_a_certificate_missing_a_host_is_not_served() -> None:
    pem = certs.generate(HOSTS[:1], NOW)
    assert shared_cert.usable(_secret(pem), HOSTS, NOW) is None


def test_a_certificate_within_the_renewal_window_is_not_served() -> None:
    pem = certs.generate(HOSTS, NOW)
    late = NOW + certs.VALIDITY - shared_cert.RENEW_BEFORE + datetime.timedelta(minutes=1)
    assert shared_cert.usable(_secret(pem), HOSTS, late) is None


def test_garbage_in_the_secret_is_not_served() -> None:
    data = {shared_cert.CERT: b"not a certificate", shared_cert.KEY: b"nor a key"}
    assert shared_cert.usable(data, HOSTS, NOW) is None


def test_a_renewal_keeps_the_previous_certificate_trusted_while_it_is_valid() -> None:
    old = certs.generate(HOSTS, NOW)
    later = NOW + certs.VALIDITY - datetime.timedelta(days=10)
    made = shared_cert.renewed(_secret(old, old.cert), HOSTS, later)
    assert made.pem.cert != old.cert
    assert set(HOSTS) <= certs.hosts_of(made.pem.cert)
    assert certs.split_bundle(made.bundle) == [made.pem.cert, old.cert]
    assert shared_cert.usable(_secret(made.pem, made.bundle), HOSTS, later) == made


def test_a_renewal_drops_an_expired_certificate_from_the_bundle() -> None:
    old = certs.generate(HOSTS, NOW)
    made = shared_cert.renewed(_secret(old), HOSTS, NOW + certs.VALIDITY + datetime.timedelta(1))
    assert certs.split_bundle(made.bundle) == [made.pem.cert]
