"""The system packages a real node (`dev up --kubelet`, `dev image`) needs, and the one-line hint.

They come from Debian (containerd, runc, the CNI plugins, docker.io to build the image and
debootstrap for its base). scripts/bootstrap installs them only under CI or with
KAFKA_REBALANCE_INSTALL_SYSTEM_PACKAGES=1, never silently on a developer's machine; everything
else says in one line what is missing and how to get it. The KWOK-only environment needs none.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

INSTALL_ENV = "KAFKA_REBALANCE_INSTALL_SYSTEM_PACKAGES"
# Debian's containernetworking-plugins installs here.
CNI_BIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
# package -> a file or command that proves it is installed
PROVIDES: dict[str, str] = {
    "containerd": "containerd",
    "runc": "runc",
    "containernetworking-plugins": "cni:bridge",
    "docker.io": "dockerd",
    "debootstrap": "debootstrap",
}
NODE_PACKAGES = ("containerd", "runc", "containernetworking-plugins")
IMAGE_PACKAGES = ("docker.io", "debootstrap")


def cni_bin_dir() -> Path | None:
    for directory in CNI_BIN_DIRS:
        if (directory / "bridge").is_file() and (directory / "host-local").is_file():
            return directory
    return None


def _present(proof: str) -> bool:
    if proof.startswith("cni:"):
        return cni_bin_dir() is not None
    return shutil.which(proof) is not None or any(
        (Path(d) / proof).is_file() for d in ("/usr/sbin", "/sbin", "/usr/bin")
    )


def missing(packages: tuple[str, ...]) -> list[str]:
    return [p for p in packages if not _present(PROVIDES[p])]


def command(name: str) -> str:
    """A system command's path, also from sbin dirs a non-login PATH may lack."""
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/sbin", "/sbin", "/usr/bin", "/usr/local/sbin"):
        if (Path(directory) / name).is_file():
            return str(Path(directory) / name)
    return name


def hint(packages: list[str]) -> str:
    """One line: what is missing and the two ways to get it."""
    return (
        f"missing system packages {' '.join(packages)}: run `sudo apt-get install "
        f"{' '.join(packages)}`, or `{INSTALL_ENV}=1 scripts/bootstrap` (as root)"
    )


def strict() -> bool:
    """Under CI (or when the packages were asked for) a missing real node is a failure."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get(INSTALL_ENV) == "1"


def is_root() -> bool:
    return os.geteuid() == 0
