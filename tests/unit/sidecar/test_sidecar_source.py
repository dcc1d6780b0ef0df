"""The mounted-file source with real files, laid out the way the kubelet writes ConfigMap volumes:
`assignment.json -> ..data/assignment.json`, `..data -> ..<timestamp>/`, updated by writing a new
timestamped directory and renaming a fresh `..data` symlink over the old one (atomic)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.source import FileSource


def document(epoch: int, partitions: list[int], member: str = "orders-0", **extra) -> str:
    return json.dumps(
        {
            "group": "orders-processor",
            "member": member,
            "epoch": epoch,
            "partitions": {"orders": partitions},
            "revoking": {},
            "planHash": f"h{epoch}",
            **extra,
        }
    )


class KubeletVolume:
    """A ConfigMap volume updated like the kubelet's AtomicWriter does it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0
        root.mkdir(parents=True, exist_ok=True)

    def write(self, text: str, *, mtime: float | None = None) -> None:
        self.generation += 1
        stamp = self.root / f"..2026_11_21_00_00_{self.generation:02d}.{os.getpid()}"
        stamp.mkdir()
        target = stamp / "assignment.json"
        target.write_text(text)
        if mtime is not None:
            os.utime(target, (mtime, mtime))
        temporary = self.root / "..data_tmp"
        temporary.symlink_to(stamp.name)
        os.rename(temporary, self.root / "..data")  # the atomic swap
        link = self.root / "assignment.json"
        if not link.is_symlink():
            link.symlink_to("..data/assignment.json")

    @property
    def path(self) -> Path:
        return self.root / "assignment.json"


def tracker() -> AssignmentTracker:
    return AssignmentTracker(group="orders-processor", member="orders-0")


def test_start_reads_the_document_synchronously(tmp_path):
    volume = KubeletVolume(tmp_path / "vol")
    volume.write(document(3, [0, 2]))
    t = tracker()
    source = FileSource(volume.path, t, interval_s=60).start()
    try:
        assert t.current is not None and t.current.epoch == 3
        assert t.current.owned() == {("orders", 0), ("orders", 2)}
    finally:
        source.stop()


def test_symlink_swap_with_an_identical_mtime_is_seen(tmp_path):
    volume = KubeletVolume(tmp_path / "vol")
    volume.write(document(1, [0]), mtime=1_000_000)
    t = tracker()
    source = FileSource(volume.path, t)
    assert source.poll_once() is True
    assert source.poll_once() is False  # same content: nothing offered
    volume.write(document(2, [0, 1]), mtime=1_000_000)  # new content, same mtime
    assert source.poll_once() is True
    assert t.current.epoch == 2 and t.current.owned() == {("orders", 0), ("orders", 1)}


def test_malformed_and_lower_epoch_documents_leave_the_last_good_one(tmp_path):
    volume = KubeletVolume(tmp_path / "vol")
    volume.write(document(5, [1]))
    t = tracker()
    source = FileSource(volume.path, t)
    source.poll_once()
    for bad in (
        '{"group": "orders-processor", "member": "orders-0", "epoch": 6, "partitions": ',
        document(4, [0, 1, 2]),  # lower epoch
        document(7, [0], member="orders-1"),  # another pod's document
        document(6, [-1]),
    ):
        volume.write(bad)
        assert source.poll_once() is True
        assert t.current.epoch == 5 and t.current.owned() == {("orders", 1)}
    assert t.rejected == 4
    volume.write(document(6, [1, 3]))
    source.poll_once()
    assert t.current.epoch == 6


def test_a_missing_file_is_waited_for(tmp_path):
    volume = KubeletVolume(tmp_path / "vol")
    t = tracker()
    source = FileSource(volume.path, t, interval_s=0.05).start()
    try:
        assert t.current is None
        volume.write(document(1, [0]))
        deadline = time.monotonic() + 5
        while t.current is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert t.current is not None and t.current.epoch == 1
    finally:
        source.stop()


def test_the_thread_follows_successive_swaps_and_notifies_subscribers(tmp_path):
    volume = KubeletVolume(tmp_path / "vol")
    volume.write(document(1, [0]))
    t = tracker()
    seen: list[int] = []
    t.subscribe(lambda d: seen.append(d.epoch))
    source = FileSource(volume.path, t, interval_s=0.02).start()
    try:
        for epoch in (2, 3, 4):
            volume.write(document(epoch, [epoch]))
            deadline = time.monotonic() + 5
            while t.current.epoch != epoch and time.monotonic() < deadline:
                time.sleep(0.01)
        assert seen == [1, 2, 3, 4]
    finally:
        source.stop()


def test_generated_at_only_rewrites_are_not_a_new_plan(tmp_path):
    volume = KubeletVolume(tmp_path / "vol")
    volume.write(document(2, [0], generatedAt="2026-11-21T00:00:00Z"))
    t = tracker()
    seen: list[int] = []
    t.subscribe(lambda d: seen.append(d.epoch))
    source = FileSource(volume.path, t)
    source.poll_once()
    volume.write(document(2, [0], generatedAt="2026-11-21T00:05:00Z"))
    source.poll_once()
    assert seen == [2] and t.rejected == 0


def test_a_bookmark_only_moves_the_resume_version() -> None:
    """The kubernetes client leaves a BOOKMARK event's object as a dict (it carries only
    metadata); reading `.metadata` off it made every bookmark a failed watch and a relist."""
    from types import SimpleNamespace

    from kafka_rebalance_sidecar.source import _bookmark_version

    assert _bookmark_version({"kind": "ConfigMap", "metadata": {"resourceVersion": "812"}}) == "812"
    assert _bookmark_version({"metadata": {}}) is None
    assert _bookmark_version({}) is None
    typed = SimpleNamespace(metadata=SimpleNamespace(resource_version="9"))
    assert _bookmark_version(typed) == "9"
