"""The ledger handler and the produced-vs-processed reconciliation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_rebalance_dev.demo import ledger
from kafka_rebalance_dev.demo.ledger import Conflict, reconcile
from kafka_rebalance_sidecar.records import Batch, Record


def line(t: str, p: int, o: int, m: str, e: int) -> str:
    return json.dumps({"t": t, "p": p, "o": o, "m": m, "e": e, "ts": 1}) + "\n"


def write(path: Path, *lines: str) -> None:
    path.write_text("".join(lines), encoding="utf-8")


def test_reconcile_known_ledgers(tmp_path: Path) -> None:
    # produced: orders-0 offsets 0..3, orders-1 offsets 0..2 (7 records)
    produced = {("orders", 0): 4, ("orders", 1): 3}
    write(
        tmp_path / "pod-0.jsonl",
        line("orders", 0, 0, "pod-0", 1),
        line("orders", 0, 1, "pod-0", 1),
        line("orders", 0, 2, "pod-0", 1),
        line("orders", 1, 0, "pod-0", 1),  # pod-0 and pod-1 both at epoch 1 on orders-1
    )
    write(
        tmp_path / "pod-1.jsonl",
        line("orders", 1, 0, "pod-1", 1),  # duplicate of pod-0's orders-1@0
        line("orders", 0, 2, "pod-1", 2),  # duplicate, after a hand-over at epoch 2
        line("orders", 9, 0, "pod-1", 2),  # not produced
        '{"t": "orders", "p": 1, "o"',  # cut short by a kill
    )
    (tmp_path / "notes.txt").write_text("not a ledger")
    report = reconcile(produced, tmp_path)
    assert report.produced == 7
    assert report.processed == 7
    assert report.unique == 5  # o0-0, o0-1, o0-2, o1-0, o9-0
    assert report.lost == 3  # orders-0@3, orders-1@1, orders-1@2
    assert report.lost_examples == (("orders", 0, 3), ("orders", 1, 1), ("orders", 1, 2))
    assert report.duplicates == 2  # orders-1@0 and orders-0@2
    assert report.unexpected == 1
    assert report.malformed_lines == 1
    assert report.per_member == {"pod-0": 4, "pod-1": 3}
    assert report.conflicts == (Conflict("orders", 1, 1, ("pod-0", "pod-1")),)
    assert not report.nothing_lost
    assert "lost 3" in report.summary()


def test_reconcile_accepts_exact_coordinates(tmp_path: Path) -> None:
    # a transactional or failed-send stream has gaps: pass exactly what was acknowledged
    produced = [("orders", 0, 0), ("orders", 0, 2), ("payments", 3, 10)]
    write(
        tmp_path / "a.jsonl",
        line("orders", 0, 0, "a", 4),
        line("orders", 0, 2, "a", 4),
        line("payments", 3, 10, "a", 5),
    )
    write(tmp_path / "b.jsonl", line("orders", 0, 2, "b", 5))  # different epoch: no conflict
    report = reconcile(produced, tmp_path)
    assert (report.produced, report.unique, report.lost, report.duplicates) == (3, 3, 0, 1)
    assert report.nothing_lost
    assert report.conflicts == ()
    assert report.per_member == {"a": 3, "b": 1}


def test_reconcile_of_an_empty_directory_loses_everything(tmp_path: Path) -> None:
    report = reconcile({("t", 0): 2}, tmp_path / "missing")
    assert (report.produced, report.processed, report.lost) == (2, 0, 2)
    assert report.lost_examples == (("t", 0, 0), ("t", 0, 1))


def test_record_appends_one_line_per_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ledger.LEDGER_DIR_ENV, str(tmp_path / "ledger"))
    monkeypatch.delenv(ledger.SLOW_MS_ENV, raising=False)
    records = tuple(Record("orders", 1, o, None, b"v", 0) for o in (5, 6))
    ledger.record(Batch("orders-0", 3, records))
    ledger.record(Batch("orders-0", 4, (Record("orders", 2, 0, b"k", None, 0),)))
    ledger.record(Batch("orders-0", 4, ()))
    path = tmp_path / "ledger" / "orders-0.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(r["t"], r["p"], r["o"], r["m"], r["e"]) for r in rows] == [
        ("orders", 1, 5, "orders-0", 3),
        ("orders", 1, 6, "orders-0", 3),
        ("orders", 2, 0, "orders-0", 4),
    ]
    assert all(isinstance(r["ts"], int) and r["ts"] > 0 for r in rows)
    report = reconcile([("orders", 1, 5), ("orders", 1, 6), ("orders", 2, 0)], tmp_path / "ledger")
    assert report.nothing_lost and report.duplicates == 0


def test_record_without_a_directory_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ledger.LEDGER_DIR_ENV, raising=False)
    with pytest.raises(RuntimeError, match=ledger.LEDGER_DIR_ENV):
        ledger.record(Batch("m", 1, ()))


def test_ledger_path_keeps_pod_names_and_neutralises_others(tmp_path: Path) -> None:
    assert ledger.ledger_path(tmp_path, "orders-0") == tmp_path / "orders-0.jsonl"
    assert ledger.ledger_path(tmp_path, "../x/y") == tmp_path / ".._x_y.jsonl"


def test_concurrent_owners_are_overlapping_spans_of_two_members_on_one_partition() -> None:
    def entry(member: str, epoch: int, ts: int, partition: int = 0) -> ledger.Entry:
        return ledger.Entry("t", partition, ts, member, epoch, ts)

    handed_over = [entry("a", 1, 100), entry("a", 1, 200), entry("b", 3, 250), entry("b", 3, 400)]
    back_again = [entry("a", 5, 500), entry("a", 5, 600)]
    other_partition = [entry("c", 1, 150, partition=1)]
    assert ledger.concurrent_owners(handed_over + back_again + other_partition) == ()
    still_consuming = [*handed_over, entry("a", 1, 300)]  # a kept going after b started
    (overlap,) = ledger.concurrent_owners(still_consuming)
    assert (overlap.partition, overlap.first, overlap.second) == (
        0,
        ("a", 1, 100, 300),
        ("b", 3, 250, 400),
    )
