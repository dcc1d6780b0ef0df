"""spec.topicPattern: RE2 syntax, linear-time matching, refusals that name the construct."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from kafka_rebalance_operator.policy import PolicyError, parse_spec
from kafka_rebalance_operator.topic_pattern import TopicPatternError, compile_topic_pattern

BASE = {
    "groupId": "orders",
    "kafka": {"bootstrapServers": "kafka:9092"},
    "members": {"selector": {"matchLabels": {"app": "orders"}}},
}


@pytest.mark.parametrize(
    ("pattern", "name", "matched"),
    [
        (r"orders\..*", "orders.eu", True),
        (r"orders\..*", "xorders.eu", False),  # whole-name match, as Kafka's subscriptions
        (r"orders", "orders-eu", False),
        (r"(?i)ORDERS-[a-z]+", "orders-eu", True),
        (r"(?P<area>[a-z]+)\.events", "billing.events", True),
        (r"(?<area>[a-z]+)\.events", "billing.events", True),
    ],
)
def test_matches_whole_names(pattern: str, name: str, matched: bool) -> None:
    assert (compile_topic_pattern(pattern).fullmatch(name) is not None) is matched


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"orders(?=-eu)", "lookahead"),
        (r"orders(?!-eu).*", "negative lookahead"),
        (r"(?<=x)orders", "lookbehind"),
        (r"(?<!x)orders", "negative lookbehind"),
        (r"(a)\1", "backreference"),
        (r"(?<n>a)\k<n>", "named backreference"),
        (r"[a-z]++x", "possessive quantifier"),
        (r"a{2}+", "possessive quantifier"),
        (r"(?>orders)", "atomic group"),
        (r"orders\Z", "\\Z"),
        (r"\p{javaLowerCase}+", "Java character class"),
        (r"orders(", "missing )"),
        (r"[z-a]", "invalid character class range"),
    ],
)
def test_refusals_name_the_construct(pattern: str, construct: str) -> None:
    with pytest.raises(TopicPatternError) as error:
        compile_topic_pattern(pattern)
    assert construct in str(error.value)
    assert "\n" not in str(error.value)


def test_a_refused_pattern_is_an_invalid_spec_naming_field_and_construct() -> None:
    with pytest.raises(PolicyError, match=r"^spec\.topicPattern: lookahead \(\?=\.\.\.\)"):
        parse_spec({**BASE, "topicPattern": "orders(?=-eu)"})


def test_an_overlong_pattern_is_refused() -> None:
    with pytest.raises(TopicPatternError, match="longer than 1024"):
        compile_topic_pattern("a" * 1025)


def test_the_catastrophic_pattern_completes() -> None:
    """`([a-z]+-?)*x` against long names is exponential for a backtracking engine. Run in a
    child process whose time limit is the failure condition: generous (60 s) because RE2
    needs well under a second for all 10,000 names, while Python's `re` would need years for one."""
    script = textwrap.dedent(
        """
        from kafka_rebalance_operator.policy import parse_spec
        spec = parse_spec({
            "groupId": "g", "kafka": {"bootstrapServers": "k:9092"},
            "members": {"selector": {"matchLabels": {"a": "b"}}},
            "topicPattern": "([a-z]+-?)*x",
        })
        names = ["abcdefghijklmnopqrstuvwxyzabcdefghij"[: 30 + i % 7] for i in range(10_000)]
        names.append("orders-x")
        print(sum(1 for n in names if spec.topic_pattern.fullmatch(n)))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "1"
