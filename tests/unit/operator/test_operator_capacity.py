"""Adaptive weights from measured capacity (capacity.py), with hand-computed expectations."""

from __future__ import annotations

import pytest
from kafka_rebalance_operator.capacity import CapacityEstimator, confirmed_owners

P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)


def _one_interval_is_enough(min_backlog: int = 10, tau_s: float = 30.0) -> CapacityEstimator:
    """An estimator that takes a single interval as an estimate, for tests of what an estimate
    does once it exists (how much evidence it takes is tested on its own, below)."""
    return CapacityEstimator(min_backlog=min_backlog, tau_s=tau_s, min_samples=1, min_seconds=0.0)


def test_a_partition_that_changed_owner_counts_for_nobody() -> None:
    est = CapacityEstimator(min_backlog=10)
    est.observe(0.0, {P0: "a", P1: "b"}, {P0: 0, P1: 0}, {P0: 100, P1: 100}, ["a", "b"])
    # p0 moved from a to b: its 500 records were consumed by a (or by b, nobody knows)
    samples = est.observe(
        10.0, {P0: "b", P1: "b"}, {P0: 500, P1: 50}, {P0: 100, P1: 100}, ["a", "b"]
    )
    assert samples == {"b": pytest.approx(5.0)}  # 50 records of p1 in 10 s; p0 not inherited
    assert "a" not in est.capacity and "a" not in est.throughput


def test_a_moved_partition_counts_only_after_it_settled() -> None:
    est = CapacityEstimator(min_backlog=10, settle_s=10.0)
    members = ["a"]
    est.observe(0.0, {P0: "b"}, {P0: 0}, {P0: 100}, ["a", "b"])
    est.observe(10.0, {P0: "a"}, {P0: 100}, {P0: 100}, members)  # moved: nobody
    # owned by a since t=10; the interval 10..20 starts 0 s after that, less than settle_s
    assert est.observe(20.0, {P0: "a"}, {P0: 200}, {P0: 100}, members) == {}
    # 20..30 starts 10 s after the move: counts (30 records in 10 s)
    assert est.observe(30.0, {P0: "a"}, {P0: 230}, {P0: 100}, members) == {"a": 3.0}


def test_a_partition_counts_only_once_the_group_has_taken_the_plan() -> None:
    planned = {P0: "a", P1: "b", P2: "b"}
    actual = {P0: "a", P1: "a", P2: "b"}  # b has not taken p1 from a yet
    assert confirmed_owners(planned, actual) == {P0: "a", P2: "b"}
    assert confirmed_owners(planned, actual, stable=False) == {}  # rebalancing: nobody
    assert confirmed_owners(planned, None) == planned  # not described (assign mode): the plan


def test_a_member_not_yet_consuming_a_granted_partition_is_not_measured() -> None:
    est = CapacityEstimator(min_backlog=10)
    planned = {P0: "a"}
    # a was granted p0 but the group still gives it to nobody: backlogged and still
    for t, committed in ((0.0, 0), (10.0, 0), (20.0, 0)):
        owners = confirmed_owners(planned, {}, stable=True)
        est.observe(t, owners, {P0: committed}, {P0: 500}, ["a"])
    assert est.capacity == {}  # not "a is busy at 0 records/s"


def test_an_idle_member_is_not_marked_slow() -> None:
    est = _one_interval_is_enough(min_backlog=10)
    owners = {P0: "a", P1: "b"}
    est.observe(0.0, owners, {P0: 0, P1: 0}, {P0: 200, P1: 0}, ["a", "b"])
    # a is backlogged and processes 10/s; b keeps up with its 2/s (lag stays at 1)
    samples = est.observe(10.0, owners, {P0: 100, P1: 20}, {P0: 250, P1: 1}, ["a", "b"])
    assert samples == {"a": 10.0}  # b was not busy: its 2/s is its load, not its capacity
    assert est.throughput["b"] == 2.0
    # b was never busy: it gets the busy members' mean (10), not its 2/s -> both weight 1
    assert est.weights(["a", "b"]) == {"a": 1.0, "b": 1.0}


def test_throughput_above_the_mean_raises_an_unmeasured_member() -> None:
    est = _one_interval_is_enough(min_backlog=10)
    owners = {P0: "a", P1: "b"}
    est.observe(0.0, owners, {P0: 0, P1: 0}, {P0: 200, P1: 0}, ["a", "b"])
    est.observe(10.0, owners, {P0: 100, P1: 300}, {P0: 250, P1: 0}, ["a", "b"])
    # a: capacity 10; b: never busy but did 30/s, so at least 30. Mean 20 -> 0.5 and 1.5
    assert est.weights(["a", "b"]) == {"a": pytest.approx(0.5), "b": pytest.approx(1.5)}


