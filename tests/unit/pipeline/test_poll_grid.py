"""Grids of telemetry values per poll and partition (`poll_grid`): gaps carried forward, rates
from log-end advances."""

from __future__ import annotations

from kafka_rebalance_pipeline.poll_grid import carry_forward, log_end_rates


def test_a_gap_is_the_previous_polls_value_and_a_first_gap_stays() -> None:
    grid: list[list[str | None]] = [[None, "a"], ["b", None], [None, None]]
    carry_forward(grid)
    assert grid == [[None, "a"], ["b", "a"], ["b", "a"]]


def test_rates_are_advances_per_second_and_unknown_where_they_cannot_be_told() -> None:
    log_end: list[list[float | None]] = [
        [0.0, 100.0, None],
        [50.0, 40.0, 10.0],  # partition 1 went back: a recreated topic
        [150.0, 60.0, 30.0],
    ]
    rates = log_end_rates(log_end, [0.0, 10.0, 20.0])
    assert rates == [[None, None, None], [5.0, None, None], [10.0, 2.0, 2.0]]
    assert log_end_rates([[0.0], [5.0]], [3.0, 3.0]) == [[None], [None]]  # no interval
