"""Lag states, EWMA rates and interpolated time lag (pure parts of the operator's observe step)."""

from __future__ import annotations

import math

import pytest
from kafka_rebalance_operator.history import EndOffsetHistory, Ewma, PartitionMemory
from kafka_rebalance_operator.lag import LagState, PartitionLag, PartitionOffsets, classify


def offsets(start, end, committed, **kw) -> PartitionOffsets:
    return PartitionOffsets(log_start=start, log_end=end, committed=committed, **kw)


def test_ok_lag_is_end_minus_committed() -> None:
    assert classify(offsets(10, 100, 40)) == PartitionLag(LagState.OK, 60)
    assert classify(offsets(10, 100, 100)) == PartitionLag(LagState.OK, 0)


@pytest.mark.parametrize(("reset", "lag"), [("earliest", 90), ("latest", 0)])
def test_uninitialized_follows_offset_reset_policy(reset: str, lag: int) -> None:
    result = classify(offsets(10, 100, None), reset)
    assert result.state is LagState.UNINITIALIZED and result.lag == lag


def test_committed_below_log_start_is_out_of_range_not_ok() -> None:
    result = classify(offsets(50, 100, 20))
    assert result.state is LagState.OUT_OF_RANGE
    assert result.lag == 50  # the reset to earliest leaves end - start, not end - committed


def test_committed_past_end_is_ahead_with_zero_lag() -> None:
    assert classify(offsets(0, 100, 150)) == PartitionLag(LagState.AHEAD, 0)


def test_failed_read_is_unknown_and_carries_the_last_value_with_age() -> None:
    previous = PartitionLag(LagState.OK, 77)
    result = classify(offsets(None, None, 5, error="timeout"), previous=previous, previous_age_s=12)
    assert result == PartitionLag(LagState.UNKNOWN, 77, 12)
    # never a silent zero: with no earlier value the lag is None
    assert classify(offsets(0, None, 5)).lag is None
    # a failed committed-offset read is unknown too, even though log offsets were read
    assert classify(offsets(0, 10, None, committed_known=False)).state is LagState.UNKNOWN


def test_ewma_rate_converges_and_restarts_on_counter_reset() -> None:
    rate = Ewma(tau_s=10)
    assert rate.update(0, 0) is None
    assert rate.update(1, 100) == pytest.approx(100)
    for t in range(2, 120):
        rate.update(t, 100 + (t - 1) * 10)
    assert rate.value == pytest.approx(10, rel=0.01)
    assert rate.update(121, 5) is None  # counter went down: the old rate is meaningless


def test_ewma_weighting_depends_on_time_not_sample_count() -> None:
    a, b = Ewma(tau_s=30), Ewma(tau_s=30)
    a.update(0, 0), b.update(0, 0)
    a.update(10, 100)  # 10/s
    b.update(10, 100)
    a.update(40, 100)  # 0/s over 30s: one sample
    for t in range(13, 41, 3):  # the same 30s in ten samples
        b.update(t, 100)
    assert a.value == pytest.approx(b.value, rel=1e-9)
    assert a.value == pytest.approx(10 * math.exp(-1), rel=1e-9)


def test_time_lag_interpolates_between_end_offset_points() -> None:
    history = EndOffsetHistory()
    assert history.time_lag(0, 5) is None
    history.add(0, 0)
    assert history.time_lag(0, 5) == 0.0  # caught up with the only point
    history.add(10, 100)
    history.add(20, 300)
    # offset 200 was the log end at t=15 (between 100@10 and 300@20)
    assert history.time_lag(200, 30) == pytest.approx(15)
    assert history.time_lag(50, 30) == pytest.approx(25)  # 50 reached at t=5
    assert history.time_lag(300, 30) == 0.0


def test_time_lag_flat_runs_keep_their_first_point() -> None:
    history = EndOffsetHistory()
    for t in range(0, 50, 10):
        history.add(t, 100)
    assert len(history.points) == 2
    assert history.points[0] == (0, 100) and history.points[-1] == (40, 100)
    # nothing produced since t=0, consumer at 50: the log end passed 50 before t=0
    assert history.time_lag(50, 45) >= 45


def test_time_lag_restarts_when_the_log_end_goes_down() -> None:
    history = EndOffsetHistory()
    history.add(0, 500)
    history.add(10, 600)
    history.add(20, 3)
    assert list(history.points) == [(20, 3)]


def test_partition_memory_does_not_refresh_carried_values() -> None:
    memory = PartitionMemory()
    memory.observe(0, 10, 5, 5)
    memory.observe(10, None, None, None)  # unknown poll
    assert memory.last_lag == 5 and memory.last_lag_t == 0
