"""`pipeline recommend`: backtest Parquet -> patch YAML per group, recommendations.json, report.

The backtest output is one row per group and candidate (small), so this step reads it with
pyarrow directly instead of starting Spark.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafka_rebalance_pipeline.progress import QUIET, Progress
from kafka_rebalance_pipeline.recommend import Margins, patch_yaml, recommend_all, summary_row
from kafka_rebalance_pipeline.report import render
from kafka_rebalance_pipeline.spark_io import write_json


def read_backtest(backtest_dir: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    path = backtest_dir / "backtest" if (backtest_dir / "backtest").is_dir() else backtest_dir
    return pq.read_table(str(path)).to_pylist()


def run_recommend(
    backtest_dir: Path,
    out: Path,
    margins: Margins | None = None,
    max_plotted: int = 20,
    progress: Progress = QUIET,
) -> dict[str, Any]:
    started = time.perf_counter()
    progress.stage("reading the backtest")
    rows = read_backtest(backtest_dir)
    progress.stage("choosing a policy per group")
    recs = recommend_all(rows, margins or Margins())
    progress.count(len(recs), len(recs), "groups")
    progress.stage("writing patches")
    patches = out / "patches"
    if patches.exists():
        for old in patches.rglob("*.yaml"):
            old.unlink()
    written = []
    for rec in recs:
        if not rec.change:
            continue
        path = patches / rec.namespace / f"{rec.policy}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(patch_yaml(rec))
        written.append(str(path))
        progress.count(len(written), None, "patches")
    write_json(out / "recommendations.json", [summary_row(r) for r in recs])
    report = out / "report.html"
    progress.stage("rendering the report")
    report.write_text(render(recs, "kafka-rebalance: recommended policies", max_plotted))
    summary = {
        "groups": len(recs),
        "changes": sum(r.change for r in recs),
        "patches": written,
        "report": str(report),
        "seconds": round(time.perf_counter() - started, 3),
    }
    write_json(out / "recommend_summary.json", summary)
    return summary
