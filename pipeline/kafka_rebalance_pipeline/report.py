"""The HTML report: one self-contained file (plots as embedded PNGs) a person can open or attach.

Per group (consumer, share or streams: the fleet table's `type`): lag over time under the
current policy, the recommendation and the best candidate of
every other strategy; and load per member (assigned production / measured capacity) before and
after. A fleet table on top says which groups change and why.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from typing import Any

from kafka_rebalance_pipeline.recommend import Recommendation, evidence_lines


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def lag_plot(rec: Recommendation, interval_s: float) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 3.2))
    shown = {rec.current["candidate"]: ("current: ", 2.2)}
    if rec.change:
        shown[rec.best["candidate"]] = ("recommended: ", 2.2)
    rows = [rec.current, *([rec.best] if rec.change else []), *rec.per_strategy]
    seen = set()
    for row in rows:
        if row["candidate"] in seen:
            continue
        seen.add(row["candidate"])
        series = json.loads(row["lag_series_json"] or "[]")
        if not series:
            continue
        step = row["duration_s"] / len(series) / 60.0
        prefix, width = shown.get(row["candidate"], ("", 1.0))
        axes.plot(
            [i * step for i in range(len(series))],
            series,
            label=f"{prefix}{row['candidate']}",
            linewidth=width,
        )
    axes.set_xlabel("minutes")
    axes.set_ylabel("group lag (records)")
    axes.set_title(f"{rec.group}: lag per strategy (backtest)")
    axes.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(figure)


def load_plot(rec: Recommendation) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    before = json.loads(rec.current["utilisation_json"] or "{}")
    after = json.loads(rec.chosen["utilisation_json"] or "{}")
    members = sorted(set(before) | set(after))
    figure, axes = plt.subplots(figsize=(8, 2.8))
    xs = range(len(members))
    axes.bar([x - 0.2 for x in xs], [before.get(m, 0) for m in members], 0.4, label="current")
    axes.bar([x + 0.2 for x in xs], [after.get(m, 0) for m in members], 0.4, label="recommended")
    axes.axhline(1.0, color="red", linewidth=0.8, linestyle="--")
    axes.set_xticks(list(xs))
    axes.set_xticklabels(members, rotation=30, fontsize=7, ha="right")
    axes.set_ylabel("load / capacity")
    axes.set_title(f"{rec.group}: mean load per member")
    axes.legend(fontsize=7)
    return _png(figure)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render(recs: Sequence[Recommendation], title: str, max_plotted: int = 20) -> str:
    """The whole report. Groups that change come first (largest over-SLO gain first); plots for
    the first `max_plotted` groups, so a fleet of thousands still gives a readable file."""

    def gain(rec: Recommendation) -> float:
        return (rec.current["time_over_slo_s"] - rec.chosen["time_over_slo_s"]) + (
            rec.current["p99_lag"] - rec.chosen["p99_lag"]
        ) * 1e-9

    ordered = sorted(recs, key=lambda r: (not r.change, -gain(r), r.group))
    fleet = _table(
        [
            "group",
            "type",
            "namespace/policy",
            "decision",
            "current",
            "recommended",
            "over SLO (s)",
            "p99 lag",
            "moves",
        ],
        [
            [
                r.group,
                r.current.get("group_type") or "consumer",
                f"{r.namespace}/{r.policy}",
                "change" if r.change else "keep",
                r.current["candidate"],
                r.chosen["candidate"],
                f"{r.current['time_over_slo_s']:.0f} -> {r.chosen['time_over_slo_s']:.0f}",
                f"{r.current['p99_lag']:.0f} -> {r.chosen['p99_lag']:.0f}",
                f"{r.current['moves']} -> {r.chosen['moves']}",
            ]
            for r in ordered
        ],
    )
    sections = []
    for index, rec in enumerate(ordered):
        parts = [f"<h2 id='{html.escape(rec.group)}'>{html.escape(rec.group)}</h2>"]
        parts.append("<pre>" + html.escape("\n".join(evidence_lines(rec))) + "</pre>")
        parts.append(
            _table(
                ["best of strategy", "over SLO (s)", "p99 lag", "max lag", "moves", "epochs"],
                [
                    [
                        r["candidate"],
                        f"{r['time_over_slo_s']:.0f}",
                        f"{r['p99_lag']:.0f}",
                        f"{r['max_lag']:.0f}",
                        r["moves"],
                        r["epochs"],
                    ]
                    for r in rec.per_strategy
                ],
            )
        )
        if index < max_plotted:
            interval = rec.current["duration_s"] / max(1, rec.current["polls"] - 1)
            parts.append(f"<img alt='lag' src='data:image/png;base64,{lag_plot(rec, interval)}'>")
            parts.append(f"<img alt='load' src='data:image/png;base64,{load_plot(rec)}'>")
        sections.append("\n".join(parts))
    changed = sum(r.change for r in recs)
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:72em}"
        "table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}"
        "td,th{border:1px solid #ccc;padding:0.2em 0.5em;text-align:left}"
        "pre{background:#f6f6f6;padding:0.5em}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>{len(recs)} groups, {changed} with a recommended change.</p>"
        f"{fleet}{''.join(sections)}</body></html>\n"
    )
