"""scripts/release-image: the sidecar and operator images as OCI archives, built without Docker
from the provisioned Debian base; unpacked, each tree runs its program in a chroot (the
operator's against the real API server).

Needs root, the Debian base (`kafka-rebalance dev provision --only debian-base`) and the package
index (pip installs the dependencies, about 25 s for the sidecar and 50 s for the operator)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.devenv.ports import free_ports

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "consumergrouppolicies.yaml"
SIDECAR_LIMIT_BYTES = 80_000_000  # the target for the unpacked sidecar image
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"
ENV = {"PATH": "/usr/local/bin:/usr/bin", "HOME": "/tmp"}


def _build(image: str, out: Path) -> Path:
    from kafka_rebalance_dev.devenv.toolchain import toolchain

    if os.geteuid() != 0:
        pytest.fail("the build checks its tree in a chroot: run the tests as root", pytrace=False)
    if not toolchain().debian_base_tarball.exists():
        pytest.fail("not provisioned: debian-base; run `kafka-rebalance dev provision --only "
                    "debian-base`", pytrace=False)  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release-image"), "--image", image,
         "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stdout)
    (built,) = out.glob(f"kafka-rebalance-{image}-*.oci.tar")
    return built


@pytest.fixture(scope="module")
def sidecar_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("sidecar", tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="module")
def operator_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("operator", tmp_path_factory.mktemp("images"))


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()


def _layout(archive: Path, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The archive unpacked as an OCI layout, and its one image's manifest. The image is named
    as a kubelet looks the chart's `<name>:<version>` up (`ctr images import` takes the name)."""
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "layout", filter="data")
    layout = tmp_path / "layout"
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    name, version = archive.name.removesuffix(".oci.tar").rsplit("-", 1)
    named = entry["annotations"]["io.containerd.image.name"]
    assert named == f"docker.io/library/{name}:{version}", named
    return layout, json.loads(_blob(layout, entry["digest"]))


def _tree(archive: Path, tmp_path: Path) -> Path:
    """The image's one layer unpacked: the root file system a container would get."""
    layout, manifest = _layout(archive, tmp_path)
    tree = tmp_path / "tree"
    tree.mkdir()
    layer = layout / "blobs" / "sha256" / manifest["layers"][0]["digest"].removeprefix("sha256:")
    subprocess.run(["tar", "-xzf", str(layer), "-C", str(tree)], check=True)
    return tree


@pytest.mark.parametrize(("image", "command"), [("sidecar", "sidecar"), ("operator", "operator")])
def test_the_archive_is_an_oci_layout_of_one_layer(
    image: str, command: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    archive: Path = request.getfixturevalue(f"{image}_archive")
    layout, manifest = _layout(archive, tmp_path)
    config = json.loads(_blob(layout, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["kafka-rebalance"]
    assert config["config"]["Cmd"] == [command]
    assert config["config"]["User"] == "10001:10001"
    (layer,) = manifest["layers"]
    raw = gzip.decompress(_blob(layout, layer["digest"]))
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(raw).hexdigest()}"]
    print(
        f"{image}: unpacked layer {len(raw) / 1e6:.1f} MB, "
        f"archive {archive.stat().st_size / 1e6:.1f} MB"
    )
    if image == "sidecar":
        assert len(raw) <= SIDECAR_LIMIT_BYTES


def test_the_unpacked_sidecar_runs_the_sidecar_without_the_operator(
    sidecar_archive: Path, tmp_path: Path
) -> None:
    tree = _tree(sidecar_archive, tmp_path)
    run = subprocess.run(
        [CHROOT, str(tree), "/usr/local/bin/kafka-rebalance", "sidecar", "--help"],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0 and "--assignment-configmap" in run.stdout, run.stderr
    operator = subprocess.run(
        [CHROOT, str(tree), "/usr/local/bin/kafka-rebalance", "operator"],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert operator.returncode == 2 and "pip install 'kafka-rebalance[operator]'" in (
        operator.stderr
    ), operator.stderr


def _health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def test_the_unpacked_operator_serves_health_against_the_api_server(
    operator_archive: Path, k8s: Any, tmp_path: Path
) -> None:
    """The operator image's tree, in a chroot (the host's network), runs `kafka-rebalance
    operator` with kopf against the real API server until its health endpoint answers."""
    tree = _tree(operator_archive, tmp_path)
    k8s.kubectl("apply", "--server-side", "-f", str(CRD))
    shutil.copy(k8s.kubeconfig, tree / "tmp" / "kubeconfig")
    metrics_port, health_port = free_ports(2)
    log = tmp_path / "operator.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [CHROOT, str(tree), "/usr/local/bin/kafka-rebalance", "operator",
             "--namespace", "default", "--bind", "127.0.0.1",
             "--metrics-port", str(metrics_port), "--health-port", str(health_port)],
            stdout=output, stderr=subprocess.STDOUT,
            env={**ENV, "KUBECONFIG": "/tmp/kubeconfig"}, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for(
            "the operator's health endpoint",
            lambda: _health(health_port) == 200,
            90,
            0.5,
            abort=lambda: (
                log.read_text(errors="replace")[-3000:] if process.poll() is not None else None
            ),
        )
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
