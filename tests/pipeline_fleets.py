"""Small synthetic fleets whose right answers are known, shared by the pipeline's unit and Spark
tests."""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from kafka_rebalance_pipeline.generate import FleetSpec


def uniform_fleet(polls: int) -> FleetSpec:
    """One group, uniform rates, equal capacities, 12 partitions over 4 members: `range` is
    already perfect, so no recommendation may change it."""
    return FleetSpec(
        groups=1,
        polls=polls,
        partitions=(12, 12),
        members=(4, 4),
        topics=1,
        pareto_shape=1000.0,
        diurnal_amplitude=0.0,
        bursts_per_group=0,
        slow_fraction=0.0,
        capacity_jitter=0.0,
        initial_backlog_s=90.0,
    )


def slow_member_fleet(polls: int) -> FleetSpec:
    """The uniform fleet with one member draining at a quarter of the others' capacity."""
    return FleetSpec(**{**uniform_fleet(polls).__dict__, "slow_fraction": 1.0, "slow_factor": 0.25})


def mostly_idle_rows(polls: int = 60, start_ms: int = 1_767_225_600_000) -> list[dict[str, Any]]:
    """Dense telemetry (one row per partition per poll) of one group whose partitions mostly
    repeat their rows, so the operator's sparse rows leave most of them out: polls 17 to 23 s
    apart (so a partition's 300 s refresh falls between polls), and per partition:
    0 backlogged behind production (changes every poll), 1 a burst drained, 2 idle throughout
    (100 behind), 3 idle (50 behind) but moved to another member, 4 producing every fifth poll,
    5 unknown for a while."""
    rows: list[dict[str, Any]] = []
    ts = start_ms
    end = [1000, 500, 200, 300, 0, 50]
    committed = [400, 500, 100, 250, 0, 50]
    for t in range(polls):
        if t:
            ts += 17_000 + (t * 7919) % 6_001
        produced = [100, 500 if 10 <= t < 14 else 0, 0, 0, 30 if t % 5 == 0 else 0, 0]
        drained = [60, 200, 0, 0, 30, 0]
        for p in range(6):
            end[p] += produced[p] if t else 0
            committed[p] = min(end[p], committed[p] + (drained[p] if t else 0))
        for p in range(6):
            unknown = p == 5 and 20 <= t < 26
            lag = end[p] - committed[p]
            owner = f"g-{p % 3}" if not (p == 3 and t >= 30) else "g-0"
            rows.append(
                {
                    "ts_ms": ts, "cluster": "local", "namespace": "idle", "policy": "idle",
                    "group": "idle", "topic": "t", "partition": p, "log_start": 0,
                    "log_end": end[p], "committed": None if unknown else committed[p],
                    "lag": None if unknown else lag,
                    "lag_state": "unknown" if unknown else "ok",
                    "time_lag_s": None if unknown else round(lag / 60.0, 3),
                    "owner": owner, "epoch": 1 if t < 30 else 2,
                }
            )  # fmt: skip
    return rows


def sparse_like_the_operator(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows the operator would have written of dense `rows` (partition rows only): each
    group's polls go through the operator's own rule (`telemetry.Columns.changed_since` and
    `emitted`, with the poll time `ts_ms / 1000` as its clock, as in `phases/report.py`)."""
    from kafka_rebalance_operator.lag import STATES, Layout
    from kafka_rebalance_operator.telemetry import Columns, Emitted

    states = {s.value: i for i, s in enumerate(STATES)}
    polls: dict[tuple[Any, ...], dict[int, list[Mapping[str, Any]]]] = {}
    kept: list[dict[str, Any]] = []
    for row in rows:
        if row.get("kind", "partition") != "partition":
            kept.append(dict(row))  # plan rows are written as they come
            continue
        key = (row["cluster"], row["namespace"], row["policy"], row["group"])
        polls.setdefault(key, {}).setdefault(row["ts_ms"], []).append(row)
    for by_ts in polls.values():
        previous: Emitted | None = None
        for ts_ms in sorted(by_ts):
            poll = by_ts[ts_ms]
            counts: dict[str, int] = {}
            for row in poll:
                counts[row["topic"]] = max(counts.get(row["topic"], 0), row["partition"] + 1)
            layout = Layout.of(counts)
            at = {(r["topic"], r["partition"]): r for r in poll}
            order = [(t, p) for t in layout.topics for p in range(counts[t])]
            assert len(order) == len(poll), "dense rows: every partition at every poll"
            owners = tuple(sorted({r["owner"] for r in poll if r["owner"] is not None}))

            def column(
                name: str,
                order: list[tuple[str, int]] = order,
                at: dict[tuple[str, int], Mapping[str, Any]] = at,
            ) -> np.ndarray:
                values = [at[k][name] for k in order]
                return np.array([-1 if v is None else v for v in values], np.int64)

            epochs = {r["epoch"] for r in poll}
            assert len(epochs) == 1, "one epoch per poll"
            columns = Columns(
                layout=layout,
                log_start=column("log_start"),
                log_end=column("log_end"),
                committed=column("committed"),
                lag=column("lag"),
                state=np.array([states[at[k]["lag_state"]] for k in order], np.int8),
                time_lag=np.array(
                    [np.nan if at[k]["time_lag_s"] is None else at[k]["time_lag_s"] for k in order]
                ),
                owner=np.array(
                    [-1 if at[k]["owner"] is None else owners.index(at[k]["owner"]) for k in order],
                    np.int64,
                ),
                owners=owners,
                epoch=epochs.pop(),
            )
            now = ts_ms / 1000.0
            changed = columns.changed_since(previous, now)
            previous = columns.emitted(previous, changed, now)
            kept.extend(dict(at[k]) for k, c in zip(order, changed.tolist(), strict=True) if c)
    return with_previous_rows(kept)


def with_previous_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`rows` in order, each partition row carrying the previous row of its partition among
    `rows` (`wire.telemetry.PREVIOUS`), as the operator writes them; none on its first."""
    from kafka_rebalance_common.wire.telemetry import PREVIOUS, previous_of

    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for row in rows:
        fresh = {k: v for k, v in row.items() if k not in PREVIOUS}
        if row.get("kind", "partition") == "partition":
            key = tuple(row.get(c) for c in ("cluster", "namespace", "policy", "group", "topic"))
            key += (row.get("partition"),)
            if key in last:
                fresh.update(previous_of(last[key]))
            last[key] = fresh
        out.append(fresh)
    return out


def rates_regression_rows() -> list[dict[str, Any]]:
    """A fixed mixed fleet for the rates job's golden outputs: six generated groups (plan rows
    included), the mostly idle group dense, the idle and a slow-member group sparse as the
    operator writes them (under cluster `sparse`), and a group whose cluster and namespace are
    null. Deterministic: the generator is seeded per group index."""
    from kafka_rebalance_pipeline.generate import generate_group

    spec = FleetSpec(groups=6, polls=60, partitions=(4, 10))
    rows: list[dict[str, Any]] = []
    for index in range(6):
        rows += generate_group(spec, index, [])
    idle = mostly_idle_rows()
    rows += idle
    slow = generate_group(slow_member_fleet(40), 0, [])
    rows += [{**r, "cluster": "sparse"} for r in sparse_like_the_operator([*idle, *slow])]
    nulls = generate_group(uniform_fleet(30), 2, [])
    rows += [{**r, "namespace": None, "cluster": None, "group": "nullkeys"} for r in nulls]
    return rows
