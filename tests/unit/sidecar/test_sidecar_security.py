"""The sidecar's Kafka security flags: what reaches kafka-python, and one-line refusals.

The end-to-end proof (a sidecar consuming through SASL and TLS listeners) is in
tests/integration/test_kafka_security.py; these pin the flag rules without a broker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafka_rebalance.sidecar_security import (
    PASSWORD_ENV,
    SecurityFlagError,
    SecurityFlags,
    client_options,
    describe,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name, text in {
        "password": "s3cret-from-file\n",
        "ca.crt": "ca",
        "tls.crt": "cert",
        "tls.key": "key",
        "key-password": "kp\r\n",
        "empty": "",
    }.items():
        (tmp_path / name).write_text(text)
        paths[name] = str(tmp_path / name)
    return paths


def test_plaintext_by_default() -> None:
    assert client_options(SecurityFlags(), {}) == {"security_protocol": "PLAINTEXT"}


def test_sasl_password_from_file_wins_over_environment(files: dict[str, str]) -> None:
    flags = SecurityFlags(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="alice",
        sasl_password_file=files["password"],
    )
    assert client_options(flags, {PASSWORD_ENV: "from-env"}) == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "s3cret-from-file",  # the trailing newline is not the password
    }


def test_sasl_password_from_environment_and_plain_by_default() -> None:
    flags = SecurityFlags(security_protocol="SASL_PLAINTEXT", sasl_username="alice")
    options = client_options(flags, {PASSWORD_ENV: "from-env"})
    assert options["sasl_mechanism"] == "PLAIN"
    assert options["sasl_plain_password"] == "from-env"


def test_sasl_ssl_passes_file_paths(files: dict[str, str]) -> None:
    flags = SecurityFlags(
        security_protocol="SASL_SSL",
        sasl_username="alice",
        ssl_cafile=files["ca.crt"],
        ssl_certfile=files["tls.crt"],
        ssl_keyfile=files["tls.key"],
        ssl_key_password_file=files["key-password"],
    )
    options = client_options(flags, {PASSWORD_ENV: "pw"})
    assert options["ssl_cafile"] == files["ca.crt"]
    assert options["ssl_certfile"] == files["tls.crt"]
    assert options["ssl_keyfile"] == files["tls.key"]
    assert options["ssl_password"] == "kp"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            SecurityFlags(sasl_mechanism="PLAIN"),
            "--sasl-mechanism needs --security-protocol SASL_PLAINTEXT or SASL_SSL",
        ),
        (
            SecurityFlags(security_protocol="SSL", sasl_username="alice"),
            "--sasl-username needs --security-protocol SASL_PLAINTEXT or SASL_SSL (it is SSL)",
        ),
        (
            SecurityFlags(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN"),
            "--security-protocol SASL_PLAINTEXT needs --sasl-username",
        ),
        (
            SecurityFlags(security_protocol="SASL_SSL", sasl_username="alice"),
            f"needs a password: --sasl-password-file FILE or ${PASSWORD_ENV}",
        ),
        (
            SecurityFlags(security_protocol="SASL_PLAINTEXT", ssl_cafile="/x"),
            "--ssl-cafile needs --security-protocol SSL or SASL_SSL (it is SASL_PLAINTEXT)",
        ),
        (
            SecurityFlags(security_protocol="SSL", ssl_certfile="/x"),
            "--ssl-certfile and --ssl-keyfile: give both or neither",
        ),
        (
            SecurityFlags(security_protocol="SSL", ssl_cafile="/no/such/ca.crt"),
            "--ssl-cafile: cannot read /no/such/ca.crt",
        ),
        (SecurityFlags(security_protocol="TLS"), "--security-protocol: expected one of"),
    ],
)
def test_inconsistent_flags_are_refused(flags: SecurityFlags, message: str) -> None:
    with pytest.raises(SecurityFlagError) as info:
        client_options(flags, {})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_empty_password_file_is_refused(files: dict[str, str]) -> None:
    flags = SecurityFlags(
        security_protocol="SASL_PLAINTEXT",
        sasl_username="alice",
        sasl_password_file=files["empty"],
    )
    with pytest.raises(SecurityFlagError, match=r"--sasl-password-file: .* is empty"):
        client_options(flags, {PASSWORD_ENV: "would-be-ignored"})


def test_describe_never_shows_the_password_or_username(files: dict[str, str]) -> None:
    flags = SecurityFlags(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password_file=files["password"],
        ssl_cafile=files["ca.crt"],
    )
    text = describe(client_options(flags, {}))
    assert text == f"SASL_SSL, SCRAM-SHA-256, CA {files['ca.crt']}"
    assert "s3cret" not in text and "alice" not in text


def test_cli_refuses_with_one_line_and_status_2(tmp_path: Path) -> None:
    """The real command line: the flag error is the only stderr line, and no secret in it."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafka_rebalance.cli",
            "sidecar",
            "--bootstrap-servers=127.0.0.1:1",
            "--group=g",
            "--topics=t",
            "--member=m-0",
            f"--assignment={tmp_path / 'assignment.json'}",
            "--handler=kafka_rebalance_dev.demo.ledger:record",
            "--security-protocol=SASL_SSL",
            "--sasl-mechanism=SCRAM-SHA-256",
            "--ssl-certfile=/x",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", PASSWORD_ENV: "top-secret-value"},
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "kafka-rebalance sidecar: error: --security-protocol SASL_SSL needs --sasl-username"
    ]
    assert "top-secret-value" not in result.stderr + result.stdout


