"""scripts/release-image's session cache: one build per set of inputs, whoever asks."""

from __future__ import annotations

import threading
import time
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
import script_modules


@pytest.fixture(scope="module")
def release_image() -> ModuleType:
    return script_modules.load("release-image")


def _wheel(path: Path, entries: dict[str, bytes], date: tuple[int, ...]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=date), data)  # type: ignore[arg-type]
    return path


def test_the_wheel_digest_follows_contents_not_timestamps_or_order(
    release_image: ModuleType, tmp_path: Path
) -> None:
    entries = {"pkg/a.py": b"a = 1\n", "pkg/b.py": b"b = 2\n"}
    first = _wheel(tmp_path / "1.whl", entries, (2026, 1, 1, 0, 0, 0))
    reordered = dict(reversed(list(entries.items())))
    later = _wheel(tmp_path / "2.whl", reordered, (2026, 11, 29, 12, 0, 0))
    changed = _wheel(tmp_path / "3.whl", {**entries, "pkg/b.py": b"b = 3\n"}, (2026, 1, 1, 0, 0, 0))
    assert first.read_bytes() != later.read_bytes()
    assert release_image.wheel_digest(first) == release_image.wheel_digest(later)
    assert release_image.wheel_digest(first) != release_image.wheel_digest(changed)


def test_builders_of_one_key_build_once_and_every_one_gets_the_archive(
    release_image: ModuleType, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    builds: list[str] = []

    def build(directory: Path) -> str:
        builds.append(threading.current_thread().name)
        time.sleep(0.2)  # the others arrive while this one builds
        (directory / "image-1.oci.tar").write_bytes(b"archive")
        return "7 bytes"

    described: list[str] = []

    def ask(n: int) -> None:
        target = tmp_path / f"out{n}" / "image-1.oci.tar"
        described.append(release_image.from_cache(cache, "key", target, build))

    threads = [threading.Thread(target=ask, args=(n,), name=f"builder-{n}") for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert described == ["7 bytes"] * 4
    assert all((tmp_path / f"out{n}" / "image-1.oci.tar").read_bytes() == b"archive"
               for n in range(4))  # fmt: skip
    assert sorted(p.name for p in cache.iterdir()) == ["key", "key.lock"]  # no staging left


def test_a_failed_build_leaves_nothing_cached_and_the_next_one_builds(
    release_image: ModuleType, tmp_path: Path
) -> None:
    cache, target = tmp_path / "cache", tmp_path / "out" / "image-1.oci.tar"

    def broken(directory: Path) -> str:
        raise SystemExit("release-image: pip install failed")

    with pytest.raises(SystemExit):
        release_image.from_cache(cache, "key", target, broken)
    assert sorted(p.name for p in cache.iterdir()) == ["key.lock"]

    def build(directory: Path) -> str:
        (directory / "image-1.oci.tar").write_bytes(b"archive")
        return "built"

    assert release_image.from_cache(cache, "key", target, build) == "built"
    assert target.read_bytes() == b"archive"
