"""Per-partition series: bounded per policy, stable between polls, one identity per partition."""

from __future__ import annotations

from kafka_rebalance_operator import metrics


def _family(name: str, policy: str) -> list:
    return [
        s
        for family in metrics.REGISTRY.collect()
        for s in family.samples
        if s.name == name and s.labels.get("policy") == policy
    ]


def _lag_partitions(policy: str) -> set[tuple[str, str]]:
    return {
        (s.labels["topic"], s.labels["partition"])
        for s in _family("kafka_rebalance_partition_lag", policy)
    }


def _dropped(policy: str) -> float:
    samples = _family("kafka_rebalance_partition_series_dropped_total", policy)
    return samples[0].value if samples else 0.0


def _rows(topic: str, partitions: range, state: str = "ok") -> list:
    return [(topic, p, state, 10 * p, 1.5) for p in partitions]


def test_a_lag_state_change_keeps_the_series_and_moves_the_state_count() -> None:
    metrics.record_partitions("ns", "states", "g", _rows("t", range(3)))
    metrics.record_partitions(
        "ns", "states", "g", [*_rows("t", range(2)), ("t", 2, "out-of-range", 5, None)]
    )
    lags = _family("kafka_rebalance_partition_lag", "states")
    assert sorted((s.labels["partition"], s.value) for s in lags) == [("0", 0), ("1", 10), ("2", 5)]
    assert all("state" not in s.labels for s in lags)
    counts = {s.labels["state"]: s.value for s in _family("kafka_rebalance_partitions", "states")}
    assert counts == {"ok": 2, "out-of-range": 1}
    # the time lag went unknown for partition 2: its series is gone, the others stay
    times = _family("kafka_rebalance_partition_time_lag_seconds", "states")
    assert sorted(s.labels["partition"] for s in times) == ["0", "1"]


def test_the_cap_bounds_series_per_policy_keeps_the_same_ones_and_counts_the_rest() -> None:
    metrics.record_partitions("ns", "capped", "g", _rows("b", range(4)), max_series=5)
    assert _lag_partitions("capped") == {("b", str(p)) for p in range(4)}
    assert _dropped("capped") == 0
    # Topic "a" sorts first, but the partitions that already had series keep them.
    metrics.record_partitions(
        "ns", "capped", "g", [*_rows("a", range(3)), *_rows("b", range(4))], max_series=5
    )
    assert _lag_partitions("capped") == {("b", str(p)) for p in range(4)} | {("a", "0")}
    assert _dropped("capped") == 2
    # A partition that leaves frees its place for the next one in (topic, partition) order.
    metrics.record_partitions(
        "ns", "capped", "g", [*_rows("a", range(3)), *_rows("b", range(3))], max_series=5
    )
    assert _lag_partitions("capped") == {("b", "0"), ("b", "1"), ("b", "2"), ("a", "0"), ("a", "1")}
    assert _dropped("capped") == 3
    # Another policy's cap is its own.
    metrics.record_partitions("ns", "other", "g", _rows("a", range(3)), max_series=5)
    assert len(_lag_partitions("other")) == 3


def test_forget_drops_every_partition_series_of_the_policy() -> None:
    metrics.record_partitions("ns", "gone", "g", _rows("t", range(3)))
    metrics.record_partitions("ns", "kept", "g", _rows("t", range(2)))
    metrics.forget("ns", "gone")
    for name in (
        "kafka_rebalance_partition_lag",
        "kafka_rebalance_partition_time_lag_seconds",
        "kafka_rebalance_partitions",
    ):
        assert _family(name, "gone") == []
    assert len(_lag_partitions("kept")) == 2


def test_a_scrape_during_polls_reads_each_policys_series_from_one_poll() -> None:
    """Polls run in worker threads while the metrics server's thread scrapes: every scrape sees
    a policy's series as one poll left them (poll k sets every lag to k), never half of two."""
    import threading

    import numpy as np
    from kafka_rebalance_operator.lag import Layout

    layout = Layout.of({"t": 2_000})
    done = threading.Event()
    seen: list[set[float]] = []

    def scrape() -> None:
        while not done.is_set():
            seen.append({s.value for s in _family("kafka_rebalance_partition_lag", "threads")})

    def poll(k: int) -> None:
        rows = metrics.PartitionRows(
            layout,
            np.zeros(layout.size, np.int8),
            np.full(layout.size, k, np.int64),
            np.full(layout.size, float(k)),
        )
        metrics.record_partitions("ns", "threads", "g", rows)

    poll(1)
    scraper = threading.Thread(target=scrape)
    scraper.start()
    k = 1
    try:
        while len(seen) < 20:  # polls go on while the scraper scrapes twenty times
            k += 1
            poll(k)
    finally:
        done.set()
        scraper.join()
    metrics.forget("ns", "threads")
    assert seen and all(len(values) <= 1 for values in seen), [v for v in seen if len(v) > 1][:3]
    assert len({v for values in seen for v in values}) > 1  # scrapes did overlap the polls
