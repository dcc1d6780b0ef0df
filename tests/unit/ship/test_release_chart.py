"""scripts/release-chart: the packaged chart, its repository index and its Artifact Hub metadata."""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from kafka_rebalance_dev.devenv.toolchain import toolchain

ROOT = Path(__file__).resolve().parents[3]
CHART_YAML = ROOT / "charts" / "kafka-rebalance-operator" / "Chart.yaml"
EXAMPLE = ROOT / "examples" / "policies" / "lag-aware.yaml"


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not toolchain().helm.is_file():
        pytest.fail("not provisioned: helm; run `scripts/bootstrap`", pytrace=False)
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [
            str(ROOT / "scripts" / "release-chart"),
            "--out",
            str(out),
            "--source-url",
            "https://git.example.org/kafka-rebalance-operator",
            "--repo-url",
            "https://charts.example.org/kafka-rebalance",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_package_and_index_agree(released: Path) -> None:
    version = yaml.safe_load(CHART_YAML.read_text())["version"]
    package = released / f"kafka-rebalance-operator-{version}.tgz"
    index = yaml.safe_load((released / "index.yaml").read_text())
    (entry,) = index["entries"]["kafka-rebalance-operator"]
    assert entry["version"] == version
    assert entry["digest"] == hashlib.sha256(package.read_bytes()).hexdigest()
    assert entry["urls"] == [f"https://charts.example.org/kafka-rebalance/{package.name}"]
    assert entry["sources"] == ["https://git.example.org/kafka-rebalance-operator"]


def test_the_package_carries_crds_rules_and_dashboard(released: Path) -> None:
    (package,) = released.glob("*.tgz")
    with tarfile.open(package) as archive:
        names = set(archive.getnames())
    prefix = "kafka-rebalance-operator/"
    for member in (
        "Chart.yaml",
        "values.yaml",
        "values.schema.json",
        "crds/consumergrouppolicies.yaml",
        "files/prometheus-rules.yaml",
        "files/grafana-dashboard.json",
        "templates/prometheusrule.yaml",
    ):
        assert prefix + member in names, member


def test_artifact_hub_metadata_is_complete_and_placeholder_free() -> None:
    chart = yaml.safe_load(CHART_YAML.read_text())
    annotations = chart["annotations"]
    for key in (
        "artifacthub.io/images",
        "artifacthub.io/links",
        "artifacthub.io/maintainers",
        "artifacthub.io/crds",
        "artifacthub.io/crdsExamples",
        "artifacthub.io/changes",
    ):
        assert isinstance(yaml.safe_load(annotations[key]), list), key
    text = CHART_YAML.read_text().lower()
    for placeholder in ("example.com", "todo", "changeme", "your-", "<"):
        assert placeholder not in text, placeholder
    assert chart["maintainers"] == [{"name": "kafka-rebalance-operator maintainers"}]
    image = yaml.safe_load(annotations["artifacthub.io/images"])[0]["image"]
    assert image.endswith(f":{chart['appVersion']}")
    # the CRD example is the shipped lag-aware example, trimmed
    (example,) = yaml.safe_load(annotations["artifacthub.io/crdsExamples"])
    shipped = yaml.safe_load(EXAMPLE.read_text())
    for key, value in example["spec"].items():
        if isinstance(value, dict):
            assert value.items() <= shipped["spec"][key].items(), key
        else:
            assert shipped["spec"][key] == value, key
