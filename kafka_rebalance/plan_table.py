"""`plan --format table`: the plan as a person reads it before approving it.

Three blocks: members (weight, partitions, load, normalised load, with the most loaded marked),
the moves (capped, because a first plan for a big group can move thousands), and the stats that
decide whether the plan is worth applying.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance.tables import grid

MAX_MOVES_SHOWN = 50
_KEY_STATS = (
    "strategy",
    "load_model",
    "members",
    "partitions",
    "moves",
    "budgeted_moves",
    "granted_unowned",
    "count_spread",
    "max_load",
    "lower_bound",
    "max_load_ratio",
    "max_load_ratio_before",
    "conflicting_claims",
    "stale_ownership_dropped",
    "unknown_subscriptions_ignored",
)


def _number(value: Any) -> str:
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.4g}" if abs(value) < 1e-3 or abs(value) >= 1e6 else f"{value:.4f}"
    return str(value)


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    return grid(header, rows, right=right, rule=True)[0]


def render_table(plan_result: dict[str, Any]) -> str:
    """Render a plan document (the output of `assignors.plan`) as plain text."""
    summary: dict[str, dict[str, Any]] = plan_result.get("members", {})
    assignment = Assignment(plan_result["assignment"])  # the plan document's own, as written
    stats: dict[str, Any] = plan_result.get("stats", {})
    moves: list[dict[str, Any]] = plan_result.get("moves", [])
    peak = max((entry["normalised_load"] for entry in summary.values()), default=0.0)

    rows = []
    for member_id in assignment:
        entry = summary.get(member_id, {})
        normalised = entry.get("normalised_load", 0.0)
        rows.append(
            [
                member_id,
                _number(entry.get("weight", 1.0)),
                str(sum(len(p) for p in assignment.partitions_of(member_id).values())),
                _number(entry.get("load", 0.0)),
                _number(normalised),
                "<- max" if peak > 0 and normalised == peak else "",
            ]
        )
    header = ["member", "weight", "partitions", "load", "normalised", ""]
    out = ["Members", *(_grid(header, rows, right={1, 2, 3, 4}) if rows else ["  (none)"]), ""]

    out.append(f"Moves ({len(moves)})")
    if moves:
        shown = [
            [f"{move['topic']}-{move['partition']}", str(move["from"]), str(move["to"])]
            for move in moves[:MAX_MOVES_SHOWN]
        ]
        out.extend(_grid(["partition", "from", "to"], shown, right=set()))
        if len(moves) > MAX_MOVES_SHOWN:
            out.append(f"... and {len(moves) - MAX_MOVES_SHOWN} more")
    else:
        out.append("  (none)")
    out.append("")

    out.append("Stats")
    pairs = [[name, _number(stats[name])] for name in _KEY_STATS if name in stats]
    out.extend(_grid(["stat", "value"], pairs, right={1}) if pairs else ["  (none)"])
    return "\n".join(out) + "\n"
