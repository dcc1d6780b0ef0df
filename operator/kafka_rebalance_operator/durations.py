"""Go-style duration strings ("30s", "1m30s", "500ms") as the CRD's pattern admits them.

The CRD validates the shape; this parser refuses anything else too, because a policy created
before validation existed (or by a client bypassing it) must not crash the operator. The shape
is checked here (durationpy alone accepts signs, days, weeks and text between the parts); the
arithmetic is durationpy's, the Kubernetes client's own Go-duration parser.
"""

from __future__ import annotations

import re

import durationpy

# The CRD's grammar: one or more <number><unit> parts, units ms, s, m, h; no sign, no spaces.
_SHAPE = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h))+")


class DurationError(ValueError):
    """A duration string that is not a sequence of <number><unit> parts."""


def parse_duration(text: str) -> float:
    """Seconds in `text`, e.g. "1m30s" -> 90.0."""
    if not isinstance(text, str) or not text:
        raise DurationError(f"not a duration: {text!r}")
    if not _SHAPE.fullmatch(text):
        raise DurationError(f"not a duration: {text!r} (use e.g. 30s, 5m, 1m30s, 500ms)")
    try:
        return durationpy.from_str(text).total_seconds()
    except durationpy.DurationError as error:  # out of range: digits beyond a timedelta
        raise DurationError(f"not a duration: {text!r} ({error})") from None


_BARE_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_flag_duration(text: str) -> float:
    """Seconds in a command-line duration: the policy grammar ("5s", "1m30s", "500ms"), or a
    bare non-negative number of seconds ("15", "2.5"), which the flags took before they took
    durations and still take so that existing command lines keep working."""
    if isinstance(text, str) and _BARE_SECONDS.fullmatch(text):
        return float(text)
    return parse_duration(text)
