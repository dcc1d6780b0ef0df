"""The real node's sandbox ("pause") image, made here because no registry can serve one.

Every pod's sandbox container only has to hold the pod's namespaces and wait for a signal, so a
static Go program of a few lines does; it is packed as an OCI image archive (one layer, one file)
that `ctr images import` loads into the node's containerd. Nothing else of a pause image matters
to the kubelet or containerd.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import run
from kafka_rebalance_dev.devenv.provision.go_tools import GO_BUILD_FLAGS, go_env, go_version_line

PAUSE_SOURCE = """\
// The sandbox process of the kafka-rebalance dev node: hold the pod's namespaces until told
// to stop. Written by kafka-rebalance dev provision.
package main

import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tstop := make(chan os.Signal, 1)
\tsignal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
\t<-stop
}
"""
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


def image_name(version: str) -> str:
    """A name no registry serves (`localhost/`), so nothing ever tries to pull it."""
    return f"localhost/kafka-rebalance-pause:{version}"


def _tar_member(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def oci_archive(binary: bytes, name: str) -> bytes:
    """An OCI image-layout tar with one layer holding /pause, named `name` for ctr import."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer_tar:
        _tar_member(layer_tar, "pause", binary, 0o755)
    layer = layer_buf.getvalue()
    layer_digest = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        },
        sort_keys=True,
    ).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": manifest_digest,
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                    },
                }
            ],
        },
        sort_keys=True,
    ).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _tar_member(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _tar_member(tar, "index.json", index)
        for digest, blob in (
            (layer_digest, layer),
            (config_digest, config),
            (manifest_digest, manifest),
        ):
            _tar_member(tar, f"blobs/sha256/{digest.split(':', 1)[1]}", blob)
    return out.getvalue()


def build_pause(version: str) -> Callable[[Path, Path], dict]:
    def build(tmp: Path, log: Path) -> dict:
        tool = f"pause {version}"
        src = tmp / "src"
        src.mkdir()
        (src / "go.mod").write_text(
            f"module kafka-rebalance.local/pause\n\ngo {go_version_line()}\n"
        )
        (src / "main.go").write_text(PAUSE_SOURCE)
        binary = tmp / "bin" / "pause"
        binary.parent.mkdir()
        cmd = ["go", "build", *GO_BUILD_FLAGS, "-ldflags", "-s -w", "-o", str(binary), "."]
        run(tool, cmd, cwd=src, log=log, env=go_env())
        (tmp / "pause.oci.tar").write_bytes(oci_archive(binary.read_bytes(), image_name(version)))
        shutil.rmtree(src)
        return {"image": image_name(version)}

    return build
