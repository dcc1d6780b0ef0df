"""Kafka security settings from the policy's Secret, and secrets kept out of logs."""

from __future__ import annotations

import logging
import ssl

import pytest
from kafka_rebalance_common import redaction
from kafka_rebalance_operator.kafka_security import SecretError, client_settings, fingerprint


def test_no_secret_is_plaintext() -> None:
    assert client_settings(None) == {"security_protocol": "PLAINTEXT"}


def test_sasl_scram_over_tls() -> None:
    settings = client_settings(
        {
            "securityProtocol": "SASL_SSL",
            "saslMechanism": "SCRAM-SHA-512",
            "saslUsername": "op",
            "saslPassword": "s3cret-pw",
        }
    )
    assert settings["security_protocol"] == "SASL_SSL"
    assert settings["sasl_mechanism"] == "SCRAM-SHA-512"
    assert settings["sasl_plain_password"] == "s3cret-pw"
    assert isinstance(settings["ssl_context"], ssl.SSLContext)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"securityProtocol": "SASL_PLAINTEXT", "saslUsername": "u"}, "saslPassword"),
        (
            {
                "securityProtocol": "SASL_PLAINTEXT",
                "saslMechanism": "GSSAPI",
                "saslUsername": "u",
                "saslPassword": "p",
            },
            "saslMechanism",
        ),
        ({"securityProtocol": "TLS"}, "securityProtocol"),
        ({"securityProtocol": "SSL", "ca.crt": "not a pem"}, "ca.crt"),
        ({"securityProtocol": "SSL", "tls.crt": "x"}, "tls.key"),
    ],
)
def test_bad_secrets_name_the_key_never_the_value(data, key: str) -> None:
    with pytest.raises(SecretError) as error:
        client_settings(data)
    assert key in str(error.value)
    for value in data.values():
        if value not in ("u", "p", "x"):
            continue
        assert f"'{value}'" not in str(error.value)


def test_fingerprint_changes_with_content_and_hides_it() -> None:
    a = fingerprint({"saslPassword": "hunter22"})
    assert a != fingerprint({"saslPassword": "hunter23"})
    assert "hunter" not in a


def test_redacting_filter_masks_registered_secrets(caplog: pytest.LogCaptureFixture) -> None:
    redaction.register("very-secret-value")
    logger = logging.getLogger("kafka.test-redaction")
    handler_filter = redaction.RedactingFilter()
    caplog.handler.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.DEBUG, logger="kafka.test-redaction"):
            logger.debug("config: %s", {"sasl_plain_password": "very-secret-value"})
    finally:
        caplog.handler.removeFilter(handler_filter)
    assert "very-secret-value" not in caplog.text
    assert redaction.MASK in caplog.text


def test_redaction_masks_a_secret_in_text_and_bytes_form() -> None:
    """kafka-python at DEBUG logs the raw SASL/PLAIN request as a bytes repr, where non-ASCII
    characters of the password are escaped; both forms must be masked (sidecar and operator)."""
    redaction.register("päss-w0rd")
    record = logging.LogRecord(
        "kafka.protocol.parser", logging.DEBUG, __file__, 1, "Send: %r / %s", None, None
    )
    record.args = (b"\x00alice\x00p\xc3\xa4ss-w0rd", "config sasl_plain_password=päss-w0rd")
    assert redaction.RedactingFilter().filter(record)
    assert record.getMessage() == r"Send: b'\x00alice\x00***' / config sasl_plain_password=***"
