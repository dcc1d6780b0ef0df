"""The sidecar against a real broker: `kafka-rebalance sidecar` subprocesses, documents written by
hand (no operator), S1's ledger as the handler, and the ledger's reconciliation as the proof that
nothing was lost.

Each test has its own topic and group. Sessions time out after 10 s, so a restart "within the
session timeout" is a real race against the broker, not a mock.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka_rebalance_common import wire
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo import ledger
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.demo.operator_process import free_port
from kafka_rebalance_operator.handoff import acknowledged
from kafka_rebalance_operator.kafka.verify import actual_assignment
from kafka_rebalance_sidecar.records import Batch

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 10_000


# ---- a handler for the poison test (imported by the sidecar subprocess) --------------------------


def refuse_poison(batch: Batch) -> None:
    """Refuse any batch holding a record whose value starts with b"poison"; ledger the rest."""
    for record in batch.records:
        if record.value is not None and record.value.startswith(b"poison"):
            raise ValueError(f"cannot process offset {record.offset}")
    ledger.record(batch)


# ---- helpers -------------------------------------------------------------------------------------


def write_document(
    path: Path,
    group: str,
    member: str,
    epoch: int,
    partitions: dict[str, list[int]],
    revoking: dict[str, list[int]] | None = None,
) -> None:
    """Replace the file atomically, as the kubelet's symlink swap does."""
    text = json.dumps(
        {
            "group": group,
            "member": member,
            "epoch": epoch,
            "partitions": partitions,
            "revoking": revoking or {},
            "planHash": f"test-{epoch}",
            "generatedAt": "2026-11-21T00:00:00Z",
        }
    )
    replace_text(path, text)


