"""Keeps secret values out of every log line, whoever logs them.

kafka-python logs its whole configuration (SASL password included) at DEBUG when a client is
created, and the raw SASL/PLAIN request, where the password appears in a bytes repr (non-ASCII
characters escaped). A filter on the root handlers replaces every registered secret
value in both forms, so even a debugging operator or sidecar does not leak a credential into its
log. Self-contained on purpose: the sidecar command uses it too.
"""

from __future__ import annotations

import logging
import threading

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
MASK = "***"


def register(*values: str | None) -> None:
    with _LOCK:
        for value in values:
            if value and len(value) >= 4:
                _SECRETS.add(value)
                _SECRETS.add(repr(value.encode())[2:-1])  # as inside a logged bytes repr


def redact(text: str) -> str:
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _SECRETS:
            try:
                message = record.getMessage()
            except Exception:
                return True
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


def install() -> None:
    """Attach the filter to every root handler (call after logging is configured)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
