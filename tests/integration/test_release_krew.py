"""scripts/release-krew: the one-file `kubectl cgp` and its krew manifest, installed as krew
would (the archive unpacked onto $PATH) and run by the real kubectl against a real API server.

The bundle is built by pip from the package index, as a release is (about 20 s)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "consumergrouppolicies.yaml"


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("krew")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "release-krew"),
            "--out",
            str(out),
            "--uri-base",
            "https://downloads.example.org/kafka-rebalance/",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_manifest_names_the_archive_by_its_digest(released: Path) -> None:
    from kafka_rebalance.version import version

    manifest = yaml.safe_load((released / "kafka-rebalance.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert (manifest["kind"], manifest["metadata"]["name"]) == ("Plugin", "kafka-rebalance")
    # krew's naming guide: lowercase words separated by hyphens
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", manifest["metadata"]["name"])
    assert manifest["spec"]["version"] == f"v{version()}"
    archive = released / f"kubectl-cgp-{version()}.tar.gz"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    platforms = manifest["spec"]["platforms"]
    assert {(p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"]) for p in
            platforms} == {("linux", "amd64"), ("linux", "arm64"), ("darwin", "amd64"),
                           ("darwin", "arm64")}  # fmt: skip
    for platform in platforms:
        assert platform["sha256"] == digest
        assert platform["uri"] == f"https://downloads.example.org/kafka-rebalance/{archive.name}"
        assert platform["bin"] == "kubectl-cgp"
    with tarfile.open(archive) as tar:
        (member,) = tar.getmembers()
        assert (member.name, member.mode) == ("kubectl-cgp", 0o755)


def test_the_unpacked_plugin_runs_under_kubectl_without_the_project(
    released: Path, k8s: Any, tmp_path: Path
) -> None:
    """Only the unpacked file and the system's python3 on $PATH: no virtualenv, no project.
    As krew does, the archive is unpacked into a store and linked onto $PATH as
    `kubectl-kafka_rebalance` (kubectl runs it as `kubectl kafka-rebalance`)."""
    from kafka_rebalance.version import version

    store, plugins = tmp_path / "store", tmp_path / "plugins"
    store.mkdir()
    plugins.mkdir()
    with tarfile.open(released / f"kubectl-cgp-{version()}.tar.gz") as tar:
        tar.extractall(store, filter="data")
    (plugins / "kubectl-kafka_rebalance").symlink_to(store / "kubectl-cgp")
    k8s.kubectl("apply", "--server-side", "-f", str(CRD))
    k8s.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        "crd/consumergrouppolicies.kafka-rebalance.io",
    )  # fmt: skip
    namespace = f"krew-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", namespace)
    policy = {
        "apiVersion": "kafka-rebalance.io/v1alpha1",
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": "orders", "namespace": namespace},
        "spec": {
            "groupId": "orders",
            "kafka": {"bootstrapServers": "kafka:9092"},
            "topics": ["orders"],
            "members": {"selector": {"matchLabels": {"app": "orders"}}},
        },
    }
    manifest = tmp_path / "policy.yaml"
    manifest.write_text(yaml.safe_dump(policy))
    k8s.kubectl("apply", "-f", str(manifest))
    python_dirs = os.pathsep.join(sorted({"/usr/bin", "/bin", str(Path(sys.base_prefix) / "bin")}))
    env = {
        "PATH": f"{plugins}{os.pathsep}{python_dirs}",
        "KUBECONFIG": str(k8s.kubeconfig),
        "HOME": str(tmp_path),
    }
    version_line = subprocess.run(
        [str(k8s.tools.kubectl), "kafka-rebalance", "version"], env=env, capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert version_line.stdout == f"kubectl-cgp {version()}\n", version_line.stderr
    status = subprocess.run(
        [str(k8s.tools.kubectl), "kafka-rebalance", "status", "-n", namespace, "-o", "name"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert status.returncode == 0, status.stderr
    assert status.stdout == "consumergrouppolicy.kafka-rebalance.io/orders\n"


def test_the_bundle_has_an_sbom_naming_what_pip_put_into_it(released: Path) -> None:
    import json

    from kafka_rebalance.version import version

    bom = json.loads((released / f"kubectl-cgp-{version()}.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX"
    assert bom["metadata"]["component"]["name"] == "kafka-rebalance"
    components = {c["name"].lower(): c["version"] for c in bom["components"]}
    assert "kubernetes" in components and "shtab" in components
    assert components["kubernetes"].split(".")[0] in {str(v) for v in range(33, 37)}
    assert all(c["purl"].startswith("pkg:pypi/") for c in bom["components"])
