"""scripts/release: the wheel, the sdist and the chart in one dist/, with checksums that verify.

The krew bundle (pip from the package index) is left out here (--skip-krew): it has its own test,
tests/integration/test_release_krew.py."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from kafka_rebalance_dev.devenv.toolchain import toolchain

ROOT = Path(__file__).resolve().parents[3]
VERSION = yaml.safe_load((ROOT / "charts" / "kafka-rebalance-operator" / "Chart.yaml").read_text())[
    "version"
]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not toolchain().helm.is_file():
        pytest.fail("not provisioned: helm; run `scripts/bootstrap`", pytrace=False)
    out = tmp_path_factory.mktemp("release") / "dist"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release"), "--out", str(out), "--skip-krew",
         "--image-registry", "registry.example.org/kafka"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_every_artifact_is_listed_with_a_checksum_that_verifies(dist: Path) -> None:
    lines = (dist / "SHA256SUMS").read_text().splitlines()
    listed = {}
    for line in lines:
        digest, path = line.split("  ", 1)
        listed[path] = digest
    assert set(listed) == {
        f"kafka_rebalance-{VERSION}-py3-none-any.whl",
        f"kafka_rebalance-{VERSION}.tar.gz",
        f"charts/kafka-rebalance-operator-{VERSION}.tgz",
        "charts/index.yaml",
    }
    for path, digest in listed.items():
        assert hashlib.sha256((dist / path).read_bytes()).hexdigest() == digest, path
    verified = subprocess.run(
        ["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=dist, capture_output=True,
        text=True,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_wheel_carries_the_console_scripts_and_the_extras(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"kafka_rebalance-{VERSION}-py3-none-any.whl") as wheel:
        names = wheel.namelist()
        info = f"kafka_rebalance-{VERSION}.dist-info"
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
        metadata = wheel.read(f"{info}/METADATA").decode()
    assert "kafka_rebalance_operator/policy.py" in names
    assert "kubectl-cgp = kafka_rebalance.kubectl_cgp:main" in entry_points
    for extra in ("operator", "watch", "completion", "kubectl", "pipeline", "librdkafka"):
        assert f"Provides-Extra: {extra}" in metadata


def test_the_sdist_is_the_source_without_local_state(dist: Path) -> None:
    with tarfile.open(dist / f"kafka_rebalance-{VERSION}.tar.gz") as sdist:
        names = sdist.getnames()
    top = f"kafka_rebalance-{VERSION}/"
    assert f"{top}pyproject.toml" in names and f"{top}kafka_rebalance/cli.py" in names
    assert not [n for n in names if any(p in n.split("/") for p in (".venv", ".git", "dist"))]


def test_the_chart_points_at_the_release_registry(dist: Path) -> None:
    chart = dist / "charts" / f"kafka-rebalance-operator-{VERSION}.tgz"
    rendered = subprocess.run(
        [str(toolchain().helm), "template", "kro", str(chart), "--namespace", "ops"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"registry.example.org/kafka/kafka-rebalance-operator:{VERSION}"
