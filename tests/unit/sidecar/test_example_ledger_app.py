"""examples/ledger-app/app.py, the application the real-pod tests run beside the sidecar, spoken
to by the sidecar's own HTTP delivery: what it acknowledges is in the ledger, what it cannot
read is refused (so the sidecar sends it again), and SIGTERM leaves it answering while the
sidecar finishes its batch."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_rebalance_dev.demo.ledger import read_ledger
from kafka_rebalance_sidecar.delivery import AppUnavailable, HttpDelivery
from kafka_rebalance_sidecar.records import Batch, Record
from kafka_rebalance_sidecar.token_file import TokenFile

APP = Path(__file__).resolve().parents[3] / "examples" / "ledger-app" / "app.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_app(tmp_path: Path, **extra: str) -> tuple[subprocess.Popen[str], str, Path]:
    port, ledger = free_port(), tmp_path / "ledger"
    env = {**os.environ, "LEDGER_DIR": str(ledger), "PORT": str(port), "DRAIN_S": "1", **extra}
    proc = subprocess.Popen([sys.executable, str(APP)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}/records", ledger


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    proc, url, ledger = start_app(tmp_path)
    try:
        yield proc, url, ledger
    finally:
        proc.kill()
        proc.wait()


def batch(member: str, epoch: int, offsets: range) -> Batch:
    records = tuple(Record("t", 2, o, b"k", bytes([o % 256]) * 3, 1_700_000_000_000, ())
                    for o in offsets)  # fmt: skip
    return Batch(member=member, epoch=epoch, records=records)


def test_every_acknowledged_record_is_in_the_members_ledger(app) -> None:
    _proc, url, ledger = app
    delivery = HttpDelivery(url)
    delivery(batch("events-0", 3, range(0, 100)))
    delivery(batch("events-1", 4, range(100, 150)))  # the same kept-alive connection
    entries, malformed = read_ledger(ledger)
    assert malformed == 0
    assert sorted((e.member, e.epoch, e.offset) for e in entries) == sorted(
        [("events-0", 3, o) for o in range(100)] + [("events-1", 4, o) for o in range(100, 150)]
    )
    assert {p.name for p in ledger.iterdir()} == {"events-0.jsonl", "events-1.jsonl"}


def test_a_batch_it_cannot_read_is_refused_not_acknowledged(app) -> None:
    _proc, url, ledger = app
    port = int(url.split(":")[2].split("/")[0])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/records", body=b'{"member": "m", "records": [{"topic": "t"}]}')
    answer = connection.getresponse()
    assert answer.status == 400, answer.status  # a refusal: the sidecar sends it again
    assert b"malformed batch" in answer.read()
    assert not ledger.exists() or read_ledger(ledger)[0] == []


def test_after_sigterm_it_keeps_answering_for_the_drain_period(app) -> None:
    proc, url, ledger = app
    proc.send_signal(signal.SIGTERM)
    HttpDelivery(url)(batch("events-2", 1, range(5)))  # the sidecar's last batch lands
    assert len(read_ledger(ledger)[0]) == 5
    assert proc.wait(timeout=10) == 0


def test_with_a_token_file_only_the_sidecar_holding_the_token_is_served(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("pod-secret\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("guess")
    proc, url, ledger = start_app(tmp_path, TOKEN_FILE=str(token))
    try:
        for sink in (HttpDelivery(url), HttpDelivery(url, token=TokenFile(str(wrong)))):
            with pytest.raises(AppUnavailable, match="HTTP 401"):  # held, not poison
                sink(batch("events-0", 1, range(3)))
        assert not ledger.exists() or read_ledger(ledger)[0] == []
        HttpDelivery(url, token=TokenFile(str(token)))(batch("events-0", 1, range(3)))
        assert len(read_ledger(ledger)[0]) == 3
    finally:
        proc.kill()
        proc.wait()


def test_an_unwritable_ledger_answers_503_with_retry_after(tmp_path: Path) -> None:
    proc, url, ledger = start_app(tmp_path, RETRY_AFTER_S="4")
    try:
        ledger.mkdir(parents=True, exist_ok=True)
        (ledger / "events-0.jsonl").mkdir()  # the member's ledger file cannot be opened
        with pytest.raises(AppUnavailable) as unavailable:
            HttpDelivery(url)(batch("events-0", 1, range(3)))
        assert unavailable.value.retry_after_s == 4 and "HTTP 503" in str(unavailable.value)
    finally:
        proc.kill()
        proc.wait()
