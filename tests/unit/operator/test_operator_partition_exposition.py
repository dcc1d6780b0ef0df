"""/metrics as Prometheus reads it: the per-partition families' exposition text after each poll
of a recorded sequence is the text the operator served when every partition had its own
labelled child (recorded from `50b2367` in tests/data/metrics/partition_exposition.json:
regenerate with `python -m tests.unit.operator.test_operator_partition_exposition` on that commit
only).

The sequence covers unknown lags and time lags, the series cap (dropped counts, a lowered cap,
the places freed by partitions that leave), topics that come and go, a groupId change, rows
handed over as tuples rather than columns, two policies side by side, and `forget`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from kafka_rebalance_operator import metrics
from kafka_rebalance_operator.lag import STATES, Layout
from prometheus_client import generate_latest

RECORDED = Path(__file__).parents[2] / "data" / "metrics" / "partition_exposition.json"
FAMILIES = (
    "kafka_rebalance_partition_lag",
    "kafka_rebalance_partitions",
    "kafka_rebalance_partition_series_dropped",
    "kafka_rebalance_partition_time_lag_seconds",
)
POLICIES = ("expo-a", "expo-b")
NAN = math.nan


def _columns(counts: dict[str, int], lags: list[int], times: list[float]) -> metrics.PartitionRows:
    layout = Layout.of(counts)
    states = np.array([i % len(STATES) for i in range(layout.size)], np.int8)
    return metrics.PartitionRows(
        layout, states, np.array(lags, np.int64), np.array(times, np.float64)
    )


def _steps() -> Iterator[tuple[str, Any]]:
    """(label, action) in order; each action records one poll (or forgets a policy)."""
    ab = {"a": 3, "b": 4}
    yield (
        "first poll, 2 over the cap",
        lambda: metrics.record_partitions(
            "ns", "expo-a", "g",
            _columns(ab, [1, -1, 3, 2**40, 0, 7, 8], [0.5, NAN, 12345.678, 0.125, NAN, 3.0, 1e-3]),
            max_series=5,
        ),
    )  # fmt: skip
    yield (
        "second policy, below its cap",
        lambda: metrics.record_partitions(
            "ns", "expo-b", "g", _columns({"x": 2}, [5, 6], [NAN, 2.0])
        ),
    )
    yield (
        "values move, go unknown, come back",
        lambda: metrics.record_partitions(
            "ns", "expo-a", "g",
            _columns(ab, [-1, 4, 3, 9, 0, 7, 8], [NAN, 0.25, 12345.678, NAN, 1.0, 3.0, 1e-3]),
            max_series=5,
        ),
    )  # fmt: skip
    yield (
        "topic a shrinks, c comes, cap 6",
        lambda: metrics.record_partitions(
            "ns", "expo-a", "g",
            _columns(
                {"a": 2, "b": 4, "c": 2},
                [1, 2, 3, 4, 5, 6, 7, 8],
                [0.5, 1.5, 2.5, NAN, 4.5, 5.5, 6.5, 7.5],
            ),
            max_series=6,
        ),
    )  # fmt: skip
    yield (
        "the cap lowered to 3",
        lambda: metrics.record_partitions(
            "ns", "expo-a", "g",
            _columns(
                {"a": 2, "b": 4, "c": 2},
                [1, 2, 3, 4, 5, 6, 7, 8],
                [0.5, 1.5, 2.5, NAN, 4.5, 5.5, 6.5, 7.5],
            ),
            max_series=3,
        ),
    )  # fmt: skip
    yield (
        "rows as tuples",
        lambda: metrics.record_partitions(
            "ns", "expo-a", "g",
            [("a", 0, "ok", 10, 1.0), ("a", 1, "unknown", None, None), ("b", 0, "ahead", 3, 0.0),
             ("c", 1, "ok", 4, 2.0)],
            max_series=3,
        ),
    )  # fmt: skip
    yield (
        "columns again after rows",
        lambda: metrics.record_partitions(
            "ns", "expo-a", "g",
            _columns({"a": 2, "b": 1, "c": 2}, [11, 12, 13, 14, 15], [1.0, 2.0, 3.0, NAN, 5.0]),
            max_series=4,
        ),
    )  # fmt: skip
    yield (
        "groupId changed",
        lambda: metrics.record_partitions(
            "ns", "expo-a", "g2",
            _columns({"a": 2, "b": 1, "c": 2}, [11, 12, 13, 14, 15], [1.0, 2.0, 3.0, NAN, 5.0]),
            max_series=4,
        ),
    )  # fmt: skip
    yield ("first policy forgotten", lambda: metrics.forget("ns", "expo-a"))
    yield ("second policy forgotten", lambda: metrics.forget("ns", "expo-b"))


def _exposition() -> dict[str, list[str]]:
    """Per family, its HELP and TYPE lines and the sample lines of this test's policies, in
    the order served."""
    out: dict[str, list[str]] = {f: [] for f in FAMILIES}
    family = ""
    for line in generate_latest(metrics.REGISTRY).decode().splitlines():
        if line.startswith("# "):
            family = line.split()[2]
            for name in FAMILIES:
                if family in (name, f"{name}_total", f"{name}_created"):
                    family = name
        if family not in out:
            continue
        if line.startswith("# ") or any(f'policy="{p}"' in line for p in POLICIES):
            if "_created{" in line:
                continue  # a counter's creation time differs between runs
            out[family].append(line)
    return out


def _recorded() -> list[dict[str, Any]]:
    poll = []
    for label, action in _steps():
        action()
        poll.append({"step": label, "exposition": _exposition()})
    return poll


def test_the_exposition_of_each_poll_is_what_labelled_children_served() -> None:
    expected = json.loads(RECORDED.read_text())
    got = _recorded()
    assert [p["step"] for p in got] == [p["step"] for p in expected]
    # the first poll's text is the same, line for line
    assert got[0]["exposition"] == expected[0]["exposition"]
    for now, then in zip(got, expected, strict=True):
        for family in FAMILIES:
            # a family's samples are in (topic, partition) order now; the children were in
            # the order they were made (Prometheus reads samples as a set)
            assert sorted(now["exposition"][family]) == sorted(then["exposition"][family]), (
                now["step"],
                family,
            )
            assert now["exposition"][family][:2] == then["exposition"][family][:2]  # HELP, TYPE


if __name__ == "__main__":
    RECORDED.parent.mkdir(parents=True, exist_ok=True)
    RECORDED.write_text(json.dumps(_recorded(), indent=1) + "\n")
