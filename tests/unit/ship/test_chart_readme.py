"""The chart's README is generated from values.yaml by scripts/chart-readme and kept in sync."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import script_modules
import yaml

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "chart-readme"
CHART = ROOT / "charts" / "kafka-rebalance-operator"


def _script() -> ModuleType:
    return script_modules.load("chart-readme")


def _check(chart: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--chart", str(chart)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_committed_readme_is_what_values_yaml_says() -> None:
    result = _check(CHART)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_value_has_a_described_row_and_its_default() -> None:
    chart_readme = _script()
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    rows = chart_readme.rows(values, chart_readme.comments_by_key(text))
    undescribed = [r.key for r in rows if not r.description]
    assert not undescribed, f"values.yaml keys without a comment: {undescribed}"
    keys = {r.key for r in rows}
    for top in values:  # every top-level key is documented itself or through its children
        assert top in keys or any(k.startswith(f"{top}.") for k in keys), top
    by_key = {r.key: r for r in rows}
    assert by_key["image.digest"].default == '""'
    assert by_key["replicaCount"].type == "int"
    assert by_key["resources"].default.startswith('{"requests"')  # a pass-through object


def test_a_new_value_makes_the_readme_stale_until_regenerated(tmp_path: Path) -> None:
    chart = tmp_path / CHART.name
    shutil.copytree(CHART, chart)
    values = chart / "values.yaml"
    values.write_text(values.read_text() + "\n# Something new.\nnewKey: 3\n")
    stale = _check(chart)
    assert stale.returncode == 1 and "stale" in stale.stdout
    subprocess.run([sys.executable, str(SCRIPT), "--chart", str(chart)], check=True, timeout=60)
    assert "| `newKey` | int | `3` | Something new. |" in (chart / "README.md").read_text()
    assert _check(chart).returncode == 0
