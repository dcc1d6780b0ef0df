"""Choosing a policy per group from backtest rows, and writing it down for people and for Git.

The choice is conservative on purpose: the current policy stays unless a candidate is clearly
better (less time over the SLO by at least one poll interval, or the same time over the SLO and
a p99 lag lower by a margin). A recommendation that flips on noise would be the flapping the
operator's own hysteresis exists to prevent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

API_VERSION = "kafka-rebalance.io/v1alpha1"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"


@dataclass(frozen=True)
class Margins:
    """How much better a candidate must be to replace the current policy."""

    min_slo_gain_polls: float = 3.0  # less time over the SLO by at least this many polls
    min_slo_gain: float = 0.2  # and by this fraction of the current time over the SLO
    min_lag_gain: float = 0.2  # or, at equal time over the SLO, this relative p99 lag reduction
    min_lag_gain_records: float = 100.0  # and at least this many records


@dataclass
class Recommendation:
    cluster: str
    namespace: str
    policy: str
    group: str
    current: dict[str, Any]
    best: dict[str, Any]
    change: bool
    reason: str
    per_strategy: list[dict[str, Any]] = field(default_factory=list)

    @property
    def chosen(self) -> dict[str, Any]:
        return self.best if self.change else self.current


def _sort_key(row: Mapping[str, Any], order: int) -> tuple[Any, ...]:
    return (row["time_over_slo_s"], row["p99_lag"], row["moves"], row["epochs"], order)


def choose(rows: Sequence[Mapping[str, Any]], margins: Margins = Margins()) -> Recommendation:
    """One group's backtest rows (one per candidate) -> the recommendation."""
    good = sorted((dict(r) for r in rows if not r.get("error")), key=lambda r: not r["is_current"])
    if not good:
        raise ValueError("no successful replay for this group")
    current = next((r for r in good if r["is_current"]), None)
    # Ties go to the earlier row: the grid lists the current policy first.
    ranked = sorted(enumerate(good), key=lambda pair: _sort_key(pair[1], pair[0]))
    best = ranked[0][1]
    first = good[0]
    interval = first["duration_s"] / max(1, first["polls"] - 1)
    if current is None:
        change, reason = True, "no replay of the current policy: the best candidate"
    elif best is current:
        change, reason = False, "the current policy is already the best candidate"
    else:
        slo_gain = current["time_over_slo_s"] - best["time_over_slo_s"]
        lag_gain = current["p99_lag"] - best["p99_lag"]
        if (
            slo_gain >= margins.min_slo_gain_polls * interval - 1e-9
            and slo_gain >= margins.min_slo_gain * current["time_over_slo_s"]
        ):
            change, reason = (
                True,
                (
                    f"{slo_gain:.0f}s less over the SLO "
                    f"({current['time_over_slo_s']:.0f}s -> {best['time_over_slo_s']:.0f}s)"
                ),
            )
        elif (
            abs(slo_gain) < margins.min_slo_gain_polls * interval
            and best["time_over_slo_s"] <= current["time_over_slo_s"]
            and lag_gain >= margins.min_lag_gain_records
            and lag_gain >= margins.min_lag_gain * current["p99_lag"]
        ):
            change, reason = (
                True,
                (
                    f"p99 lag {current['p99_lag']:.0f} -> {best['p99_lag']:.0f} records "
                    f"at equal time over the SLO"
                ),
            )
        else:
            change, reason = (
                False,
                (
                    "no candidate beats the current policy by the margins "
                    f"(best: {best['candidate']}, {slo_gain:.0f}s over-SLO gain, "
                    f"{lag_gain:.0f} records p99 gain)"
                ),
            )
    per_strategy: dict[str, dict[str, Any]] = {}
    for _, row in ranked:
        per_strategy.setdefault(row["strategy"], row)
    anchor = current or best
    return Recommendation(
        cluster=anchor["cluster"],
        namespace=anchor["namespace"],
        policy=anchor["policy"],
        group=anchor["group"],
        current=current or best,
        best=best,
        change=change,
        reason=reason,
        per_strategy=list(per_strategy.values()),
    )


def duration_text(seconds: float) -> str:
    """Seconds as the CRD's duration syntax: 300 -> "5m", 90 -> "90s", 0 -> "0s"."""
    seconds = max(0.0, float(seconds))
    if seconds and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


