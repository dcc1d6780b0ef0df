"""Kafka security settings from the policy's Secret, and secrets kept out of logs."""

from __future__ import annotations

import logging
import ssl
import sys

import pytest
from kafka_rebalance_common import redaction
from kafka_rebalance_operator.kafka.kafka_security import (
    SECRET_KEYS,
    SecretError,
    client_settings,
    fingerprint,
    normalize,
)


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


# ---- Strimzi's Secrets as they come --------------------------------------------------------------

P12 = bytes(range(256))  # not UTF-8, like a PKCS#12 keystore
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="orders" password="scram-pw-1";'
)


def test_strimzi_scram_user_secret_is_read_as_it_comes() -> None:
    settings = client_settings({"password": "scram-pw-1", "sasl.jaas.config": JAAS})
    assert settings["security_protocol"] == "SASL_SSL"  # Strimzi's SCRAM listeners use TLS
    assert settings["sasl_mechanism"] == "SCRAM-SHA-512"
    assert settings["sasl_plain_username"] == "orders"
    assert settings["sasl_plain_password"] == "scram-pw-1"


def test_project_keys_win_over_strimzi_keys() -> None:
    data = normalize(
        {
            "password": "scram-pw-1",
            "sasl.jaas.config": JAAS,
            "securityProtocol": "SASL_PLAINTEXT",
            "saslUsername": "other",
        }
    )
    assert data == {
        "securityProtocol": "SASL_PLAINTEXT",
        "saslUsername": "other",
        "saslPassword": "scram-pw-1",
        "saslMechanism": "SCRAM-SHA-512",
    }


def test_jaas_config_alone_gives_username_password_and_mechanism() -> None:
    plain = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="a b" '
        'password="p\\"w";'
    )
    assert normalize({"sasl.jaas.config": plain}) == {
        "saslUsername": "a b",
        "saslPassword": 'p"w',
        "saslMechanism": "PLAIN",
    }


def test_strimzi_tls_user_and_cluster_ca_secrets() -> None:
    user = {
        "ca.crt": "CLIENTS CA",
        "user.crt": "CERT",
        "user.key": "KEY",
        "user.p12": P12,
        "user.password": "p12-pw",
    }
    cluster_ca = {"ca.crt": "CLUSTER CA", "ca.p12": P12, "ca.password": "ca-pw"}
    # the cluster CA verifies the brokers, not the clients CA of the user Secret
    assert normalize(user, cluster_ca) == {
        "ca.crt": "CLUSTER CA",
        "tls.crt": "CERT",
        "tls.key": "KEY",
    }
    assert normalize(cluster_ca) == {"ca.crt": "CLUSTER CA"}


def test_binary_values_the_operator_does_not_use_are_ignored() -> None:
    assert client_settings({"user.p12": P12, "ca.p12": P12}) == {"security_protocol": "PLAINTEXT"}
    assert fingerprint({"user.p12": P12}) != fingerprint({"user.p12": P12[::-1]})


def test_a_binary_value_under_a_key_the_operator_uses_is_named() -> None:
    with pytest.raises(SecretError, match=r"^tls\.key: not UTF-8 text$"):
        client_settings({"tls.crt": "CERT", "tls.key": P12})


def test_strimzi_secret_values_are_registered_for_masking() -> None:
    assert {"password", "sasl.jaas.config", "user.key", "user.password"} <= set(SECRET_KEYS)
    assert "saslUsername" not in SECRET_KEYS


def _formatted(record: logging.LogRecord) -> str:
    handler = logging.StreamHandler()
    handler.addFilter(redaction.RedactingFilter())
    assert handler.filter(record)
    return logging.Formatter("%(message)s").format(record)


def test_tracebacks_are_scrubbed_too() -> None:
    redaction.register("tb-secret-9f2")
    try:
        raise RuntimeError("login failed for password tb-secret-9f2")
    except RuntimeError:
        record = logging.LogRecord(
            "kafka.conn", logging.ERROR, __file__, 1, "connect failed", None, sys.exc_info()
        )
    text = _formatted(record)
    assert "tb-secret-9f2" not in text
    assert "RuntimeError: login failed for password ***" in text
    assert "Traceback (most recent call last)" in text


def test_a_traceback_without_secrets_keeps_its_exception() -> None:
    redaction.register("unrelated-secret-1")
    try:
        raise ValueError("nothing to hide")
    except ValueError:
        info = sys.exc_info()
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, info)
    assert "ValueError: nothing to hide" in _formatted(record)
    assert record.exc_info is info


def test_stack_info_is_scrubbed() -> None:
    redaction.register("stack-secret-77")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    record.stack_info = 'Stack (most recent call last):\n  login("stack-secret-77")'
    assert "stack-secret-77" not in _formatted(record)


def test_usernames_and_short_values_never_mask_other_tenants_words() -> None:
    """Only secret material is registered, and the filter masks what was registered: the
    operator registers SECRET_KEYS, which hold no username, so a SASL user named `orders` leaves
    the word alone in every tenant's messages."""
    settings = client_settings(
        {"securityProtocol": "SASL_PLAINTEXT", "saslUsername": "orders", "saslPassword": "pw-1234"}
    )
    data = {"saslUsername": "orders", "saslPassword": "pw-1234"}
    redaction.register(*(data.get(k) for k in SECRET_KEYS))
    redaction.register("abc")  # too short to mask anywhere
    assert settings["sasl_plain_username"] == "orders"
    assert redaction.redact("policy orders: group orders, pw-1234, abc") == (
        "policy orders: group orders, ***, abc"
    )


def test_a_json_log_line_carries_the_scrubbed_traceback() -> None:
    import json

    from kafka_rebalance_common.logformat import JsonFormatter

    redaction.register("json-tb-secret-5")
    try:
        raise RuntimeError("SASL handshake with json-tb-secret-5 refused")
    except RuntimeError:
        record = logging.LogRecord(
            "kafka.conn", logging.ERROR, __file__, 1, "connect failed", None, sys.exc_info()
        )
    handler = logging.StreamHandler()
    handler.addFilter(redaction.RedactingFilter())
    assert handler.filter(record)
    event = json.loads(JsonFormatter().format(record))
    assert "json-tb-secret-5" not in json.dumps(event)
    assert "RuntimeError: SASL handshake with *** refused" in event["exception"]