def test_an_idle_member_carries_the_demand_a_busy_one_cannot() -> None:
    est = CapacityEstimator(band=0.0)
    est.capacity = {"c": 10.0}
    # 50/s produced, c takes at most 10: a and b carry 20 each -> c 10 / mean(10, 20, 20)
    assert est.weights(["a", "b", "c"], demand=50.0)["c"] == pytest.approx(0.6)
    # demand the busy member covers alone: the others get the mean, not less
    assert est.weights(["a", "b", "c"], demand=5.0) == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_no_weights_until_some_member_was_busy() -> None:
    est = CapacityEstimator(min_backlog=10)
    owners = {P0: "a", P1: "b"}
    est.observe(0.0, owners, {P0: 0, P1: 0}, {P0: 0, P1: 0}, ["a", "b"])
    est.observe(10.0, owners, {P0: 10, P1: 300}, {P0: 0, P1: 2}, ["a", "b"])
    assert est.weights(["a", "b"]) == {"a": 1.0, "b": 1.0}


def test_a_member_with_no_partitions_keeps_its_estimate_until_it_leaves() -> None:
    est = _one_interval_is_enough(min_backlog=10, tau_s=30.0)
    members = ["a", "b"]
    est.observe(0.0, {P0: "a", P1: "b"}, {P0: 0, P1: 0}, {P0: 100, P1: 100}, members)
    est.observe(10.0, {P0: "a", P1: "b"}, {P0: 40, P1: 200}, {P0: 100, P1: 100}, members)
    assert est.capacity == {"a": 4.0, "b": 20.0}
    # a is stripped of everything; b keeps processing 20/s with a backlog
    est.observe(20.0, {P0: "b", P1: "b"}, {P0: 80, P1: 400}, {P0: 100, P1: 100}, members)
    for step in range(3, 8):
        t = 10.0 * step
        committed = {P0: 80 + 100 * (step - 2), P1: 400 + 100 * (step - 2)}
        est.observe(t, {P0: "b", P1: "b"}, committed, {P0: 100, P1: 100}, members)
        assert est.capacity["a"] == 4.0  # remembered, never reset to "unknown"
        assert est.capacity["b"] == pytest.approx(20.0)  # 200 records / 10 s on p0 + p1
    # mean 12 -> a 1/3, b 5/3: the slow member stays light, it is not handed partitions again
    assert est.weights(members) == {"a": pytest.approx(1 / 3), "b": pytest.approx(5 / 3)}
    est.observe(80.0, {P0: "b", P1: "b"}, {P0: 600, P1: 920}, {P0: 100, P1: 100}, ["b"])
    assert "a" not in est.capacity and "a" not in est.used  # left the group: forgotten


def test_the_hysteresis_band_holds_the_weights() -> None:
    est = CapacityEstimator(band=0.2)
    est.capacity = {"a": 10.0, "b": 10.0}
    assert est.weights(["a", "b"]) == {"a": 1.0, "b": 1.0}
    est.capacity = {"a": 10.0, "b": 12.0}  # raw 0.909 and 1.091: within 20 % of 1
    assert est.weights(["a", "b"]) == {"a": 1.0, "b": 1.0}
    est.capacity = {"a": 10.0, "b": 20.0}  # raw 0.667 and 1.333: outside the band
    assert est.weights(["a", "b"]) == {"a": pytest.approx(2 / 3), "b": pytest.approx(4 / 3)}
    est.capacity = {"a": 10.0, "b": 18.0}  # raw 0.714 (+7 %) and 1.286 (-3.6 %): held
    assert est.weights(["a", "b"]) == {"a": pytest.approx(2 / 3), "b": pytest.approx(4 / 3)}
    # one member outside the band renews all: c (raw 0.4 of mean 25) and a, b with it
    est.capacity = {"a": 30.0, "b": 30.0, "c": 15.0}
    assert est.weights(["a", "b", "c"]) == {
        "a": pytest.approx(1.2),
        "b": pytest.approx(1.2),
        "c": pytest.approx(0.6),
    }
    est.capacity = {"a": 30.0, "b": 33.0, "c": 15.0}  # b +5 %, a -3 %, c -3 %: all held
    assert est.weights(["a", "b", "c"])["b"] == pytest.approx(1.2)


def test_weights_are_clamped() -> None:
    est = CapacityEstimator(band=0.0)
    est.capacity = {"a": 0.001, "b": 100.0, "c": 100.0}
    weights = est.weights(["a", "b", "c"])
    assert weights["a"] == 0.1  # never starved to nothing
    assert weights["b"] == pytest.approx(100.0 / ((0.001 + 200.0) / 3))