def patch_document(rec: Recommendation) -> dict[str, Any]:
    """A ConsumerGroupPolicy merge patch (kubectl patch --type merge --patch-file) carrying the
    recommended strategy, weights and rebalance options. Weights select pods by the label
    StatefulSets put on every pod; a list in a merge patch replaces the whole list."""
    row = rec.chosen
    if row.get("group_type") == "share":
        return _share_patch(rec, row)
    if row.get("group_type") == "streams":
        return _streams_patch(rec, row)
    spec: dict[str, Any] = {"strategy": row["strategy"]}
    weights = json.loads(row.get("weights_json") or "{}")
    if row["weights"] == "capacity" and weights:
        spec["members"] = {
            "weights": [
                {"selector": {"matchLabels": {POD_NAME_LABEL: member}}, "weight": weight}
                for member, weight in sorted(weights.items())
            ]
        }
    rebalance: dict[str, Any] = {
        "minImprovement": float(row["min_improvement"]),
        "cooldown": duration_text(row["cooldown_s"]),
    }
    if row.get("max_moves"):
        mm = row["max_moves"]
        rebalance["maxMovesPerRound"] = mm if str(mm).endswith("%") else int(mm)
    spec["rebalance"] = rebalance
    return _policy_patch(rec, spec)


def _policy_patch(rec: Recommendation, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": rec.policy, "namespace": rec.namespace},
        "spec": spec,
    }


def _planner_spec(row: Mapping[str, Any]) -> dict[str, Any]:
    """A planner candidate's drain time and rebalance options, as policy spec fields."""
    rebalance: dict[str, Any] = {"cooldown": duration_text(row["cooldown_s"])}
    if row.get("max_moves"):
        mm = row["max_moves"]
        rebalance["maxMovesPerRound"] = mm if str(mm).endswith("%") else int(mm)
    return {"load": {"targetDrainSeconds": round(float(row["drain_s"]))}, "rebalance": rebalance}


def _share_patch(rec: Recommendation, row: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch for a share group's policy (`spec.groupType: share`): the planner's drain
    time and rebalance options. Recommending `simple` itself patches nothing but the comment:
    a share policy in `observe` mode leaves the group on `simple`."""
    if row["strategy"] == "simple" or row.get("drain_s") is None:
        return _policy_patch(rec, {})
    return _policy_patch(rec, _planner_spec(row))


def _streams_patch(rec: Recommendation, row: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch for a streams group's policy (`spec.groupType: streams`): the task
    planner's strategy, drain time, weights source and rebalance options. Recommending `sticky`
    itself patches nothing but the comment: a streams policy in `observe` mode leaves the
    group on Kafka's sticky task assignor (the plug-in's fallback)."""
    if row["strategy"] == "sticky" or row.get("drain_s") is None:
        return _policy_patch(rec, {})
    spec = {"strategy": "lag-aware", **_planner_spec(row)}
    if row.get("weights") == "adaptive":
        spec["members"] = {"weightFrom": "adaptive"}
    return _policy_patch(rec, spec)


def evidence_lines(rec: Recommendation) -> list[str]:
    cur, best = rec.current, rec.chosen

    def fmt(row: Mapping[str, Any]) -> str:
        return (
            f"time over SLO {row['time_over_slo_s']:.0f}s, p99 lag {row['p99_lag']:.0f}, "
            f"max lag {row['max_lag']:.0f}, moves {row['moves']}, epochs {row['epochs']}"
        )

    lines = [
        f"group {rec.group}: {'change' if rec.change else 'keep'} ({rec.reason})",
        f"current  {cur['candidate']}: {fmt(cur)}",
    ]
    if rec.change:
        lines.append(f"proposed {best['candidate']}: {fmt(best)}")
    return lines


def patch_yaml(rec: Recommendation, window: str = "") -> str:
    header = [
        "# Recommended by `kafka-rebalance pipeline recommend` from a backtest of telemetry"
        + (f" {window}" if window else "")
        + ".",
        *(f"# {line}" for line in evidence_lines(rec)),
        f"# Apply: kubectl -n {rec.namespace} patch consumergrouppolicy {rec.policy} "
        "--type merge --patch-file <this file>",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(patch_document(rec), sort_keys=False)


def summary_row(rec: Recommendation) -> dict[str, Any]:
    chosen = rec.chosen
    return {
        "cluster": rec.cluster,
        "namespace": rec.namespace,
        "policy": rec.policy,
        "group": rec.group,
        "change": rec.change,
        "reason": rec.reason,
        "current": rec.current["candidate"],
        "recommended": chosen["candidate"],
        "strategy": chosen["strategy"],
        "weights": json.loads(chosen.get("weights_json") or "{}"),
        "capacity": json.loads(chosen.get("capacity_json") or "{}"),
        "evidence": {
            name: {"current": rec.current[name], "recommended": chosen[name]}
            for name in ("time_over_slo_s", "p99_lag", "max_lag", "mean_lag", "moves", "epochs")
        },
    }


def recommend_all(
    rows: Iterable[Mapping[str, Any]], margins: Margins = Margins()
) -> list[Recommendation]:
    by_group: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (row["cluster"], row["namespace"], row["policy"], row["group"])
        by_group.setdefault(key, []).append(row)
    return [choose(group_rows, margins) for _, group_rows in sorted(by_group.items())]


def finite(value: Any) -> float:
    return float(value) if value is not None and math.isfinite(float(value)) else 0.0
