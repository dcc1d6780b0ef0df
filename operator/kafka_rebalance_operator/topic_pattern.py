"""spec.topicPattern compiled with RE2, so matching cannot run away.

The operator serves every tenant from one process, and Python's `re` backtracks: a pattern such
as `([a-z]+-?)*x` next to a 36-character topic name takes exponential time while holding the
GIL, which freezes every policy's poll and the health endpoint. RE2 (the `google-re2` binding)
matches in time linear in the name's length for any pattern it accepts, which is why Kafka's own
regex subscriptions (KIP-848) use RE2/J. The invariant: a policy's pattern costs at most
O(len(pattern) * len(name)) per topic name, whatever a tenant writes.

RE2 refuses the constructs that need backtracking (lookarounds, backreferences, possessive
quantifiers, atomic groups) and some Java-only syntax. A refusal names the construct in one line,
so the policy is Stalled with a reason the tenant can act on; it never reaches a poll's matching.
Semantics follow Kafka: the pattern must match the whole topic name.
"""

from __future__ import annotations

import re
from typing import Protocol

import re2

# RE2's own limit on a compiled program is 8 MiB by default; a topic pattern is a line of text,
# so a much smaller budget refuses a pathological size before it costs memory.
MAX_PATTERN_LENGTH = 1024
_MAX_PROGRAM_BYTES = 1 << 20

# RE2 error text (the part after "<code>: ") -> the construct a user would recognise.
_CONSTRUCTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\(\?=$"), "lookahead (?=...)"),
    (re.compile(r"^\(\?!$"), "negative lookahead (?!...)"),
    (re.compile(r"^\(\?<=$"), "lookbehind (?<=...)"),
    (re.compile(r"^\(\?<!$"), "negative lookbehind (?<!...)"),
    (re.compile(r"^\(\?>$"), "atomic group (?>...)"),
    (re.compile(r"^\\[1-9]$"), "backreference \\N"),
    (re.compile(r"^\\k"), "named backreference \\k<name>"),
    (re.compile(r"[*+?}]\+$"), "possessive quantifier (*+, ++, ?+, {n,m}+)"),
    (re.compile(r"^\\[GZ]$"), "Java anchor \\G or \\Z (use $ or \\z)"),
    (re.compile(r"^\\p\{(java|Is|In)"), "Java character class \\p{java...}/\\p{Is...}/\\p{In...}"),
)


class TopicPatternError(ValueError):
    """The pattern cannot be used; the message names the construct (one line, no traceback)."""


class TopicPattern(Protocol):
    """What the poll needs of a compiled pattern (an RE2 pattern object has both)."""

    pattern: str

    def fullmatch(self, text: str) -> object | None: ...


def _explain(message: str) -> str:
    """RE2's error message ("invalid perl operator: (?=") as one line naming the construct."""
    code, _, fragment = message.partition(": ")
    for test, construct in _CONSTRUCTS:
        if test.search(fragment):
            return (
                f"{construct} is not supported: topic patterns use RE2 syntax, as Kafka's regex "
                "subscriptions do (no lookarounds, backreferences or possessive quantifiers)"
            )
    where = f" at {fragment!r}" if fragment else ""
    return f"not a valid RE2 pattern: {code or 'invalid syntax'}{where}"


def compile_topic_pattern(text: str) -> TopicPattern:
    """The RE2 pattern for `text`; raises TopicPatternError naming what RE2 cannot run."""
    if len(text) > MAX_PATTERN_LENGTH:
        raise TopicPatternError(
            f"longer than {MAX_PATTERN_LENGTH} characters ({len(text)}); list the topics instead"
        )
    options = re2.Options()
    options.log_errors = False  # the refusal is reported once, in the policy's status
    options.max_mem = _MAX_PROGRAM_BYTES
    try:
        compiled: TopicPattern = re2.compile(text, options)
        return compiled
    except re2.error as error:
        raw = error.args[0] if error.args else str(error)
        message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise TopicPatternError(_explain(message)) from None
