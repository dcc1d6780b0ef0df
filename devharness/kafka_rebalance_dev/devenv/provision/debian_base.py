"""A Debian root filesystem with Python, standing in for `python:3.11-slim` where no registry is.

The image build needs a Python base image, and these machines reach Debian's archive but no
container registry. debootstrap makes a minimal bookworm (its python3 is 3.11) from Debian's own
packages; `python3 -m venv /usr/local` inside it gives the `python` and `pip` commands the
official slim image offers, so the project's Dockerfile builds on it unchanged. The result is a
tarball (`docker import` takes it as one layer) cached like every other tool.

It needs root and the `debootstrap` package, which only CI or an explicit opt-in installs
(scripts/bootstrap); elsewhere provisioning skips it with a one-line note.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv.mounts import unmount_under
from kafka_rebalance_dev.devenv.provision.frame import ProvisionError, run
from kafka_rebalance_dev.devenv.toolchain import Toolchain

# The machine's CA bundle goes into the image: pip in the image build verifies the package
# registry against it, exactly as on the host (which may sit behind a TLS-inspecting proxy).
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Left out of the tarball: package caches and lists (pip and apt refill what they need) and
# documentation, as the official slim images do.
PRUNE = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "var/cache/debconf",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)


def debootstrap_command(suite: str, root: Path, mirror: str) -> list[str]:
    return [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        suite,
        str(root),
        mirror,
    ]


def build_debian_base(tc: Toolchain) -> Callable[[Path, Path], dict]:
    debian = tc.versions.get("debian", {})
    suite = tc.debian_suite
    mirror = str(debian.get("mirror", "http://deb.debian.org/debian"))

    def build(tmp: Path, log: Path) -> dict:
        tool = f"debian-base {suite}"
        if os.geteuid() != 0:
            raise ProvisionError(f"{tool}: debootstrap needs root")
        root = tmp / "rootfs"
        try:
            run(tool, debootstrap_command(suite, root, mirror), cwd=tmp, log=log)
        finally:  # a failed debootstrap can leave /proc and /sys mounted in the target
            unmount_under(root)
        if HOST_CA_BUNDLE.is_file():
            shutil.copy(HOST_CA_BUNDLE, root / "etc/ssl/certs/ca-certificates.crt")
        run(tool, ["chroot", str(root), "python3", "-m", "venv", "/usr/local"], cwd=tmp, log=log)
        python = run(tool, ["chroot", str(root), "/usr/local/bin/python", "--version"],
                     cwd=tmp, log=log).strip()  # fmt: skip
        for rel in PRUNE:
            target = root / rel
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        run(tool, ["tar", "--numeric-owner", "-C", str(root), "-cf", str(tmp / "rootfs.tar"), "."],
            cwd=tmp, log=log)  # fmt: skip
        shutil.rmtree(root)
        return {"suite": suite, "mirror": mirror, "python": python, "packages": list(PACKAGES)}

    return build
