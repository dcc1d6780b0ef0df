"""The operator's columnar per-policy state against the per-partition objects it replaced: on
recorded histories of offsets, `classify_all` gives `classify`'s states and lags, and
`PolicyHistory` the rates and time lags of `PartitionMemory` (`Ewma`, `EndOffsetHistory`);
metrics and telemetry write only what changed."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import numpy as np
import pytest
from kafka_rebalance_operator import metrics, telemetry
from kafka_rebalance_operator.history import PartitionMemory, PolicyHistory
from kafka_rebalance_operator.lag import (
    STATES,
    UNKNOWN,
    LagState,
    Layout,
    PartitionLag,
    PartitionOffsets,
    PolicyLags,
    PolicyOffsets,
    classify,
    classify_all,
)

Key = tuple[str, int]


def _recorded(
    seed: int, polls: int, counts: dict[str, int], bursts: tuple[int, ...] = (300, 10_000)
) -> list[tuple[float, dict]]:
    """A recorded history: per poll, (time, key -> PartitionOffsets). Production in bursts and
    pauses, consumers behind, caught up, ahead or never committed, reads that fail, a topic
    recreated (offsets going back), and poll times with jitter."""
    rng = random.Random(seed)
    state = {}
    for topic, count in counts.items():
        for p in range(count):
            end = rng.randrange(0, 1000)
            state[(topic, p)] = {"start": 0, "end": end, "committed": rng.choice([None, end // 2])}
    t = 1_800_000_000.0
    history = []
    for _ in range(polls):
        t += 30 + rng.uniform(-3, 3)
        reads: dict[Key, PartitionOffsets] = {}
        committed_known = rng.random() > 0.05
        for key, s in state.items():
            roll = rng.random()
            if roll < 0.03:  # recreated: offsets start over
                s.update(start=0, end=rng.randrange(0, 50), committed=None)
            elif roll < 0.5:
                s["end"] += rng.choice([0, 0, 1, 5, *bursts])
            if rng.random() < 0.1:
                s["start"] = min(s["end"], s["start"] + rng.randrange(0, 500))  # retention
            if s["committed"] is not None or rng.random() < 0.2:
                base = s["committed"] or 0
                s["committed"] = min(
                    s["end"] + rng.choice([0, 0, 0, 3]), base + rng.randrange(0, 800)
                )
            failed = rng.random() < 0.05
            reads[key] = PartitionOffsets(
                log_start=None if failed else s["start"],
                log_end=None if failed and rng.random() < 0.5 else s["end"],
                committed=s["committed"],
                committed_known=committed_known,
                error="timeout" if failed else None,
            )
        history.append((t, reads))
    return history


def _reference(history, reset: str) -> list[dict[Key, tuple[PartitionLag, float | None, Any]]]:
    """What the per-partition objects gave, poll by poll (the operator's code before arrays)."""
    memory: dict[Key, PartitionMemory] = {}
    lags: dict[Key, PartitionLag] = {}
    out = []
    for now, reads in history:
        poll = {}
        new_lags = {}
        for key, offsets in reads.items():
            part = memory.setdefault(key, PartitionMemory())
            age = now - part.last_lag_t if part.last_lag_t is not None else 0.0
            state = classify(offsets, reset, lags.get(key), age)
            known = state.state is not LagState.UNKNOWN
            part.observe(
                now,
                offsets.log_end,
                offsets.committed if known else None,
                state.lag if known else None,
            )
            time_lag = (
                part.ends.time_lag(offsets.committed, now)
                if state.state is LagState.OK and offsets.committed is not None
                else None
            )
            new_lags[key] = state
            poll[key] = (state, time_lag, part.produce.value, part.consume.value)
        lags = new_lags
        out.append(poll)
    return out


def _columnar(history, counts, reset: str, points: int = 60):
    layout = Layout.of(counts)
    columns = PolicyHistory(layout, points)
    out = []
    for now, reads in history:
        offsets = PolicyOffsets.from_mapping(counts, reads)
        previous, ages = columns.carried(now)
        states, lags, ages = classify_all(offsets, reset, previous, ages)
        columns.observe(now, offsets.end, offsets.committed, states != UNKNOWN, lags)
        ok = (states == 0) & (offsets.committed >= 0)
        time_lags = columns.time_lags(offsets.committed, ok, now)
        rates = (columns.produce.value.copy(), columns.consume.value.copy())
        out.append((PolicyLags(layout, states, lags, ages, time_lags), rates, columns))
    return out


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
@pytest.mark.parametrize("seed", range(4))
def test_columnar_state_gives_the_objects_rates_lags_and_time_lags(seed: int, reset: str) -> None:
    counts = {"orders": 40, "audit": 3, "zeta": 17}
    history = _recorded(seed, 90, counts)  # 90 polls: histories fill their 60 points and roll
    expected = _reference(history, reset)
    got = _columnar(history, counts, reset)
    compared = 0
    for poll, (lags, (produced, consumed), _columns) in zip(expected, got, strict=True):
        for i, key in enumerate(lags.layout.keys()):
            state, time_lag, produce, consume = poll[key]
            assert lags[key] == state, key
            assert _same(lags.time_lag(key), time_lag), (key, lags.time_lag(key), time_lag)
            mine_produce, mine_consume = float(produced[i]), float(consumed[i])
            assert _same(None if math.isnan(mine_produce) else mine_produce, produce)
            assert _same(None if math.isnan(mine_consume) else mine_consume, consume)
            compared += time_lag is not None
    assert compared > 1000  # the histories did produce time lags to compare
    assert got[-1][2].step.dtype == np.uint16  # 4-byte points: no step passed 65,535


@pytest.mark.parametrize("seed", range(2))
def test_a_step_past_uint16_widens_the_steps_and_keeps_the_objects_time_lags(seed: int) -> None:
    counts = {"orders": 40, "zeta": 17}
    history = _recorded(seed, 90, counts, bursts=(300, 10_000, 65_535, 65_536, 3_000_000))
    expected = _reference(history, "earliest")
    got = _columnar(history, counts, "earliest")
    assert _columnar(history[:1], counts, "earliest")[-1][2].step.dtype == np.uint16
    assert got[-1][2].step.dtype == np.uint32  # widened mid-history, by the first big step
    compared = 0
    for poll, (lags, (produced, _consumed), _columns) in zip(expected, got, strict=True):
        for i, key in enumerate(lags.layout.keys()):
            state, time_lag, produce, _consume = poll[key]
            assert lags[key] == state, key
            assert _same(lags.time_lag(key), time_lag), (key, lags.time_lag(key), time_lag)
            mine = float(produced[i])
            assert _same(None if math.isnan(mine) else mine, produce)
            compared += time_lag is not None
    assert compared > 500


def test_resizing_keeps_the_partitions_both_layouts_have() -> None:
    counts = {"a": 4, "b": 2}
    history = _recorded(7, 5, counts)
    columns = _columnar(history, counts, "earliest")[-1][2]
    grown = columns.resized(Layout.of({"a": 6, "c": 1}))
    assert grown.layout.size == 7
    old, new = columns.layout.spans["a"][0], grown.layout.spans["a"][0]
    assert np.array_equal(grown.ends[new : new + 4], columns.ends[old : old + 4])
    assert np.array_equal(
        grown.produce.value[new : new + 4], columns.produce.value[old : old + 4], equal_nan=True
    )
    assert grown.count[new + 4 :].tolist() == [0, 0, 0]  # a-4, a-5 and c-0 start empty


def test_memory_per_partition_is_what_the_arrays_hold() -> None:
    layout = Layout.of({"t": 1000})
    columns = PolicyHistory(layout)
    assert columns.nbytes == 1000 * PolicyHistory.bytes_per_partition()


def _lags(layout: Layout, lags: list[int], time_lags: list[float]) -> metrics.PartitionRows:
    return metrics.PartitionRows(
        layout,
        np.zeros(layout.size, np.int8),
        np.array(lags, np.int64),
        np.array(time_lags, np.float64),
    )


def _series(policy: str) -> dict[tuple[str, str], float]:
    return {
        (s.labels["topic"], s.labels["partition"]): s.value
        for family in metrics.REGISTRY.collect()
        if family.name == "kafka_rebalance_partition_lag"
        for s in family.samples
        if s.labels.get("policy") == policy
    }


def test_metric_columns_give_rows_series_and_a_poll_never_changes_a_scraped_one() -> None:
    layout = Layout.of({"t": 5})
    first = _lags(layout, [1, 2, -1, 4, 5], [0.5, math.nan, math.nan, 1.0, 2.0])
    metrics.record_partitions("ns", "rows", "g", list(first), max_series=3)
    metrics.record_partitions("ns", "cols", "g", first, max_series=3)
    assert _series("rows") == _series("cols") == {("t", "0"): 1, ("t", "1"): 2}
    # what a scrape on the metrics server's thread may be reading while the next poll runs
    scraped = metrics._PUBLISHED[("ns", "cols")]
    assert scraped.rows.tolist() == [0, 1, 2]  # the series, not one object per partition
    second = _lags(layout, [1, 7, 3, 4, 5], [0.5, math.nan, 2.0, 1.0, 2.0])
    metrics.record_partitions("ns", "cols", "g", second, max_series=3)
    assert metrics._PUBLISHED[("ns", "cols")] is not scraped  # published anew, whole
    assert scraped.lags.tolist() == [1, 2, -1] and not scraped.lags.flags.writeable
    metrics.record_partitions("ns", "rows", "g", list(second), max_series=3)
    assert _series("rows") == _series("cols") == {("t", "0"): 1, ("t", "1"): 7, ("t", "2"): 3}
    metrics.forget("ns", "rows")
    metrics.forget("ns", "cols")
    assert _series("cols") == {}


def _columns(layout: Layout, lag: int, epoch: int = 1) -> telemetry.Columns:
    n = layout.size
    return telemetry.Columns(
        layout=layout,
        log_start=np.zeros(n, np.int64),
        log_end=np.full(n, 100, np.int64),
        committed=np.full(n, 100 - lag, np.int64),
        lag=np.full(n, lag, np.int64),
        state=np.zeros(n, np.int8),
        time_lag=np.full(n, math.nan),
        owner=np.zeros(n, np.int32),
        owners=("m-0",),
        epoch=epoch,
    )


def test_telemetry_rows_only_for_changed_partitions_and_a_refresh() -> None:
    layout = Layout.of({"t": 3})
    first = _columns(layout, 10)
    changed = first.changed_since(None, 0.0)
    emitted = first.emitted(None, changed, 0.0)
    rows = first.rows(changed, ts_ms=0, cluster="c", namespace="n", policy="p", group="g")
    assert [r["partition"] for r in rows] == [0, 1, 2]
    assert rows[0] == telemetry.partition_row(
        ts_ms=0, cluster="c", namespace="n", policy="p", group="g", topic="t", partition=0,
        log_start=0, log_end=100, committed=90, lag=10, lag_state=STATES[0].value,
        time_lag_s=None, owner="m-0", epoch=1,
    )  # fmt: skip
    same = _columns(layout, 10)
    assert not same.changed_since(emitted, 30.0).any()
    moved = _columns(layout, 10)
    moved.committed[1], moved.lag[1] = 95, 5
    assert moved.changed_since(emitted, 30.0).tolist() == [False, True, False]
    assert _columns(layout, 10, epoch=2).changed_since(emitted, 30.0).all()
    assert same.changed_since(emitted, telemetry.REFRESH_S).all()


@pytest.mark.parametrize("chunk", [8192, 2])
def test_encoded_rows_are_the_json_the_sinks_wrote_for_dict_rows(
    tmp_path, monkeypatch, chunk: int
) -> None:
    monkeypatch.setattr(telemetry, "ENCODE_CHUNK", chunk)  # 2: rows made over three chunks
    layout = Layout.of({'odd "tøpic"\\': 3, "b": 2})
    columns = _columns(layout, 10)
    columns.log_start[1] = -1
    columns.time_lag[:] = [0.125, math.nan, 12345.678, 0.0, 3.0]
    columns.owner[2] = -1
    columns.state[:] = [0, 4, 1, 2, 3]
    changed = np.array([True, True, True, False, True])
    fields = {"ts_ms": 7, "cluster": "c", "namespace": "n\u00e9", "policy": "p", "group": 'g"'}
    rows = columns.rows(changed, **fields)
    encoded = columns.encoded(changed, **fields)
    assert [json.loads(line) for line in encoded.lines] == rows == list(encoded)
    assert len(encoded) == len(rows) == 4 and encoded[3] == rows[3] and encoded[1:3] == rows[1:3]
    expected = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in rows)
    assert "".join(encoded.lines) == expected
    path = tmp_path / "rows.jsonl"
    telemetry.JsonLinesSink(str(path)).write(encoded)
    assert path.read_text() == expected


