"""Fluid model of a streams group (KIP-1071), and each member's capacity measured from its
telemetry.

A task is one unit of work with one active member: production adds to its input backlog, and
the member running it drains its tasks with its capacity (records/s) shared max-min fairly over
them, which is the consumer model (`simulate.drain_step`, tasks in place of partitions). A task
that changed member pauses for the hand-over: `handoff_s`, or `restore_s` when it is stateful
and its new member held no standby of it (the state is restored from the changelog first).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_rebalance_pipeline.simulate import percentile


def pauses(
    before: Sequence[str | None],
    after: Sequence[str | None],
    stateful: Sequence[bool],
    standbys: Sequence[Sequence[str]],
    *,
    handoff_s: float,
    restore_s: float,
) -> list[float]:
    """Seconds each task is paused by going from the owners `before` to `after`: 0 for a task
    that stays or had no member; `restore_s` for a stateful task landing off its standbys;
    `handoff_s` for any other move."""
    result = []
    for b, a, heavy, held in zip(before, after, stateful, standbys, strict=True):
        if b is None or a is None or a == b:
            result.append(0.0)
        else:
            result.append(restore_s if heavy and a not in held else handoff_s)
    return result


def member_capacity(
    backlog: Sequence[Sequence[float]],
    produced: Sequence[Sequence[float]],
    owners: Sequence[Sequence[str | None]],
    dts: Sequence[float],
) -> dict[str, float]:
    """Each member's capacity (records/s): the median over the intervals where it was busy of
    what its tasks consumed per second. A member is busy over an interval when one of its tasks
    had a backlog at both ends (the model gives that task whatever the member's other tasks
    leave, so the member consumed its whole capacity). Members never busy are absent.
    `backlog[t][k]` at poll t, `produced[t][k]` records produced in the interval ending at poll
    t, `owners[t][k]` the member running task k over that interval, `dts[t]` its length (index
    0 unused)."""
    samples: dict[str, list[float]] = {}
    for t in range(1, len(backlog)):
        dt = dts[t]
        if dt <= 0:
            continue
        tasks: dict[str, list[int]] = {}
        for k, member in enumerate(owners[t]):
            if member is not None:
                tasks.setdefault(member, []).append(k)
        for member, ks in tasks.items():
            if not any(backlog[t - 1][k] > 0 and backlog[t][k] > 0 for k in ks):
                continue
            consumed = sum(backlog[t - 1][k] + produced[t][k] - backlog[t][k] for k in ks)
            if consumed > 0:
                samples.setdefault(member, []).append(consumed / dt)
    return {m: percentile(v, 50.0) for m, v in sorted(samples.items())}


def fill_capacity(
    measured: Mapping[str, float], members: Sequence[str]
) -> tuple[dict[str, float], str]:
    """Capacity for every member: measured where it was busy, else the median of the measured
    ones; ("measured" | "none") says whether any was measured."""
    if not measured:
        return {}, "none"
    fallback = percentile(list(measured.values()), 50.0)
    return {m: measured.get(m, fallback) for m in sorted(set(members) | set(measured))}, "measured"
