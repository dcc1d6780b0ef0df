"""The pipeline's fluid model and scores: small cases worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kafka_rebalance_pipeline.simulate import (
    drain_step,
    percentile,
    score,
    share_capacity,
    time_lag,
)


def test_share_capacity_gives_small_demands_in_full_and_splits_the_rest_evenly() -> None:
    given = share_capacity([10.0, 100.0, 100.0], [math.inf] * 3, 90.0)
    assert given == pytest.approx([10.0, 40.0, 40.0])


def test_share_capacity_never_gives_more_than_demanded_or_than_the_budget() -> None:
    assert share_capacity([5.0, 7.0], [math.inf, math.inf], 100.0) == pytest.approx([5.0, 7.0])
    assert sum(share_capacity([50.0, 70.0, 90.0], [math.inf] * 3, 60.0)) == pytest.approx(60.0)
    assert share_capacity([], [], 10.0) == []


def test_share_capacity_respects_per_partition_limits() -> None:
    # The paused partition may take at most 10; its unused share goes to the other one.
    assert share_capacity([100.0, 100.0], [10.0, math.inf], 60.0) == pytest.approx([10.0, 50.0])


def test_a_saturated_member_drains_exactly_its_capacity() -> None:
    lag, consumed = drain_step([0.0, 500.0], [2.0, 0.0], ["a", "a"], {"a": 10.0}, 10.0)
    # Budget 100: the keeping-up partition needs 20 (its production), the backlog gets 80.
    assert consumed == pytest.approx([20.0, 80.0])
    assert lag == pytest.approx([0.0, 420.0])


def test_members_drain_independently_at_their_own_capacity() -> None:
    lag, consumed = drain_step(
        [1000.0, 1000.0], [0.0, 0.0], ["fast", "slow"], {"fast": 50.0, "slow": 5.0}, 10.0
    )
    assert consumed == pytest.approx([500.0, 50.0])
    assert lag == pytest.approx([500.0, 950.0])


def test_a_paused_partition_consumes_only_for_the_rest_of_the_interval() -> None:
    lag, consumed = drain_step([1000.0], [0.0], ["a"], {"a": 10.0}, 10.0, paused_s=[5.0])
    assert consumed == pytest.approx([50.0])
    lag, consumed = drain_step([1000.0], [0.0], ["a"], {"a": 10.0}, 10.0, paused_s=[30.0])
    assert consumed == [0.0] and lag == [1000.0]


def test_unowned_partitions_and_members_of_unknown_capacity_accumulate_lag() -> None:
    lag, consumed = drain_step([0.0, 0.0], [3.0, 4.0], [None, "ghost"], {}, 10.0)
    assert consumed == [0.0, 0.0]
    assert lag == pytest.approx([30.0, 40.0])


def test_time_lag_is_backlog_over_rate_with_a_floor() -> None:
    assert time_lag(600.0, 10.0) == pytest.approx(60.0)
    assert time_lag(0.0, 10.0) == 0.0
    assert time_lag(50.0, 0.0) == pytest.approx(50.0)  # idle topic: rate floor 1 record/s


@pytest.mark.parametrize("q", [0, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear_interpolation(q: float) -> None:
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_score_counts_intervals_whose_closing_poll_breaks_the_slo() -> None:
    result = score(
        total_lag=[0.0, 100.0, 400.0, 50.0],
        worst_time_lag=[0.0, 70.0, 200.0, 10.0],
        dts=[30.0, 30.0, 30.0, 30.0],
        slo_s=60.0,
        moves=3,
        epochs=2,
        plans=4,
    )
    assert result.time_over_slo_s == 60.0
    assert result.max_lag == 400.0
    assert result.mean_lag == pytest.approx(137.5)
    assert result.duration_s == 120.0
    assert (result.moves, result.epochs, result.plans) == (3, 2, 4)