def test_a_long_run_compacts_the_clock_and_still_gives_the_objects_time_lags() -> None:
    counts = {"t": 3}
    history = _recorded(11, 1300, counts)  # past the clock's compaction threshold
    expected = _reference(history, "earliest")
    got = _columnar(history, counts, "earliest")
    columns = got[-1][2]
    assert len(columns.clock) < 1300  # compacted to the times still referred to
    for poll, (lags, _rates, _columns) in zip(expected[-50:], got[-50:], strict=True):
        for key in lags:
            assert _same(lags.time_lag(key), poll[key][1])


def test_offsets_further_apart_than_int32_rebase_the_partition() -> None:
    layout = Layout.of({"t": 1})
    columns = PolicyHistory(layout)
    reference = PartitionMemory()
    ends = [10, 2**31 + 100, 2**31 + 200, 2**32 + 5, 2**32 + 5, 2**32 + 2**30]
    for t, end in enumerate(ends):
        columns.observe(
            float(t), np.array([end]), np.array([-1]), np.array([False]), np.array([-1])
        )
        reference.observe(float(t), end, None, None)
    # the points that fit in 2**31 - 1 above the oldest kept one
    assert columns.ends[0, : columns.count[0]].tolist() == [2**32 + 5, 2**32 + 5, 2**32 + 2**30]
    committed = np.array([2**32 + 2**29])
    got = columns.time_lags(committed, np.array([True]), 10.0)[0]
    assert got == pytest.approx(reference.ends.time_lag(int(committed[0]), 10.0))


