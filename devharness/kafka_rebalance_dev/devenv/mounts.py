"""Mounts under a directory tree the environment owns, and taking them down before deleting it.

The kubelet (volumes), containerd (container root filesystems) and debootstrap (/proc in the
target) mount things inside their own directories; deleting such a tree while a mount is live
would descend into the mounted filesystem. So every mount below the tree goes first, deepest
first, and only mounts below it: the walk never touches anything outside.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path

MNT_DETACH = 2


def _decode(field: str) -> str:
    """/proc/self/mountinfo escapes space, tab, newline and backslash as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mounts_under(directory: Path) -> list[Path]:
    """Mount points strictly inside `directory`, deepest first."""
    base = os.path.realpath(directory)
    found = []
    with contextlib.suppress(FileNotFoundError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = _decode(line.split()[4])
            if point.startswith(base + os.sep):
                found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_under(directory: Path) -> list[Path]:
    """Lazily unmount every mount inside `directory`; return those that refused."""
    libc = ctypes.CDLL(None, use_errno=True)
    stuck = []
    for point in mounts_under(directory):
        if libc.umount2(os.fsencode(str(point)), MNT_DETACH) != 0:
            stuck.append(point)
    return stuck
