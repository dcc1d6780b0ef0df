"""The sidecar's Kafka security flags turned into kafka-python client settings.

Kept apart from the operator's `kafka_security` on purpose: the operator reads a Secret's keys
and builds an in-memory SSLContext, while the sidecar reads files a pod mounts from a Secret and
hands their paths to kafka-python (`ssl_cafile`, `ssl_certfile`, `ssl_keyfile`), which is the
usual Kubernetes way and needs no key material in the process arguments. The password comes from
a file or the environment, never from a flag, so it does not show in `ps` or in the pod spec's
args. Every error is one line naming the flag, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_rebalance_sidecar.credentials import CredentialWatch

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PASSWORD_ENV = "KAFKA_SASL_PASSWORD"
SECRET_SETTINGS = ("sasl_plain_password", "ssl_password")


class SecurityFlagError(ValueError):
    """The security flags do not make a usable client configuration (one line, no secrets)."""


@dataclass(frozen=True)
class SecurityFlags:
    """The flags as given on the command line (None: not given)."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password_file: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password_file: str | None = None


def _read_secret(flag: str, path: str) -> str:
    """A mounted Secret file's text without the trailing line break editors and `echo` add."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise SecurityFlagError(f"{flag}: cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise SecurityFlagError(f"{flag}: {path} is not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise SecurityFlagError(f"{flag}: {path} is empty")
    return text


def _check_readable(flag: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise SecurityFlagError(f"{flag}: cannot read {path}: {error.strerror}") from None


def client_options(flags: SecurityFlags, environ: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python keyword arguments (`security_protocol`, `sasl_*`, `ssl_*`) for the flags.

    Raises SecurityFlagError for inconsistent combinations: SASL flags without a SASL protocol,
    TLS files without a TLS protocol, a SASL protocol without a username or password, half a
    client certificate, or a file that cannot be read.
    """
    protocol = flags.security_protocol.upper()
    if protocol not in PROTOCOLS:
        raise SecurityFlagError(f"--security-protocol: expected one of {', '.join(PROTOCOLS)}")
    sasl = protocol.startswith("SASL_")
    tls = protocol.endswith("SSL")
    options: dict[str, Any] = {"security_protocol": protocol}

    # First flags that do not fit the protocol (the likelier mistake), then what is missing.
    sasl_flags = {
        "--sasl-mechanism": flags.sasl_mechanism,
        "--sasl-username": flags.sasl_username,
        "--sasl-password-file": flags.sasl_password_file,
    }
    tls_flags = {
        "--ssl-cafile": flags.ssl_cafile,
        "--ssl-certfile": flags.ssl_certfile,
        "--ssl-keyfile": flags.ssl_keyfile,
        "--ssl-key-password-file": flags.ssl_key_password_file,
    }
    for applies, given_flags, wanted in (
        (sasl, sasl_flags, "SASL_PLAINTEXT or SASL_SSL"),
        (tls, tls_flags, "SSL or SASL_SSL"),
    ):
        given = [name for name, value in given_flags.items() if value]
        if given and not applies:
            raise SecurityFlagError(
                f"{given[0]} needs --security-protocol {wanted} (it is {protocol})"
            )
    if sasl:
        mechanism = (flags.sasl_mechanism or "PLAIN").upper()
        if mechanism not in MECHANISMS:
            raise SecurityFlagError(f"--sasl-mechanism: expected one of {', '.join(MECHANISMS)}")
        if not flags.sasl_username:
            raise SecurityFlagError(f"--security-protocol {protocol} needs --sasl-username")
        if flags.sasl_password_file:
            password = _read_secret("--sasl-password-file", flags.sasl_password_file)
        elif environ.get(PASSWORD_ENV):
            password = environ[PASSWORD_ENV]
        else:
            raise SecurityFlagError(
                f"--security-protocol {protocol} needs a password: "
                f"--sasl-password-file FILE or ${PASSWORD_ENV}"
            )
        options.update(
            sasl_mechanism=mechanism,
            sasl_plain_username=flags.sasl_username,
            sasl_plain_password=password,
        )

    if not tls:
        return options
    if bool(flags.ssl_certfile) != bool(flags.ssl_keyfile):
        raise SecurityFlagError("--ssl-certfile and --ssl-keyfile: give both or neither")
    if flags.ssl_key_password_file and not flags.ssl_keyfile:
        raise SecurityFlagError("--ssl-key-password-file needs --ssl-keyfile")
    for flag, setting, path in (
        ("--ssl-cafile", "ssl_cafile", flags.ssl_cafile),
        ("--ssl-certfile", "ssl_certfile", flags.ssl_certfile),
        ("--ssl-keyfile", "ssl_keyfile", flags.ssl_keyfile),
    ):
        if path:
            _check_readable(flag, path)
            options[setting] = path
    if flags.ssl_key_password_file:
        options["ssl_password"] = _read_secret(
            "--ssl-key-password-file", flags.ssl_key_password_file
        )
    return options


def describe(options: Mapping[str, Any]) -> str:
    """A log-safe summary: protocol, mechanism and file paths. Neither the password nor the
    username appears (the username is not masked in logs, so it is not printed either)."""
    parts = [str(options.get("security_protocol", "PLAINTEXT"))]
    if "sasl_mechanism" in options:
        parts.append(str(options["sasl_mechanism"]))
    if options.get("ssl_cafile"):
        parts.append(f"CA {options['ssl_cafile']}")
    if options.get("ssl_certfile"):
        parts.append(f"client certificate {options['ssl_certfile']}")
    return ", ".join(parts)


def install_redaction(options: Mapping[str, Any]) -> None:
    """Mask the options' secrets in every log line, with the operator's redaction filter (the
    one mechanism for both: kafka-python at DEBUG logs its configuration and the raw SASL/PLAIN
    request, both holding the password)."""
    from kafka_rebalance_common import redaction

    secrets = [str(options[k]) for k in SECRET_SETTINGS if options.get(k)]
    if secrets:
        redaction.register(*secrets)
        redaction.install()


def credential_watch(
    flags: SecurityFlags, environ: Mapping[str, str], current: Mapping[str, Any]
) -> CredentialWatch | None:
    """A watch that re-reads the password files (`--sasl-password-file`,
    `--ssl-key-password-file`) so a rotated mounted Secret reaches the client without a restart;
    None when no secret comes from a file (an environment variable cannot change under a
    running process). The files are re-read with `client_options`, so a new value is checked
    exactly like the first one."""
    from kafka_rebalance_sidecar.credentials import CredentialWatch

    if not (flags.sasl_password_file or flags.ssl_key_password_file):
        return None

    def load() -> dict[str, Any]:
        options = client_options(flags, environ)
        return {k: options[k] for k in SECRET_SETTINGS if k in options}

    return CredentialWatch(load, {k: current[k] for k in SECRET_SETTINGS if k in current})
