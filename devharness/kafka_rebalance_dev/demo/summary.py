"""The demo's figures from its time series (pure, so the maths is unit-tested on its own).

A run is a series of points (time, total lag, records processed so far) plus the moments that
split it into phases. "Before" is the worst lag while the policy only observed (the consumers ran
on the fallback assignment); "after" is the worst lag over the final window of the enforced
phase, i.e. where the plan has had time to act, not the transient while it converged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Point:
    t: float  # seconds since the run started
    lag: int  # total lag of the group
    processed: int  # records processed so far (all members, duplicates included)


def within(points: Iterable[Point], start: float, end: float) -> list[Point]:
    return [p for p in points if start <= p.t <= end]


def max_lag(points: Iterable[Point], start: float, end: float) -> int:
    """Largest total lag seen in [start, end]; 0 when no point falls inside."""
    return max((p.lag for p in within(points, start, end)), default=0)


def throughput(points: Iterable[Point], start: float, end: float) -> float:
    """Records processed per second between the first and last points inside [start, end]."""
    inside = within(points, start, end)
    if len(inside) < 2 or inside[-1].t <= inside[0].t:
        return 0.0
    return (inside[-1].processed - inside[0].processed) / (inside[-1].t - inside[0].t)


def lag_trend(points: Iterable[Point], start: float, end: float) -> float:
    """Least-squares slope of total lag over [start, end] in records per second: > 0 means the
    group falls further behind, about 0 means it keeps up."""
    inside = within(points, start, end)
    if len(inside) < 2:
        return 0.0
    n = len(inside)
    mean_t = sum(p.t for p in inside) / n
    mean_lag = sum(p.lag for p in inside) / n
    spread = sum((p.t - mean_t) ** 2 for p in inside)
    if spread == 0:
        return 0.0
    return sum((p.t - mean_t) * (p.lag - mean_lag) for p in inside) / spread


def lag_over_time(points: Sequence[Point], every: float) -> list[tuple[float, int]]:
    """The total lag about every `every` seconds (the first point at or after each mark)."""
    out: list[tuple[float, int]] = []
    mark = 0.0
    for point in points:
        if point.t >= mark:
            out.append((round(point.t, 1), point.lag))
            while mark <= point.t:
                mark += every
    return out


def plan_reversals(plans: Sequence[Mapping[int, str]]) -> int:
    """How often a plan gives a partition back to a member an earlier plan took it from.

    Flapping (KIP-794) is load-following that undoes itself: a partition moved off a member and
    later moved back. A plan that only keeps refining (each move to a member the partition never
    left) is convergence, however late it comes, so this counts returns rather than plan changes.
    `plans` are the successive plans (partition -> member); a partition missing from a plan is
    between owners and does not count as owned."""
    reversals = 0
    left: dict[int, set[str]] = {}
    current: dict[int, str] = {}
    for plan in plans:
        for partition, member in plan.items():
            previous = current.get(partition)
            if previous == member:
                continue
            if member in left.get(partition, set()):
                reversals += 1
            if previous is not None:
                left.setdefault(partition, set()).add(previous)
            current[partition] = member
    return reversals


@dataclass(frozen=True)
class Phases:
    """When the policy switched from observe to enforce, and when production stopped."""

    enforce_at: float
    stop_at: float
    window_s: float

    def before(self) -> tuple[float, float]:
        return (0.0, self.enforce_at)

    def after(self) -> tuple[float, float]:
        return (max(self.enforce_at, self.stop_at - self.window_s), self.stop_at)


def build_summary(
    *,
    strategy: str,
    duration_s: float,
    points: Sequence[Point],
    phases: Phases,
    produced: int,
    processed: int,
    lost: int,
    duplicates: int,
    epochs: int,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary object `--json` prints: the keys issue 5 fixes, then the supporting figures."""
    after = phases.after()
    summary: dict[str, Any] = {
        "strategy": strategy,
        "duration_s": round(duration_s, 1),
        "max_lag_before": max_lag(points, *phases.before()),
        "max_lag_after": max_lag(points, *after),
        "produced": produced,
        "processed": processed,
        "lost": lost,
        "duplicates": duplicates,
        "epochs": epochs,
        "throughput_after": round(throughput(points, *after), 1),
        "lag_trend_after": round(lag_trend(points, *after), 1),
    }
    summary.update(extra or {})
    return summary


def comparison_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of several runs side by side (the KIP-794 comparison)."""
    columns = [
        ("strategy", "strategy", "{}"),
        ("throughput (rec/s)", "throughput", "{:.1f}"),
        ("slow member capacity (rec/s)", "capacity", "{:.1f}"),
        ("production (rec/s)", "production", "{:.1f}"),
        ("max lag", "max_lag", "{}"),
        ("final lag", "final_lag", "{}"),
        ("lag trend (rec/s)", "lag_trend", "{:+.1f}"),
        ("epochs", "epochs", "{}"),
        ("plan changes in final window", "plan_changes_in_final_window", "{}"),
        ("reversals", "plan_reversals", "{}"),
        ("lost", "lost", "{}"),
    ]
    present = [c for c in columns if any(c[1] in row for row in rows)]
    lines = [
        "| " + " | ".join(title for title, _, _ in present) + " |",
        "|" + "|".join("---" for _ in present) + "|",
    ]
    for row in rows:
        cells = [fmt.format(row[key]) if key in row else "" for _, key, fmt in present]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
