"""The shared token the sidecar shows the application, read from a file (a mounted Secret).

The application can check that a POST comes from its own sidecar: the sidecar sends
`Authorization: Bearer <token>` with every batch, the token being the file's content with the
surrounding whitespace stripped. The file is looked at again at most every `check_interval_s`
and re-read when its identity, size or modification time changed, so a rotated Secret (the
kubelet swaps a symlink) is picked up without a restart.

Invariants: `value()` always returns a token that was valid when read (printable ASCII, no
spaces, not empty); a file that later goes missing or turns invalid keeps the last good token
(with one warning per bad spell), so a half-written rotation never sends an empty header.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

log = logging.getLogger("kafka_rebalance_sidecar.token")

HEADER = "Authorization"
SCHEME = "Bearer"


class TokenFileError(ValueError):
    """The token file cannot be used; the message names the file and the problem."""


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def parse_token(text: str, path: str) -> str:
    """The token in a file's text: stripped, non-empty, visible ASCII only (a header value)."""
    token = text.strip()
    if not token:
        raise TokenFileError(f"token file {path}: empty")
    if not all("\x21" <= c <= "\x7e" for c in token):
        raise TokenFileError(
            f"token file {path}: the token must be visible ASCII without spaces or line breaks"
        )
    return token


class TokenFile:
    """A token kept in step with its file; `value()` is cheap (a stat at most every interval)."""

    def __init__(
        self,
        path: str,
        check_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._identity, self._token = self._read()  # raises TokenFileError: a startup error
        self._next_check = clock() + check_interval_s
        self._failing = False

    def _read(self) -> tuple[tuple[int, int, int, int], str]:
        try:
            with open(self.path, encoding="ascii", errors="strict") as handle:
                stat = os.fstat(handle.fileno())
                text = handle.read()
        except UnicodeDecodeError:
            raise TokenFileError(f"token file {self.path}: not ASCII text") from None
        except OSError as error:
            raise TokenFileError(
                f"token file {self.path}: cannot read: {error.strerror or error}"
            ) from None
        return _identity(stat), parse_token(text, self.path)

    def value(self) -> str:
        now = self._clock()
        if now < self._next_check:
            return self._token
        self._next_check = now + self.check_interval_s
        try:
            if _identity(os.stat(self.path)) != self._identity:
                self._identity, token = self._read()
                if token != self._token:
                    log.info("token file %s changed: sending the new token", self.path)
                self._token = token
        except (OSError, TokenFileError) as error:
            if not self._failing:
                log.warning("%s; keeping the last token", error)
            self._failing = True
            return self._token
        if self._failing:
            log.info("token file %s readable again", self.path)
        self._failing = False
        return self._token

    def header(self) -> tuple[str, str]:
        return HEADER, f"{SCHEME} {self.value()}"
