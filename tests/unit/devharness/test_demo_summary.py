"""The demo's figures: phase windows, max lag, throughput, lag trend, the summary object."""

from __future__ import annotations

import itertools
import json

import pytest
from kafka_rebalance_dev.demo.summary import (
    Phases,
    Point,
    build_summary,
    comparison_table,
    lag_over_time,
    lag_trend,
    max_lag,
    plan_reversals,
    throughput,
)

REQUIRED = {
    "strategy",
    "duration_s",
    "max_lag_before",
    "max_lag_after",
    "produced",
    "processed",
    "lost",
    "duplicates",
    "epochs",
}


def series() -> list[Point]:
    # lag climbs 0 -> 900 over the first 30 s (observe), then falls to a flat 40 (enforce);
    # 50 records processed per second throughout
    points = []
    for t in range(0, 91):
        lag = 30 * t if t <= 30 else max(40, 900 - 60 * (t - 30))
        points.append(Point(float(t), lag, 50 * t))
    return points


def test_before_is_the_worst_lag_of_the_observe_phase_and_after_the_final_window() -> None:
    points = series()
    phases = Phases(enforce_at=30.0, stop_at=90.0, window_s=25.0)
    assert phases.before() == (0.0, 30.0)
    assert phases.after() == (65.0, 90.0)
    assert max_lag(points, *phases.before()) == 900
    assert max_lag(points, *phases.after()) == 40
    # the transient right after enforce is not in the final window
    assert max_lag(points, 31, 40) == 840


def test_after_window_never_reaches_back_into_observe() -> None:
    phases = Phases(enforce_at=30.0, stop_at=40.0, window_s=25.0)
    assert phases.after() == (30.0, 40.0)


def test_throughput_uses_first_and_last_points_in_the_window() -> None:
    points = series()
    assert throughput(points, 10, 20) == pytest.approx(50.0)
    assert throughput(points, 10, 10) == 0.0  # one point: no rate
    assert throughput([], 0, 10) == 0.0


def test_lag_trend_is_the_least_squares_slope() -> None:
    points = series()
    assert lag_trend(points, 0, 30) == pytest.approx(30.0)
    assert lag_trend(points, 60, 90) == pytest.approx(0.0)
    growing = [Point(float(t), 5 * t + (7 if t % 2 else -7), 0) for t in range(20)]
    assert 4.0 < lag_trend(growing, 0, 20) < 6.0


def test_lag_over_time_samples_about_every_interval() -> None:
    points = [Point(t * 0.7, int(t), 0) for t in range(30)]
    marks = lag_over_time(points, 5.0)
    times = [t for t, _ in marks]
    assert times[0] == 0.0
    assert all(later - earlier >= 4.9 for earlier, later in itertools.pairwise(times))
    assert len(marks) == 5  # 0, 5.6, 10.5, 15.4, 20.3 within 0..20.3 s


def test_summary_has_the_keys_issue_5_fixes_and_is_json() -> None:
    points = series()
    summary = build_summary(
        strategy="lag-aware",
        duration_s=123.456,
        points=points,
        phases=Phases(30.0, 90.0, 25.0),
        produced=1000,
        processed=1003,
        lost=0,
        duplicates=3,
        epochs=2,
        extra={"members": 3},
    )
    assert set(summary) >= REQUIRED
    assert summary["max_lag_before"] == 900 and summary["max_lag_after"] == 40
    assert summary["duration_s"] == 123.5
    assert summary["throughput_after"] == pytest.approx(50.0)
    assert summary["members"] == 3
    assert json.loads(json.dumps(summary)) == summary


def test_comparison_table_has_one_row_per_run() -> None:
    rows = [
        {"strategy": "range", "throughput": 41.234, "max_lag": 5000, "epochs": 1},
        {"strategy": "lag-aware", "throughput": 80.0, "max_lag": 300, "epochs": 3},
    ]
    text = comparison_table(rows).splitlines()
    assert text[0] == "| strategy | throughput (rec/s) | max lag | epochs |"
    assert text[2] == "| range | 41.2 | 5000 | 1 |"
    assert text[3] == "| lag-aware | 80.0 | 300 | 3 |"


def test_a_plan_that_keeps_refining_has_no_reversals() -> None:
    # partition 0 goes a -> b -> c: two moves, each to a member it never left
    plans = [{0: "a", 1: "a"}, {0: "b", 1: "a"}, {0: "c", 1: "a"}, {0: "c", 1: "b"}]
    assert plan_reversals(plans) == 0


def test_moving_a_partition_back_to_a_member_it_left_is_a_reversal() -> None:
    plans = [{0: "slow", 1: "slow"}, {0: "fast", 1: "slow"}, {0: "slow", 1: "fast"}]
    assert plan_reversals(plans) == 1
    # and every return counts: back and forth twice
    assert plan_reversals([*plans, {0: "fast", 1: "slow"}]) == 3


def test_a_partition_between_owners_is_not_a_reversal_when_it_lands_elsewhere() -> None:
    # assign mode writes a revoke epoch without the partition, then grants it
    plans = [{0: "a", 1: "b"}, {1: "b"}, {0: "c", 1: "b"}]
    assert plan_reversals(plans) == 0
    assert plan_reversals([{0: "a"}, {}, {0: "a"}]) == 0  # revoked and granted back: no move
