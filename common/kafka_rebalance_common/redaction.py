"""Keeps secret values out of every log line, whoever logs them, tracebacks included.

kafka-python logs its whole configuration (SASL password included) at DEBUG when a client is
created, and the raw SASL/PLAIN request, where the password appears in a bytes repr (non-ASCII
characters escaped); an exception raised while a client is built can carry either into a
traceback. A filter on the root handlers replaces every registered secret value, in both forms,
in the message, in the formatted traceback (`exc_info`) and in `stack_info`, so even a debugging
operator or sidecar does not leak a credential into its log. Self-contained on purpose: the
sidecar command uses it too.

What is masked, and why process-wide: only secret material (passwords, private keys and their
passphrases, JAAS lines holding a password) is registered, never usernames or other identifiers.
The masks are process-wide, not scoped to the policy a secret came from, because the lines that
leak a secret are written by kafka-python, which knows nothing of policies: a mask that applied
only to records carrying a policy's context would miss exactly those. Masking every occurrence
of a password is harmless for other tenants (a password is not a word their messages need),
whereas a username such as `orders` is also a topic, group or policy name, so masking it would
blank ordinary words in every tenant's messages; usernames are not credentials (Kafka prints
them in its own authorization errors), so they are never registered. A value shorter than
MIN_LENGTH is not registered either: masking "abc" everywhere would make logs unreadable, and a
secret that short is not protected by masking anyway.
"""

from __future__ import annotations

import logging
import threading

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
_TRACEBACKS = logging.Formatter()
MASK = "***"
MIN_LENGTH = 4


def register(*values: str | None) -> None:
    """Mask `values` (secret material only: see the module docstring) from now on."""
    with _LOCK:
        for value in values:
            if isinstance(value, str) and len(value) >= MIN_LENGTH:
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
    """Masks registered secrets in a record's message, traceback and stack."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _SECRETS:
            return True
        try:
            message = record.getMessage()
        except Exception:
            message = None
        if message is not None:
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[0] is not None:
            traceback_text = record.exc_text or _TRACEBACKS.formatException(record.exc_info)
            cleaned = redact(traceback_text)
            if cleaned != traceback_text:
                # Formatters print exc_text when set; dropping exc_info keeps one that would
                # format the exception again from printing the unmasked text.
                record.exc_text, record.exc_info = cleaned, None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install() -> None:
    """Attach the filter to every root handler (call after logging is configured)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
