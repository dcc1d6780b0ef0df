"""The version is written once: `[project] version` in pyproject.toml.

Python reads it back with `importlib.metadata` (kafka_rebalance.version); the release scripts
read pyproject.toml. Helm, Maven and the docs need the string written down too, so every copy is
checked here against the one source: a release that bumps pyproject.toml and misses a copy fails
this test, naming the file and line (docs/development.md, "The version").
"""

from __future__ import annotations

import re
import subprocess
import tomllib
import xml.etree.ElementTree as ElementTree
from importlib import metadata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
CHART = ROOT / "charts" / "kafka-rebalance-operator" / "Chart.yaml"
POMS = ["broker-plugin/pom.xml", "client-assignor/pom.xml", "benchmarks/java/pom.xml"]
MAVEN = "{http://maven.apache.org/POM/4.0.0}"

# How the project's own artifacts are named where docs, examples and values show a version.
# Third-party versions (Kafka, Helm, images of other projects) never match these.
V = r"v?(\d+\.\d+\.\d+(?:-?(?:rc|a|b|alpha|beta|dev)\d*)?)(?![\w.]*\d)"
ARTIFACTS = re.compile(
    "|".join(
        rf"(?:{name}){V}"
        for name in (
            r"kafka-rebalance-operator:",
            r"kafka-rebalance-sidecar:",
            r"kafka-rebalance-sidecar-",
            r"kafka-rebalance-operator-",
            r"kafka_rebalance-",
            r"kubectl-cgp-",
            r"kubectl-cgp ",
            r"kafka-rebalance-client-assignor:",
            r"kafka-rebalance-operator/blob/",
            r"/kro/blob/",
            r"targetRevision: ",
            r"ref: \{tag: ",
            r"--version ",
        )
    )
)
# Where a version in those forms means something else: released history, and the fixtures of
# the CRD-upgrade and Helm smoke tests (charts of their own).
NOT_OURS = ("CHANGELOG.md", "tests/integration/charts/", "tests/integration/crds/")


def test_the_installed_distribution_reports_the_source_version() -> None:
    assert metadata.version("kafka-rebalance") == VERSION


def test_the_dev_harness_distribution_carries_the_same_version() -> None:
    harness = tomllib.loads((ROOT / "devharness" / "pyproject.toml").read_text())
    assert harness["project"]["version"] == VERSION


def test_the_chart_version_and_app_version_are_the_source_version() -> None:
    chart = yaml.safe_load(CHART.read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)
    images = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    assert [image["image"] for image in images] == [f"kafka-rebalance-operator:{VERSION}"]


@pytest.mark.parametrize("pom", POMS)
def test_every_maven_module_has_the_source_version(pom: str) -> None:
    project = ElementTree.parse(ROOT / pom).getroot()
    assert project.findtext(f"{MAVEN}version") == VERSION


def versions_written(text: str) -> list[tuple[int, str]]:
    """(line number, version) of every project artifact's version in `text`."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in ARTIFACTS.finditer(line):
            found.append((number, next(v for v in match.groups() if v is not None)))
    return found


def test_the_artifact_pattern_finds_a_stale_copy() -> None:
    text = "helm install x charts/kafka-rebalance-operator-0.0.9.tgz\nkafka 4.4.0\n"
    assert versions_written(text) == [(1, "0.0.9")]


def test_docs_examples_and_values_show_the_source_version() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    stale = []
    seen = 0
    for name in tracked:
        path = ROOT / name
        if name.startswith(NOT_OURS) or path.suffix not in {".md", ".yaml", ".yml", ".txt"}:
            continue
        if not path.is_file():
            continue
        for number, version in versions_written(path.read_text(errors="replace")):
            seen += 1
            if version != VERSION:
                stale.append(f"{name}:{number}: {version}")
    assert stale == [], f"pyproject.toml says {VERSION}; stale copies: {stale}"
    assert seen >= 10  # the install guide alone shows a dozen; an empty scan proves nothing
