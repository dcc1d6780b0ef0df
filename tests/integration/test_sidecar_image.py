"""scripts/release-sidecar-image: the slim sidecar image as an OCI archive, built without Docker
from the provisioned Debian base; unpacked, its tree runs the sidecar in a chroot.

Needs root, the Debian base (`kafka-rebalance dev provision --only debian-base`) and the package
index (pip installs the dependencies, about 25 s)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 80_000_000  # the target for the unpacked image


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kafka_rebalance_dev.devenv.toolchain import toolchain

    if os.geteuid() != 0:
        pytest.fail("the build checks its tree in a chroot: run the tests as root", pytrace=False)
    if not toolchain().debian_base_tarball.exists():
        pytest.fail("not provisioned: debian-base; run `kafka-rebalance dev provision --only "
                    "debian-base`", pytrace=False)  # fmt: skip
    out = tmp_path_factory.mktemp("images")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release-sidecar-image"), "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stdout)
    (built,) = out.glob("kafka-rebalance-sidecar-*.oci.tar")
    return built


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()


def test_the_archive_is_an_oci_layout_of_one_small_layer(archive: Path, tmp_path: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "layout", filter="data")
    layout = tmp_path / "layout"
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    manifest = json.loads(_blob(layout, entry["digest"]))
    config = json.loads(_blob(layout, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["kafka-rebalance"]
    assert config["config"]["User"] == "10001:10001"
    (layer,) = manifest["layers"]
    raw = gzip.decompress(_blob(layout, layer["digest"]))
    import hashlib

    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(raw).hexdigest()}"]
    print(f"unpacked layer {len(raw) / 1e6:.1f} MB, archive {archive.stat().st_size / 1e6:.1f} MB")
    assert len(raw) <= LIMIT_BYTES


def test_the_unpacked_tree_runs_the_sidecar_without_the_operator(
    archive: Path, tmp_path: Path
) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "layout", filter="data")
    layout = tmp_path / "layout"
    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    manifest = json.loads(_blob(layout, entry["digest"]))
    tree = tmp_path / "tree"
    tree.mkdir()
    layer = layout / "blobs" / "sha256" / manifest["layers"][0]["digest"].removeprefix("sha256:")
    subprocess.run(["tar", "-xzf", str(layer), "-C", str(tree)], check=True)
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    env = {"PATH": "/usr/local/bin:/usr/bin", "HOME": "/tmp"}
    run = subprocess.run(
        [chroot, str(tree), "/usr/local/bin/kafka-rebalance", "sidecar", "--help"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0 and "--assignment-configmap" in run.stdout, run.stderr
    operator = subprocess.run(
        [chroot, str(tree), "/usr/local/bin/kafka-rebalance", "operator"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert operator.returncode == 2 and "pip install 'kafka-rebalance[operator]'" in (
        operator.stderr
    ), operator.stderr