# ---- rotation: a changed mounted password file reaches the client --------------------------------


def _sasl_flags(password_file: str) -> SecurityFlags:
    return SecurityFlags(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="rotating",
        sasl_password_file=password_file,
    )


def _kubelet_swap(directory: Path, text: str) -> None:
    """Update a mounted Secret as the kubelet does: a new data directory, the `..data` symlink
    swapped atomically, the key a symlink through it (the file's own mtime says nothing)."""
    import os
    import uuid

    data = directory / f"..{uuid.uuid4().hex[:6]}"
    data.mkdir()
    (data / "password").write_text(text)
    link = directory / "..data_tmp"
    link.symlink_to(data.name)
    os.replace(link, directory / "..data")
    if not (directory / "password").is_symlink():
        (directory / "password").symlink_to("..data/password")


def test_a_rotated_password_file_is_noticed_and_masked(tmp_path: Path) -> None:
    from kafka_rebalance_common import redaction

    from kafka_rebalance.sidecar_security import credential_watch

    _kubelet_swap(tmp_path, "first-pass-1\n")
    flags = _sasl_flags(str(tmp_path / "password"))
    options = client_options(flags, {})
    watch = credential_watch(flags, {}, options)
    assert watch is not None
    assert watch.check() is None  # nothing changed

    _kubelet_swap(tmp_path, "second-pass-2\n")
    assert watch.check() == {"sasl_plain_password": "second-pass-2"}
    assert watch.check() is None  # reported once
    assert redaction.redact("pw second-pass-2") == "pw ***"


def test_a_half_written_password_file_keeps_the_current_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka_rebalance.sidecar_security import credential_watch

    password = tmp_path / "password"
    password.write_text("first-pass-1")
    flags = _sasl_flags(str(password))
    watch = credential_watch(flags, {}, client_options(flags, {}))
    assert watch is not None
    password.write_text("")  # mid-update
    assert watch.check() is None
    assert "is empty" in caplog.text and "first-pass-1" not in caplog.text
    password.write_text("third-pass-3")
    assert watch.check() == {"sasl_plain_password": "third-pass-3"}


def test_a_password_from_the_environment_has_nothing_to_watch() -> None:
    from kafka_rebalance.sidecar_security import credential_watch

    flags = SecurityFlags(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="u"
    )
    options = client_options(flags, {PASSWORD_ENV: "env-pass"})
    assert credential_watch(flags, {PASSWORD_ENV: "env-pass"}, options) is None