def test_point_times_widen_past_int16_when_that_many_are_still_referred_to() -> None:
    n = 2**15  # one point per partition, each at its own poll time: none can be compacted away
    history = PolicyHistory(Layout.of({"t": n}), points=2)
    history.clock = np.arange(n - 1, dtype=np.float64)
    history.when[:, 0] = np.minimum(np.arange(n), n - 2)
    history.count[:] = 1
    history.base[:] = 10
    assert history.when.dtype == np.int16
    ends = np.full(n, 20, np.int64)
    history.observe(float(n), ends, np.full(n, 15, np.int64), np.ones(n, bool), ends - 15)
    assert history.when.dtype == np.int32
    assert history.times[:, 0].tolist() == np.minimum(np.arange(n), n - 2).astype(float).tolist()
    assert (history.times[:, 1] == float(n)).all()


def test_demand_follows_a_step_up_at_once_and_a_step_down_at_the_ewma_pace() -> None:
    layout = Layout.of({"t": 2})
    columns = PolicyHistory(layout)
    known = np.ones(2, bool)
    none = np.full(2, -1, np.int64)
    ends = np.zeros(2, np.int64)
    t = 0.0
    for _ in range(60):  # 10 records/s per partition for 5 minutes: the EWMA has settled
        t += 5.0
        ends += 50
        columns.observe(t, ends.copy(), none, known, none)
    assert columns.demand() == pytest.approx(20.0)
    t += 5.0
    ends += 500  # 100 records/s per partition over the last interval
    columns.observe(t, ends.copy(), none, known, none)
    assert float(np.nansum(columns.produce.value)) < 40.0  # the EWMA alone reads low
    assert columns.demand() == pytest.approx(200.0)
    t += 5.0
    columns.observe(t, ends.copy(), none, known, none)  # a quiet interval
    ewma = float(np.nansum(columns.produce.value))
    assert columns.demand() == pytest.approx(ewma) and ewma > 20.0
    assert PolicyHistory(layout).demand() == 0.0
