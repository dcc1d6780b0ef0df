"""The live table: one block per sample, members as rows (pure text, unit-tested).

It shows what a reader needs to watch the plan converge: which partitions each member actually
holds (hot ones starred), the lag on them, and how fast each member is processing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class MemberRow:
    member: str
    partitions: tuple[int, ...]
    lag: int
    rate: float  # records processed per second since the previous sample
    slow: bool
    alive: bool


def member_rows(
    members: Collection[str],
    owners: Mapping[int, str],
    lag: Mapping[int, int],
    processed_now: Mapping[str, int],
    processed_before: Mapping[str, int],
    dt: float,
    slow: Collection[str],
) -> list[MemberRow]:
    """Rows for every member alive or owning a partition; partitions nobody owns are listed
    under "-" so a gap in the assignment is visible rather than hidden."""
    names = sorted(set(members) | set(owners.values()))
    rows = []
    for name in names:
        parts = tuple(sorted(p for p, owner in owners.items() if owner == name))
        delta = processed_now.get(name, 0) - processed_before.get(name, 0)
        rows.append(
            MemberRow(
                member=name,
                partitions=parts,
                lag=sum(lag.get(p, 0) for p in parts),
                rate=delta / dt if dt > 0 else 0.0,
                slow=name in slow,
                alive=name in members,
            )
        )
    orphans = tuple(sorted(p for p in lag if p not in owners))
    if orphans:
        rows.append(MemberRow("-", orphans, sum(lag[p] for p in orphans), 0.0, False, False))
    return rows


def render(
    rows: list[MemberRow],
    *,
    t: float,
    phase: str,
    epoch: int,
    group_state: str,
    hot: Collection[int],
) -> str:
    """A block of text: a header line, then one line per member."""
    total = sum(r.lag for r in rows)
    lines = [
        f"t={t:6.1f}s  phase={phase:<9} epoch={epoch:<3} group={group_state:<12} total lag={total}",
        f"  {'member':<22}{'partitions (*hot)':<26}{'lag':>8}{'rec/s':>9}",
    ]
    for row in rows:
        parts = ",".join(f"{p}{'*' if p in hot else ''}" for p in row.partitions) or "(none)"
        tags = []
        if row.slow:
            tags.append("slow")
        if not row.alive and row.member != "-":
            tags.append("gone")
        tag = f" [{' '.join(tags)}]" if tags else ""
        lines.append(f"  {row.member + tag:<22}{parts:<26}{row.lag:>8}{row.rate:>9.1f}")
    return "\n".join(lines)
