"""Go-style duration strings ("30s", "1m30s", "500ms") as the CRD's pattern admits them.

The CRD validates the shape; this parser refuses anything else too, because a policy created
before validation existed (or by a client bypassing it) must not crash the operator.
"""

from __future__ import annotations

import re

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class DurationError(ValueError):
    """A duration string that is not a sequence of <number><unit> parts."""


def parse_duration(text: str) -> float:
    """Seconds in `text`, e.g. "1m30s" -> 90.0."""
    if not isinstance(text, str) or not text:
        raise DurationError(f"not a duration: {text!r}")
    position = 0
    total = 0.0
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(text):
        raise DurationError(f"not a duration: {text!r} (use e.g. 30s, 5m, 1m30s, 500ms)")
    return total