def replace_text(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


class Sidecar:
    """One `kafka-rebalance sidecar` subprocess with its probes and metrics on one port."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: str,
        member: str,
        document: Path,
        ledger_dir: Path,
        logs: Path,
        *,
        mode: str = "group",
        handler: str = "kafka_rebalance_dev.demo.ledger:record",
        deliver_to: str | None = None,
        extra: tuple[str, ...] = (),
        slow_ms: int = 0,
    ) -> None:
        self.member = member
        self.args = [
            sys.executable,
            "-m",
            "kafka_rebalance.cli",
            "sidecar",
            "--bootstrap-servers",
            bootstrap,
            "--group",
            group,
            "--topics",
            topics,
            "--member",
            member,
            "--apply-mode",
            mode,
            "--assignment",
            str(document),
            *(("--deliver-to", deliver_to) if deliver_to else ("--handler", handler)),
            "--session-timeout-ms",
            str(SESSION_MS),
            "--max-poll-records",
            "50",
            *extra,
        ]
        self.env = {
            **os.environ,
            ledger.LEDGER_DIR_ENV: str(ledger_dir),
            ledger.SLOW_MS_ENV: str(slow_ms),
        }
        self.logs = logs
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> Sidecar:
        self.starts += 1
        self.port = free_port()
        log = open(self.logs / f"{self.member}.{self.starts}.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*self.args, "--health-port", str(self.port), "--metrics-port", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
        )
        log.close()
        return self

    def log_text(self) -> str:
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.logs.glob(f"{self.member}.*.log"))
        )

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("kafka_rebalance_sidecar_") and "{" in line:
                name = line.split("{", 1)[0].removeprefix("kafka_rebalance_sidecar_")
                values[name] = float(line.rsplit(" ", 1)[1])
        return values

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def signal(self, sig: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def stop(self, timeout: float = 30) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.process.wait(10)
            return None

    def kill(self) -> None:
        assert self.process is not None
        self.signal(signal.SIGKILL)
        self.process.wait(10)


class Bench:
    """Topic, group, document files, ledger and sidecars of one test."""

    def __init__(self, bootstrap: str, root: Path, partitions: int, prefix: str) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.bootstrap = bootstrap
        self.topic = f"{prefix}-{suffix}"
        self.group = f"{prefix}-group-{suffix}"
        self.partitions = partitions
        self.root = root
        root.mkdir(parents=True)
        self.ledger = root / "ledger"
        self.ledger.mkdir()
        self.logs = root / "logs"
        self.logs.mkdir()
        self.admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=15000)
        self.admin.create_topics([NewTopic(self.topic, partitions, 1)])
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self.produced: dict[tuple[str, int], int] = {}
        self.sidecars: list[Sidecar] = []

    def document_path(self, member: str) -> Path:
        return self.root / f"{member}.json"

    def write(self, member: str, epoch: int, parts: list[int], revoking: list[int] = ()) -> None:
        write_document(
            self.document_path(member),
            self.group,
            member,
            epoch,
            {self.topic: parts} if parts else {},
            {self.topic: list(revoking)} if revoking else {},
        )

    def sidecar(self, member: str, **kwargs: Any) -> Sidecar:
        car = Sidecar(
            self.bootstrap,
            self.group,
            self.topic,
            member,
            self.document_path(member),
            self.ledger,
            self.logs,
            **kwargs,
        )
        self.sidecars.append(car)
        return car.start()

    def produce(self, per_partition: int, partitions: list[int] | None = None) -> None:
        for p in partitions if partitions is not None else range(self.partitions):
            for _ in range(per_partition):
                self.producer.send(self.topic, value=b"r", partition=p)
            self.produced[(self.topic, p)] = self.produced.get((self.topic, p), 0) + per_partition
        self.producer.flush()

    def report(self) -> ledger.LedgerReport:
        return ledger.reconcile(self.produced, self.ledger)

    def all_processed(self) -> ledger.LedgerReport | None:
        report = self.report()
        return report if report.lost == 0 else None

    def actual(self) -> dict[str, list[int]]:
        group = self.admin.describe_groups([self.group])[self.group]
        if group.get("group_state") != "Stable":
            return {}
        return {m: ts.get(self.topic, []) for m, ts in actual_assignment(group).items()}

    def committed(self) -> dict[int, Any]:
        offsets = self.admin.list_group_offsets({self.group: None})[self.group]
        return {tp.partition: om for tp, om in offsets.items() if tp.topic == self.topic}

    def close(self) -> None:
        for car in self.sidecars:
            car.stop()
        self.producer.close(timeout=5)
        self.admin.close()


@pytest.fixture
def bench(kafka: str, tmp_path: Path) -> Iterator[Callable[..., Bench]]:
    bootstrap = kafka
    made: list[Bench] = []

    def make(partitions: int = 6, prefix: str = "sidecar") -> Bench:
        b = Bench(bootstrap, tmp_path / prefix, partitions, prefix)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
        for car in b.sidecars:  # shown by pytest only when the test failed
            print(f"---- {car.member} ----\n{car.log_text()[-6000:]}")


def converged(bench: Bench, plan: dict[str, list[int]]) -> Callable[[], bool]:
    return lambda: bench.actual() == plan


def settled_generation(bench: Bench, cars: list[Sidecar], plan: dict[str, list[int]]) -> float:
    """Wait until the group has the plan and every sidecar reports the same generation (a
    cooperative move takes two rounds; a sidecar notes the generation after its poll)."""

    def check() -> float | None:
        generations = {c.metrics()["generation"] for c in cars}
        if len(generations) == 1 and bench.actual() == plan:
            return generations.pop()
        return None

    def stable() -> float | None:  # the same answer twice, a second apart
        first = check()
        time.sleep(1)
        return first if first is not None and check() == first else None

    return wait_for("the group settled on one generation", stable, timeout=45)


# ---- (a) group mode: documents are followed, a new epoch moves partitions ------------------------


def test_group_mode_follows_the_documents_and_a_new_epoch(bench):
    b: Bench = bench(6, "follow")
    plan1 = {"s-0": [0, 1], "s-1": [2, 3], "s-2": [4, 5]}
    for member, parts in plan1.items():
        b.write(member, 1, parts)
    cars = [b.sidecar(member) for member in plan1]
    wait_for("the group to take epoch 1", converged(b, plan1), timeout=45)
    wait_for("every sidecar ready", lambda: all(c.ready() for c in cars))
    b.produce(50)
    wait_for("epoch 1 records processed", b.all_processed)

    plan2 = {"s-0": [0, 5], "s-1": [1, 2, 3], "s-2": [4]}
    for member, parts in plan2.items():
        b.write(member, 2, parts)
    b.produce(50)
    wait_for("the group to take epoch 2", converged(b, plan2), timeout=45)
    b.produce(50)
    report = wait_for("everything processed", b.all_processed)
    assert report.produced == 900 and report.lost == 0, report.summary()
    assert report.conflicts == (), report.conflicts  # one owner per partition per epoch
    entries, _ = ledger.read_ledger(b.ledger)
    epoch2 = {(e.partition, e.member) for e in entries if e.epoch == 2}
    assert epoch2 <= {(p, m) for m, ps in plan2.items() for p in ps}
    assert {(5, "s-0"), (1, "s-1")} <= epoch2  # the moved partitions went on at their new owner
    for car in cars:
        m = car.metrics()
        assert m["document_epoch"] == 2 and m["composed_epoch"] == 2
        assert m["owned_partitions"] == len(plan2[car.member])
        assert m["rejoins_total"] >= 1

    # A commit follows its batch's delivery (the ledger line is written inside delivery), so the
    # last batches' commits may land a moment after the ledger shows them.
    def all_committed() -> Any:
        committed = b.committed()
        return (
            committed
            if all(p in committed and committed[p].offset == 150 for p in range(6))
            else None
        )

    committed = wait_for("every partition committed at its end", all_committed, timeout=20)
    for p in range(6):
        owner = next(m for m, ps in plan2.items() if p in ps)
        assert json.loads(committed[p].metadata) == {"member": owner, "epoch": 2}


# ---- (b) SIGKILL and restart within the session timeout: no rebalance ----------------------------


def test_restart_within_the_session_timeout_does_not_rebalance(bench):
    b: Bench = bench(6, "restart")
    plan = {"r-0": [0, 1, 2], "r-1": [3, 4, 5]}
    for member, parts in plan.items():
        b.write(member, 1, parts)
    victim, other = (b.sidecar(m, slow_ms=4) for m in plan)
    generation = settled_generation(b, [victim, other], plan)
    rebalances = other.metrics()["rebalances_total"]
    b.produce(200)  # 600 records at 4 ms each: about 1.2 s of work per member
    wait_for("the victim to be mid-way", lambda: b.report().per_member.get("r-0", 0) > 100)

    victim.kill()
    victim.start()  # same instance id, well within the 10 s session timeout
    wait_for("the restarted sidecar to be ready", victim.ready, timeout=30)
    report = wait_for("everything processed", b.all_processed)
    assert report.lost == 0, report.summary()
    print("restart:", report.summary())

    assert other.metrics()["generation"] == generation  # nobody rebalanced
    assert other.metrics()["rebalances_total"] == rebalances
    assert victim.metrics()["generation"] == generation  # it got its old assignment back
    assert b.actual() == plan
    assert "requesting a rejoin" not in victim.log_text().split("group mode:")[-1]


def test_restart_with_a_newer_document_rejoins_despite_kafka_12759(bench):
    """A static member restarting into a Stable group gets its old assignment back without a
    rebalance, even though its claim changed (KAFKA-12759). The sidecar sees the assignment was
    composed from an older epoch than its document and rejoins, so the new plan does apply once
    the leader's own document is at that epoch too (a leader trusts no claim above it)."""
    b: Bench = bench(6, "k12759")
    plan1 = {"k-0": [0, 1, 2], "k-1": [3, 4, 5]}
    for member, parts in plan1.items():
        b.write(member, 1, parts)
    victim, other = (b.sidecar(m) for m in plan1)
    generation = settled_generation(b, [victim, other], plan1)

    victim.kill()
    plan2 = {"k-0": [0, 1, 2, 3], "k-1": [4, 5]}
    b.write("k-0", 2, plan2["k-0"])  # only the dead member's document changes
    b.write("k-1", 2, plan2["k-1"])
    time.sleep(1.5)  # k-1 rejoins with its new claim first...
    victim.start()  # ...then k-0 comes back within the session timeout
    wait_for("the group to take epoch 2", converged(b, plan2), timeout=45)
    settled_generation(b, [victim, other], plan2)
    assert victim.metrics()["composed_epoch"] == 2
    assert other.metrics()["generation"] > generation

    # The same, with only the restarted member's document changed when it comes back (nobody
    # else rejoins): it gets its old assignment, composed from epoch 2, and rejoins at once.
    victim.kill()
    plan3 = {"k-0": [0, 1], "k-1": [4, 5]}
    b.write("k-0", 3, plan3["k-0"])  # k-0 gives up 2 and 3; nobody claims them at 3
    victim.start()
    wait_for(
        "the restarted member's stale rejoin",
        lambda: (
            "assignment composed from epoch 2, document is at 3"
            in victim.log_text().split("group mode:")[-1]
        ),
        timeout=45,
    )
    # A leader trusts claims only up to its own document's epoch: the operator writes every
    # member's document at the plan's epoch, and k-1's arrives now (its partitions unchanged).
    b.write("k-1", 3, plan3["k-1"])
    wait_for(
        "the restarted member to act on epoch 3",
        lambda: victim.metrics()["composed_epoch"] == 3,
        timeout=45,
    )
    actual = wait_for("a stable group", b.actual, timeout=30)
    # 0, 1 by k-0's claim and 4, 5 by k-1's; 2 and 3 (claimed by nobody now) by the fallback
    assert {0, 1} <= set(actual["k-0"]) and {4, 5} <= set(actual["k-1"])
    assert sorted(actual["k-0"] + actual["k-1"]) == list(range(6))
    b.produce(10)
    report = wait_for("everything processed", b.all_processed)
    assert report.lost == 0, report.summary()


# ---- (c) a corrupt and a lower-epoch document leave the last good assignment ---------------------


def test_corrupt_and_lower_epoch_documents_are_rejected(bench):
    b: Bench = bench(6, "reject")
    b.write("c-0", 1, [0, 1, 2])
    b.write("c-1", 1, [3, 4, 5])
    cars = [b.sidecar("c-0"), b.sidecar("c-1")]
    plan = {"c-0": [0, 1, 2], "c-1": [3, 4, 5]}
    wait_for("epoch 1", converged(b, plan), timeout=45)
    b.write("c-0", 3, [0, 1])
    b.write("c-1", 3, [2, 3, 4, 5])
    plan3 = {"c-0": [0, 1], "c-1": [2, 3, 4, 5]}
    generation = settled_generation(b, cars, plan3)

    replace_text(b.document_path("c-0"), '{"group": "' + b.group + '", "member": "c-0", "epo')
    wait_for(
        "the corrupt document rejected", lambda: cars[0].metrics()["rejected_documents_total"] == 1
    )
    b.write("c-0", 2, [0, 1, 2, 3, 4, 5])  # lower epoch, a plan that would take everything
    wait_for(
        "the stale document rejected", lambda: cars[0].metrics()["rejected_documents_total"] == 2
    )
    b.produce(20)
    wait_for("records processed on the last good plan", b.all_processed)
    metrics = cars[0].metrics()
    assert metrics["document_epoch"] == 3 and metrics["generation"] == generation
    assert b.actual() == plan3
    log = cars[0].log_text()
    assert "not JSON" in log and "lower than the current 3" in log


# ---- (d) assign mode: the two-step hand-over by hand ---------------------------------------------


@pytest.mark.parametrize("engine", ["kafka-python", "librdkafka"])
def test_assign_mode_two_step_handover(bench, engine):
    b: Bench = bench(6, "handover")
    b.write("a-0", 1, [0, 1, 2])
    b.write("a-1", 1, [3, 4, 5])
    a0 = b.sidecar("a-0", mode="assign", slow_ms=2, extra=("--engine", engine))
    a1 = b.sidecar("a-1", mode="assign", slow_ms=2, extra=("--engine", engine))
    wait_for("both ready", lambda: a0.ready() and a1.ready(), timeout=30)
    b.produce(100, [0, 2, 3, 4, 5])  # partition 1 stays empty: its acknowledgement is position 0
    wait_for("a-0 mid-way through partition 2", lambda: _processed(b, "a-0", 2) > 10)

    # Step 1 (epoch 2): a-0 gives up 1 and 2; nobody holds them.
    b.write("a-0", 2, [0], revoking=[1, 2])
    b.write("a-1", 2, [3, 4, 5])

    def acked() -> dict[int, Any] | None:
        committed = b.committed()
        ok = all(p in committed and acknowledged(committed[p].metadata, "a-0", 2) for p in (1, 2))
        return committed if ok else None

    committed = wait_for("a-0's acknowledgement", acked, timeout=30)
    assert committed[1].offset == 0  # nothing was consumed, still acknowledged
    handed_over = committed[2].offset
    entries, _ = ledger.read_ledger(b.ledger)
    a0_p2 = [e.offset for e in entries if e.member == "a-0" and e.partition == 2]
    assert max(a0_p2) + 1 == handed_over  # everything delivered was committed, nothing more
    assert "acknowledged hand-over at epoch 2" in a0.log_text()
    b.produce(20, [2])
    time.sleep(2)  # between the steps, nobody consumes partition 2
    entries, _ = ledger.read_ledger(b.ledger)
    assert not [e for e in entries if e.partition == 2 and e.offset >= handed_over]

    # Step 2 (epoch 3): grant them to a-1.
    b.write("a-0", 3, [0])
    b.write("a-1", 3, [1, 2, 3, 4, 5])
    b.produce(20)
    report = wait_for("everything processed", b.all_processed, timeout=60)
    assert report.lost == 0, report.summary()
    assert report.conflicts == (), report.conflicts
    entries, _ = ledger.read_ledger(b.ledger)
    a1_p2 = sorted(e.offset for e in entries if e.member == "a-1" and e.partition == 2)
    assert a1_p2[0] == handed_over  # the new owner starts where the old one stopped
    assert all(e.epoch == 3 for e in entries if e.member == "a-1" and e.partition == 2)
    assert not [e for e in entries if e.member == "a-0" and e.partition == 2 and e.epoch >= 2]
    assert a0.metrics()["acknowledgements_total"] == 2
    final = b.committed()
    assert wire.decode_commit_metadata(final[2].metadata) == wire.CommitMetadata("a-1", 3)


def _processed(b: Bench, member: str, partition: int) -> int:
    entries, _ = ledger.read_ledger(b.ledger)
    return sum(1 for e in entries if e.member == member and e.partition == partition)


# ---- (e) a poison record is dead-lettered and the partition moves on -----------------------------


def test_poison_record_is_dead_lettered_and_the_partition_moves_on(bench):
    b: Bench = bench(3, "poison")
    dead_letter = f"{b.topic}.dlq"
    b.admin.create_topics([NewTopic(dead_letter, 1, 1)])
    b.write("p-0", 1, [0, 1, 2])
    car = b.sidecar(
        "p-0",
        mode="assign",
        handler="tests.integration.test_sidecar_kafka:refuse_poison",
        extra=("--max-attempts", "2", "--dead-letter-topic", dead_letter),
    )
    for p in range(3):
        for i in range(10):
            value = b"poison!" if (p, i) == (1, 4) else b"ok"
            b.producer.send(b.topic, value=value, partition=p, key=f"k{p}-{i}".encode())
    b.producer.flush()
    b.produced = {(b.topic, 0): 10, (b.topic, 1): 10, (b.topic, 2): 10}
    wait_for(
        "the partition moved past the poison",
        lambda: b.committed().get(1) and b.committed()[1].offset == 10,
    )
    report = b.report()
    assert report.lost == 1 and report.lost_examples == ((b.topic, 1, 4),)  # only the poison

    consumer = KafkaConsumer(
        dead_letter,
        bootstrap_servers=b.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    try:
        dead = [next(consumer)]
    finally:
        consumer.close()
    headers = dict(dead[0].headers)
    assert dead[0].value == b"poison!" and dead[0].key == b"k1-4"
    assert headers["kafka-rebalance.original.topic"] == b.topic.encode()
    assert headers["kafka-rebalance.original.partition"] == b"1"
    assert headers["kafka-rebalance.original.offset"] == b"4"
    assert b"cannot process offset 4" in headers["kafka-rebalance.error"]
    m = car.metrics()
    assert m["records_dead_lettered_total"] == 1 and m["records_delivered_total"] == 29
    assert car.stop() == 0


def test_sigterm_finishes_the_batch_commits_and_exits_zero(bench):
    b: Bench = bench(3, "sigterm")
    b.write("t-0", 1, [0, 1, 2])
    car = b.sidecar("t-0", slow_ms=20)
    wait_for("joined", lambda: b.actual() == {"t-0": [0, 1, 2]}, timeout=45)
    b.produce(100)
    wait_for("consumption under way", lambda: b.report().processed > 60)
    assert car.stop() == 0
    report = b.report()
    committed = b.committed()
    entries, _ = ledger.read_ledger(b.ledger)
    for p in range(3):
        done = [e.offset for e in entries if e.partition == p]
        # what was delivered is committed, so a restart does not repeat it
        assert (committed[p].offset if p in committed else 0) == (max(done) + 1 if done else 0)
    assert report.duplicates == 0
    assert "closed" in car.log_text()


# ---- HTTP delivery and the in-process consumer API -----------------------------------------------


def test_http_delivery_to_the_app_with_refusals_retried(bench):
    b: Bench = bench(3, "http")
    seen: list[tuple[int, int]] = []
    refusals = {"left": 3}

    class App(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if refusals["left"] > 0:  # the app is not ready for the first few batches
                refusals["left"] -= 1
                self.send_response(503)
                self.end_headers()
                return
            seen.extend((r["partition"], r["offset"]) for r in body["records"])
            assert base64.b64decode(body["records"][0]["value"]) == b"r"
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), App)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        b.write("h-0", 1, [0, 1, 2])
        car = b.sidecar(
            "h-0", mode="assign", deliver_to=f"http://127.0.0.1:{server.server_address[1]}/"
        )
        b.produce(40)
        wait_for("all records posted", lambda: len(set(seen)) == 120, timeout=30)
        wait_for("all committed", lambda: all(o.offset == 40 for o in b.committed().values()))
        m = car.metrics()
        assert m["delivery_failures_total"] == 3 and m["records_dead_lettered_total"] == 0
        assert sorted(set(seen)) == [(p, o) for p in range(3) for o in range(40)]
    finally:
        server.shutdown()
        server.server_close()


def test_in_process_consumer_api(bench):
    from kafka_rebalance_sidecar import DocumentSource, PlanFollowingConsumer, SidecarConfig

    b: Bench = bench(4, "api")
    b.write("api-0", 1, [0, 1, 2, 3])
    got: list[Batch] = []
    released: list[frozenset] = []
    consumer = PlanFollowingConsumer(
        SidecarConfig(
            bootstrap_servers=b.bootstrap,
            group=b.group,
            topics=(b.topic,),
            member="api-0",
            session_timeout_ms=SESSION_MS,
        ),
        DocumentSource(file=str(b.document_path("api-0")), file_interval_s=0.2),
        on_poison="skip",
        on_released=released.append,
    )
    thread = threading.Thread(target=consumer.run, args=(got.append,), daemon=True)
    thread.start()
    try:
        b.produce(25)
        wait_for("100 records", lambda: sum(len(x.records) for x in got) >= 100, timeout=45)
        b.write("api-0", 2, [0, 1])  # a one-member group: 2 and 3 go out by the fallback
        wait_for("epoch 2 composed", lambda: consumer.metrics.composed_epoch._value.get() == 2)
        time.sleep(1)
        # the fallback kept 2 and 3 here (one member): nothing was actually lost, nothing released
        assert released == []
    finally:
        consumer.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert {(r.partition, r.offset) for x in got for r in x.records} == {
        (p, o) for p in range(4) for o in range(25)
    }
    assert all(x.member == "api-0" for x in got)
    assert released == [frozenset((b.topic, p) for p in range(4))]  # given up on close
    committed = b.committed()
    assert all(committed[p].offset == 25 for p in range(4))


def test_on_released_reports_only_partitions_that_moved(bench):
    """KIP-54: application state is dropped only for partitions actually gone, not on every
    rebalance (cooperative: the members that keep their partitions see no revocation at all)."""
    from kafka_rebalance_sidecar import DocumentSource, PlanFollowingConsumer, SidecarConfig

    b: Bench = bench(4, "released")
    plan1 = {"x-0": [0, 1], "x-1": [2, 3]}
    released: dict[str, list[frozenset]] = {m: [] for m in plan1}
    consumers = {}
    threads = []
    for member, parts in plan1.items():
        b.write(member, 1, parts)
        consumers[member] = PlanFollowingConsumer(
            SidecarConfig(
                bootstrap_servers=b.bootstrap,
                group=b.group,
                topics=(b.topic,),
                member=member,
                session_timeout_ms=SESSION_MS,
            ),
            DocumentSource(file=str(b.document_path(member)), file_interval_s=0.2),
            on_poison="skip",
            on_released=released[member].append,
        )
        threads.append(
            threading.Thread(target=consumers[member].run, args=(lambda batch: None,), daemon=True)
        )
    for t in threads:
        t.start()
    try:
        wait_for("epoch 1", converged(b, plan1), timeout=45)
        time.sleep(1)
        before = {m: list(r) for m, r in released.items()}
        plan2 = {"x-0": [0], "x-1": [1, 2, 3]}
        for member, parts in plan2.items():
            b.write(member, 2, parts)
        wait_for("epoch 2", converged(b, plan2), timeout=45)
        time.sleep(1)
        after = {m: list(r) for m, r in released.items()}
    finally:
        for c in consumers.values():
            c.stop()
        for t in threads:
            t.join(30)
    assert before == {"x-0": [], "x-1": []}  # joining and the first assignment release nothing
    assert after == {"x-0": [frozenset({(b.topic, 1)})], "x-1": []}


# ---- back-pressure: a busy application is waited for, never poison -------------------------------


class BusyApp:
    """A real HTTP application that answers 503 (`Retry-After: 1`) while `busy()` says so, then
    takes batches; checks the shared token (401 when wrong) and remembers what it took."""

    def __init__(self, token: str | None = None) -> None:
        self.busy: Callable[[], bool] = lambda: False
        self.taken: list[tuple[int, int]] = []
        self.busy_answers = 0
        self.unauthorized = 0
        self.first_post: float | None = None
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if app.first_post is None:
                    app.first_post = time.monotonic()
                if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
                    app.unauthorized += 1
                    self.answer(401)
                elif app.busy():
                    app.busy_answers += 1
                    self.answer(503, {"Retry-After": "1"})
                else:
                    app.taken.extend(
                        (r["partition"], r["offset"]) for r in json.loads(body)["records"]
                    )
                    self.answer(204)

            def answer(self, status: int, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/records"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def committed_to(b: Bench, offset: int, partitions: Any) -> bool:
    committed = b.committed()
    return all(p in committed and committed[p].offset == offset for p in partitions)


def test_an_app_answering_503_for_15_s_loses_nothing_and_keeps_the_group(bench, tmp_path):
    """Group mode, one member. `max_poll_interval_ms` is 5 s, so a sidecar that stopped polling
    while it waited for the app would leave the group (a new generation); one that holds the
    batch and keeps polling with its partitions paused keeps its generation throughout."""
    from kafka_rebalance_sidecar import DocumentSource, PlanFollowingConsumer, SidecarConfig
    from kafka_rebalance_sidecar.delivery import HttpDelivery
    from kafka_rebalance_sidecar.token_file import TokenFile

    b: Bench = bench(3, "busy")
    dead_letter = f"{b.topic}.dlq"
    b.admin.create_topics([NewTopic(dead_letter, 1, 1)])
    token = tmp_path / "token"
    token.write_text("sidecar-token\n")
    app = BusyApp(token="sidecar-token")
    app.busy = lambda: app.first_post is None or time.monotonic() - app.first_post < 15
    b.write("bp-0", 1, [0, 1, 2])
    consumer = PlanFollowingConsumer(
        SidecarConfig(
            bootstrap_servers=b.bootstrap,
            group=b.group,
            topics=(b.topic,),
            member="bp-0",
            session_timeout_ms=SESSION_MS,
            max_poll_records=50,
            consumer_options={"max_poll_interval_ms": 5_000},
        ),
        DocumentSource(file=str(b.document_path("bp-0")), file_interval_s=0.2),
        dead_letter_topic=dead_letter,
    )
    thread = threading.Thread(
        target=consumer.run, args=(HttpDelivery(app.url, token=TokenFile(str(token))),)
    )
    thread.start()
    try:
        metrics = consumer.metrics
        wait_for("joined", lambda: b.actual() == {"bp-0": [0, 1, 2]}, timeout=45)
        wait_for("a generation", lambda: metrics.generation._value.get() >= 0 or None)
        generation = metrics.generation._value.get()
        b.produce(100)
        wait_for("the app pushing back", lambda: app.busy_answers >= 3, timeout=30)
        degraded = consumer.health.live()[1]["degraded"]
        assert degraded and "HTTP 503" in str(degraded)
        assert consumer.health.ready()[0]  # still ready: the partitions stay with this member
        assert metrics.holding._value.get() == 1
        wait_for("all records taken", lambda: len(set(app.taken)) == 300 or None, timeout=45)
        wait_for("committed to the end", lambda: committed_to(b, 100, range(3)), timeout=30)
        busy_for = time.monotonic() - (app.first_post or 0)
        assert busy_for >= 15
        assert sorted(set(app.taken)) == [(p, o) for p in range(3) for o in range(100)]
        assert metrics.records_dead_lettered._value.get() == 0
        assert metrics.records_skipped._value.get() == 0
        assert metrics.generation._value.get() == generation  # never left the group
        assert metrics.backpressure._value.get() == app.busy_answers
        assert app.unauthorized == 0
        assert consumer.health.live()[1]["degraded"] is None
        assert metrics.holding._value.get() == 0
        print(f"busy answers {app.busy_answers}, duplicates {len(app.taken) - len(set(app.taken))}")
    finally:
        consumer.stop()
        thread.join(30)
        app.close()
    assert not thread.is_alive()
    reader = KafkaConsumer(
        dead_letter, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
        consumer_timeout_ms=2000,
    )  # fmt: skip
    try:
        assert list(reader) == []  # nothing dead-lettered
    finally:
        reader.close()


@pytest.mark.parametrize("engine", ["kafka-python", "librdkafka"])
def test_assign_mode_follows_a_revoke_while_the_app_pushes_back(bench, tmp_path, engine):
    """The held records of a revoked partition are not handed over as done: the acknowledgement
    commits the first undelivered offset, at once, while the app is still busy. The sidecar
    command shows the app its token (`--deliver-token-file`)."""
    b: Bench = bench(2, "busyassign")
    token = tmp_path / "token"
    token.write_text("t0ken")
    app = BusyApp(token="t0ken")
    release = threading.Event()
    app.busy = lambda: not release.is_set()
    try:
        b.write("ba-0", 1, [0, 1])
        car = b.sidecar(
            "ba-0",
            mode="assign",
            deliver_to=app.url,
            extra=("--engine", engine, "--deliver-token-file", str(token)),
        )
        wait_for("ready", car.ready, timeout=30)
        b.produce(20, [1])  # the held batch is partition 1's records 0-19, its position 20
        wait_for("the app pushing back", lambda: app.busy_answers >= 2, timeout=30)
        with urllib.request.urlopen(f"http://127.0.0.1:{car.port}/healthz", timeout=5) as r:
            assert "HTTP 503" in json.loads(r.read())["degraded"]
        b.write("ba-0", 2, [0], revoking=[1])

        def acked() -> Any:
            c = b.committed()
            return c if 1 in c and acknowledged(c[1].metadata, "ba-0", 2) else None

        committed = wait_for("the revoke acknowledged while busy", acked, timeout=20)
        assert committed[1].offset == 0  # nothing of partition 1 was delivered
        assert not release.is_set() and app.taken == []
        log_text = car.log_text()
        assert "held records of partitions no longer owned" in log_text
        assert "applied epoch 2" in log_text and "applying epoch 2 failed" not in log_text
        b.produce(20, [0])
        release.set()
        wait_for("partition 0 committed to the end", lambda: committed_to(b, 20, [0]), timeout=30)
        time.sleep(1)
        assert sorted(set(app.taken)) == [(0, o) for o in range(20)]  # 1 was handed over
        m = car.metrics()
        assert m["records_dead_lettered_total"] == 0 and m["records_skipped_total"] == 0
        assert m["holding"] == 0 and m["backpressure_total"] == app.busy_answers
        assert b.committed()[1].offset == 0 and app.unauthorized == 0
        assert car.stop() == 0
    finally:
        app.close()
