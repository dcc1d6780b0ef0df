"""Telemetry's changed-only rows over a recorded sequence of polls: the JSON lines written are
the ones the operator wrote when it kept every field of each partition's last row (recorded from
`50b2367` in tests/data/telemetry/changed_rows.jsonl: regenerate with
`python -m tests.unit.operator.test_operator_telemetry_sequence` on that commit only; the
previous-row fields, added since, are checked against the rows written before them).

The polls move offsets, lags and time lags one partition at a time, take a time lag to and
from unknown, to -0.0 and back to 0.0, change owners and states, add and drop partitions and
topics, bump the epoch, and let the refresh come due.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from kafka_rebalance_common.wire.telemetry import PREVIOUS, previous_of
from kafka_rebalance_operator import telemetry
from kafka_rebalance_operator.lag import Layout

RECORDED = Path(__file__).parents[2] / "data" / "telemetry" / "changed_rows.jsonl"


def _polls() -> Iterator[tuple[float, telemetry.Columns]]:
    """(poll time, the poll's columns), 30 s apart but for a pause past `REFRESH_S`."""
    rng = np.random.default_rng(27)
    counts = {"a": 6, "b": 4}
    layout = Layout.of(counts)
    n = layout.size
    start, end = np.zeros(n, np.int64), np.full(n, 100, np.int64)
    committed = np.full(n, 90, np.int64)
    state, owner = np.zeros(n, np.int8), np.arange(n, dtype=np.int32) % 3
    time_lag = np.round(rng.random(n) * 10, 3)
    owners, epoch, now = ("m-0", "m-1", "m-2"), 1, 1_800_000_000.0
    for poll in range(24):
        i = poll % n
        if poll % 2:
            end[i] += 5
        else:
            committed[i] += 1
        time_lag[(i + 3) % n] = [math.nan, 0.0, -0.0, 1.25][poll % 4]
        if poll in (7, 8):
            time_lag[0] = [0.0, -0.0][poll - 7]  # equal: no row for a-0 at poll 8
        if poll == 5:
            owner[2], state[3], committed[4] = -1, 4, -1
        if poll == 9:
            owners = ("m-1", "m-2", "m-3")  # the same codes now name other members
        if poll == 11:
            epoch += 1
        if poll == 13:  # topic a shrinks, c comes
            counts = {"a": 4, "b": 4, "c": 2}
            keep = np.r_[0:4, 6:10]
            start, end = np.r_[start[keep], 0, 0], np.r_[end[keep], 7, 8]
            committed, state = np.r_[committed[keep], 7, -1], np.r_[state[keep], 0, 1]
            owner = np.r_[owner[keep], 0, 1].astype(np.int32)
            time_lag = np.r_[time_lag[keep], 0.5, math.nan]
            layout, n = Layout.of(counts), 10
        if poll == 17:
            now += telemetry.REFRESH_S  # everything is due
        now += 30
        lag = np.where(committed < 0, -1, end - committed)
        yield (
            now,
            telemetry.Columns(
                layout=layout,
                log_start=start.copy(),
                log_end=end.copy(),
                committed=committed.copy(),
                lag=lag,
                state=state.copy(),
                time_lag=np.round(time_lag, 3),
                owner=owner.copy(),
                owners=owners,
                epoch=epoch,
            ),
        )


def _written() -> str:
    previous: telemetry.Emitted | None = None
    lines: list[str] = []
    for now, columns in _polls():
        changed = columns.changed_since(previous, now)
        previous = columns.emitted(previous, changed, now)
        rows = columns.encoded(
            changed, ts_ms=int(now * 1000), cluster="c", namespace="ns", policy="p", group="g"
        )
        lines.extend(rows.lines)
    return "".join(lines)


def test_the_rows_written_over_a_poll_sequence_are_the_recorded_ones() -> None:
    """The recording predates the previous-row fields: the rows are the recorded ones once
    those are taken out, and each row carries exactly its partition's last written row."""
    written = _written()
    rows = [json.loads(line) for line in written.splitlines()]
    bare = [{k: v for k, v in row.items() if k not in PREVIOUS} for row in rows]
    assert bare == [json.loads(line) for line in RECORDED.read_text().splitlines()]
    last: dict[tuple[str, int], dict[str, object]] = {}
    for row in rows:
        key = (row["topic"], row["partition"])
        assert {k: v for k, v in row.items() if k in PREVIOUS} == (
            previous_of(last[key]) if key in last else {}
        )
        last[key] = row
    assert sum(1 for row in rows if "prev_ts_ms" in row) > len(rows) // 2
    assert 24 < written.count("\n") < 24 * 10  # changed-only: neither nothing nor everything


if __name__ == "__main__":
    RECORDED.parent.mkdir(parents=True, exist_ok=True)
    RECORDED.write_text(_written())
