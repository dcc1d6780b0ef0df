"""What spec.topicPattern costs a poll: 10,000 topic names, RE2 against Python's `re`.

    .venv/bin/python -m benchmarks.topic_patterns [--topics 10000] [--repeat 20]

Times the poll's own filter (`KafkaObserver.topic_partitions` over a cluster's described topics,
given as in-memory metadata so only the matching is measured) with the patterns the operator
compiles (RE2, topic_pattern.py), next to the same filter with Python's `re` as the reference in
the same run. For the catastrophic pattern `([a-z]+-?)*x`, `re` is timed on one name of growing
length (capped, stopping once a single name takes longer than --re-cap seconds) and the growth
per character is extrapolated to the 36-character name RE2 matches directly. Prints figures only.
"""

from __future__ import annotations

import argparse
import re
import statistics
import string
import time
from collections.abc import Callable
from typing import Any

from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver
from kafka_rebalance_operator.topic_pattern import compile_topic_pattern

PATTERNS = {
    "prefix": r"orders\..*",
    "alternation": r"(?i)(orders|payments|billing)-[a-z0-9-]+",
    "catastrophic": r"([a-z]+-?)*x",
}


class _Metadata:
    """Stands in for the admin client: describe_topics(None) returns the whole cluster."""

    def __init__(self, described: list[dict[str, Any]]):
        self.described = described

    def describe_topics(self, _topics: Any) -> list[dict[str, Any]]:
        return self.described


def topic_names(count: int) -> list[str]:
    """Names shaped like real clusters': team prefixes, dots and dashes, 8-60 characters, and
    one in ten exactly the 36 lowercase letters and dashes that make `re` backtrack."""
    teams = ("orders", "payments", "billing", "audit", "search", "ml-features")
    letters = string.ascii_lowercase.replace("x", "")
    names = []
    for i in range(count):
        if i % 10 == 0:
            body = "".join(letters[(i + k) % len(letters)] for k in range(34))
            names.append(f"{body[:12]}-{body[12:24]}-{body[24:]}")  # 36 characters, no x
        else:
            team = teams[i % len(teams)]
            separator = "." if (i // len(teams)) % 2 else "-"
            names.append(f"{team}{separator}{letters[i % 25]}{i:05d}-events")
    return names


def _observer(names: list[str]) -> KafkaObserver:
    observer = KafkaObserver.__new__(KafkaObserver)  # no client: only the filter is timed
    described = [{"name": n, "error_code": 0, "partitions": [{}] * 3} for n in names]
    observer.admin = _Metadata(described)
    return observer


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    samples, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), result


def _re_growth(pattern: str, cap_s: float) -> list[tuple[int, float]]:
    """Python `re` on one name of growing length, until one match exceeds cap_s."""
    compiled = re.compile(pattern)
    points = []
    for length in range(10, 37):
        name = "".join(string.ascii_lowercase[k % 26] for k in range(length))
        started = time.perf_counter()
        compiled.fullmatch(name)
        elapsed = time.perf_counter() - started
        points.append((length, elapsed))
        if elapsed > cap_s:
            break
    return points


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--re-cap", type=float, default=0.5, help="seconds for one re match")
    args = parser.parse_args(argv)

    names = topic_names(args.topics)
    observer = _observer(names)
    print(f"{args.topics} topic names, median of {args.repeat} runs of the poll's filter")
    print(
        f"{'pattern':<13} {'RE2 ms':>8} {'re ms':>10} {'RE2/re':>7} {'ns/name':>8} {'matched':>8}"
    )
    for label, text in PATTERNS.items():
        re2_s, (counts, _missing) = _time(
            lambda t=text: observer.topic_partitions(None, compile_topic_pattern(t)), args.repeat
        )
        if label == "catastrophic":
            re_cell, ratio_cell = "(below)", "-"
        else:
            re_s, (re_counts, _) = _time(
                lambda t=text: observer.topic_partitions(None, re.compile(t)), args.repeat
            )
            assert re_counts == counts, f"{label}: RE2 and re disagree"
            re_cell, ratio_cell = f"{re_s * 1e3:10.2f}", f"{re2_s / re_s:7.2f}"
        print(
            f"{label:<13} {re2_s * 1e3:8.2f} {re_cell:>10} {ratio_cell:>7} "
            f"{re2_s / len(names) * 1e9:8.0f} {len(counts):>8}"
        )

    points = _re_growth(PATTERNS["catastrophic"], args.re_cap)
    print(f"\nPython re, {PATTERNS['catastrophic']!r}, one name of n letters (no 'x'):")
    for length, seconds in points:
        print(f"  n={length:2d}  {seconds * 1e3:10.3f} ms")
    if len(points) >= 4:
        tail = [p for p in points[-4:] if p[1] > 0]
        growth = (tail[-1][1] / tail[0][1]) ** (1 / (tail[-1][0] - tail[0][0]))
        seconds_36 = tail[-1][1] * growth ** (36 - tail[-1][0])
        print(
            f"  growth x{growth:.2f} per character: one 36-character name would take about "
            f"{seconds_36:.3g} s ({seconds_36 / 3600:.3g} h) with re, holding the GIL; "
            f"RE2 took the whole poll's filter above"
        )


if __name__ == "__main__":
    main()