def _simulate(polls: int) -> tuple[list[dict[str, float]], list[dict[tuple[str, int], str]]]:
    """Closed loop: 3 members, 12 partitions at 5 records/s, a poll every 2 s; member c
    processes 12 records/s (whole records per partition and poll, so no rounding noise), a and b
    100. Each poll the plan gives each member a share of the
    partitions proportional to its weight (sticky: only the surplus moves)."""
    rate, dt = 5.0, 2.0
    caps = {"a": 100.0, "b": 100.0, "c": 12.0}
    keys = [("t", p) for p in range(12)]
    owners = {k: "abc"[i // 4] for i, k in enumerate(keys)}  # c owns 4 partitions: 20/s
    end = {k: 0.0 for k in keys}
    committed = {k: 0.0 for k in keys}
    est = CapacityEstimator(min_backlog=10, tau_s=30.0, settle_s=dt, band=0.2)
    weights_seen, owners_seen = [], []
    for step in range(polls):
        t = step * dt
        snapshot = {k: int(committed[k]) for k in keys}
        lag = {k: int(end[k]) - snapshot[k] for k in keys}
        est.observe(t, owners, snapshot, lag, list(caps))
        weights = est.weights(list(caps), demand=rate * len(keys))
        weights_seen.append(weights)
        owners_seen.append(dict(owners))
        # the "planner": quotas by largest remainder, moves only from members over quota
        total = sum(weights.values())
        exact = {m: 12 * w / total for m, w in weights.items()}
        quota = {m: int(v) for m, v in exact.items()}
        for m in sorted(exact, key=lambda m: exact[m] - quota[m], reverse=True)[
            : 12 - sum(quota.values())
        ]:
            quota[m] += 1
        held = {m: [k for k in keys if owners[k] == m] for m in caps}
        spare = [k for m in caps for k in held[m][quota[m] :]]
        for m in caps:
            while len(held[m]) < quota[m]:
                key = spare.pop()
                owners[key] = m
                held[m].append(key)
        # one interval of production and consumption (a member splits its capacity evenly)
        for k in keys:
            end[k] += rate * dt
        for m, cap in caps.items():
            budget = cap * dt
            mine = [k for k in keys if owners[k] == m]
            while budget > 1e-9 and mine:
                share = budget / len(mine)
                for k in list(mine):
                    take = min(share, end[k] - committed[k])
                    committed[k] += take
                    budget -= take
                    if end[k] - committed[k] <= 1e-9:
                        mine.remove(k)
    return weights_seen, owners_seen


def test_a_clearly_slow_member_converges_to_a_low_weight_and_stays() -> None:
    weights, owners = _simulate(60)  # 120 s
    final = weights[-1]
    # c is busy at 12/s; a and b are never busy: each is taken to carry half of the 60/s c
    # cannot, 24/s. Weights 12 / mean(12, 24, 24) = 0.6 for c, 1.2 for a and b, so c's share of
    # 12 partitions is 2.4: the planner gives it 2 (10/s, within its 12)
    assert final == {"a": pytest.approx(1.2), "b": pytest.approx(1.2), "c": pytest.approx(0.6)}
    assert sum(1 for o in owners[-1].values() if o == "c") == 2
    # and no flapping: ownership is the same over the last minute
    assert all(o == owners[-1] for o in owners[-30:])


def _backlogged(est: CapacityEstimator, t: float, committed: int, member: str = "a") -> None:
    """One poll of a member that owns p0 with a backlog of 100."""
    est.observe(t, {P0: member}, {P0: committed}, {P0: 100}, [member])


def test_no_estimate_until_three_intervals_over_twelve_seconds() -> None:
    """A batch-committing consumer at 12.5 records/s shows 20, 10, 10 records/s over 2 s
    intervals (two batches of 20 in the first, one in the others). None of those is its
    capacity; their pool over at least 12 s is close to it."""
    est = CapacityEstimator(min_backlog=10)
    committed = 0
    _backlogged(est, 0.0, committed)
    steps = [40, 20, 20, 20, 20, 30]  # records per 2 s interval
    for n, records in enumerate(steps, start=1):
        committed += records
        _backlogged(est, 2.0 * n, committed)
        if n < 6:  # 3 samples are enough in number, but 10 s is not enough time
            assert "a" not in est.capacity and "a" not in est.throughput, n
            assert not est.measured
    assert est.capacity == {"a": pytest.approx(150 / 12)}
    assert est.throughput == {"a": pytest.approx(150 / 12)}
    assert est.measured
    # from then on an interval is folded into the estimate, not taken as it
    committed += 40
    _backlogged(est, 14.0, committed)
    assert 12.5 < est.capacity["a"] < 13.5


def test_three_long_intervals_are_enough() -> None:
    est = CapacityEstimator(min_backlog=10)
    _backlogged(est, 0.0, 0)
    for n, committed in enumerate((100, 150, 240), start=1):
        assert not est.measured
        _backlogged(est, 5.0 * n, committed)
    assert est.capacity == {"a": pytest.approx(240 / 15)}


def test_a_member_that_leaves_before_it_is_measured_is_forgotten() -> None:
    est = CapacityEstimator(min_backlog=10)
    _backlogged(est, 0.0, 0)
    _backlogged(est, 5.0, 50)
    est.observe(10.0, {P1: "b"}, {P1: 0}, {P1: 100}, ["b"])  # a left, b arrives
    _backlogged(est, 15.0, 100)  # a is back: its earlier interval is not pooled with these
    _backlogged(est, 20.0, 150)
    _backlogged(est, 25.0, 200)
    assert not est.measured  # two intervals over 10 s since it came back
    _backlogged(est, 30.0, 250)
    assert est.capacity == {"a": pytest.approx(10.0)}
