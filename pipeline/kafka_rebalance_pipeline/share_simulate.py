"""Fluid model of a share group (KIP-932), and member capacity estimated from its telemetry.

In a share group the records of one partition are handed to every member on it, and a member
reads from every partition it holds. The model: production adds to each share-partition's
backlog; each member's capacity (records/s) is split evenly over its partitions that still
have records to give, and what one partition cannot use (it ran dry) goes back to that member's
other partitions, round after round (work-conserving, as a consumer that finds nothing in one
partition fetches from the others). A partition is drained by the sum of its members' shares.
Plain lists: share groups have tens of partitions and members. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_rebalance_pipeline.simulate import percentile

_EPSILON = 1e-9


def share_drain_step(
    backlog: Sequence[float],
    rates: Sequence[float],
    assignment: Mapping[str, Sequence[int]],
    capacity: Mapping[str, float],
    dt: float,
) -> tuple[list[float], dict[str, float]]:
    """Advance one interval of `dt` seconds; return (new backlog per partition, records each
    member consumed). `assignment`: member -> partition indices (several members may share one).

    Invariants: nothing is consumed that was not there (backlog plus production of the
    interval); a member consumes at most capacity * dt; a partition without a member keeps all
    its records; the new backlog is never negative."""
    remaining = [max(0.0, b) + max(0.0, r) * dt for b, r in zip(backlog, rates, strict=True)]
    left = {m: max(0.0, capacity.get(m, 0.0)) * dt for m in assignment}
    used = {m: 0.0 for m in assignment}
    for _ in range(len(remaining) + 1):  # each round empties a partition or every member
        offers: dict[int, list[tuple[str, float]]] = {}
        for member, parts in assignment.items():
            open_parts = [p for p in set(parts) if remaining[p] > _EPSILON]
            if left[member] <= _EPSILON or not open_parts:
                continue
            share = left[member] / len(open_parts)
            for p in open_parts:
                offers.setdefault(p, []).append((member, share))
        if not offers:
            break
        for p, offered in offers.items():
            total = sum(amount for _m, amount in offered)
            take = min(remaining[p], total)
            remaining[p] -= take
            for member, amount in offered:
                spent = amount * take / total
                left[member] -= spent
                used[member] += spent
    return [max(0.0, r) for r in remaining], used


def estimate_capacity(
    backlog: Sequence[Sequence[float]],
    produced: Sequence[Sequence[float]],
    assignments: Sequence[Mapping[str, Sequence[int]]],
    dts: Sequence[float],
) -> float | None:
    """One capacity (records/s) for every member, from the intervals where members were busy.

    A member holding a partition with a backlog at both ends of an interval was busy throughout:
    in the model, what its other partitions leave goes to that one, so it consumed its whole
    capacity. When every member on the busy members' partitions is busy too, those partitions'
    consumption is all theirs: `C = consumed / busy members / dt` is one sample. The median of
    the samples; None when no interval had a busy member. `backlog[t][p]` at poll t,
    `produced[t][p]` records produced in the interval ending at poll t, `assignments[t]` who held
    what over that interval, `dts[t]` its length (index 0 unused)."""
    samples: list[float] = []
    for t in range(1, len(backlog)):
        dt = dts[t]
        held = {m: set(parts) for m, parts in assignments[t].items()}
        busy = {
            m for m, parts in held.items()
            if any(backlog[t - 1][p] > 0 and backlog[t][p] > 0 for p in parts)
        }  # fmt: skip
        if dt <= 0 or not busy:
            continue
        theirs = set().union(*(held[m] for m in busy))
        if any(parts & theirs for m, parts in held.items() if m not in busy):
            continue  # a member that ran dry shares their partitions: not theirs alone
        consumed = sum(backlog[t - 1][p] + produced[t][p] - backlog[t][p] for p in theirs)
        if consumed > 0:
            samples.append(consumed / len(busy) / dt)
    return percentile(samples, 50.0) if samples else None
