"""Port choice and the start-up retry of the dev environment: servers bind ports that outgoing
connections cannot take, and a server that lost its port anyway is started again on new ones."""

from __future__ import annotations

import random
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_rebalance_dev.devenv import port_retry, ports
from kafka_rebalance_dev.devenv.processes import StateFile
from kafka_rebalance_dev.devenv.supervisor import StartupError, Supervisor

# A server that binds the port it is given, or fails the way a JVM or Go server does.
SERVER = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "print('ready'.upper(), flush=True)\n"  # READY appears in the log only once it is bound
    "time.sleep(60)\n"
)


def test_the_pool_lies_below_the_ephemeral_range(tmp_path: Path) -> None:
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    assert ports.server_port_pool(range_file) == range(ports.LOWEST_PORT, 32768)
    range_file.write_text("12000\t60999\n")  # too little room below it: the kernel chooses
    assert ports.server_port_pool(range_file) is None
    assert ports.server_port_pool(tmp_path / "missing") is None


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() -> None:
    pool = ports.server_port_pool()
    chosen = ports.free_ports(40)
    assert len(set(chosen)) == 40
    if pool is not None:
        assert all(port in pool for port in chosen)
    for port in chosen:
        with socket.socket() as sock:
            sock.bind((ports.LOOPBACK, port))


def test_a_port_in_use_is_never_handed_out() -> None:
    with socket.socket() as held:
        held.bind((ports.LOOPBACK, 0))
        taken = held.getsockname()[1]
        # A pool of only the taken port: every draw misses, so the kernel chooses.
        chosen = ports.free_ports(3, pool=range(taken, taken + 1), rng=random.Random(7))
    assert taken not in chosen
    assert len(set(chosen)) == 3


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    supervisor = Supervisor(StateFile(tmp_path / "state.json"), die_with_parent=True)
    yield supervisor
    supervisor.stop(grace=1)


def _start_server(supervisor: Supervisor, tmp_path: Path, port: int) -> int:
    log = tmp_path / f"server-{port}.log"
    supervisor.start("server", [sys.executable, "-c", SERVER, str(port)], log)
    # Its own word, not a probe of the port: a thief listening there would answer too.
    supervisor.wait_until(
        "server", lambda: "READY" in log.read_text(), timeout=10, what="listening"
    )
    return port


def test_a_server_that_lost_its_port_is_started_again_on_a_new_one(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    supervisor.start("neighbour", ["sleep", "60"], tmp_path / "neighbour.log")
    with socket.socket() as thief:
        thief.bind((ports.LOOPBACK, 0))
        thief.listen()
        stolen = thief.getsockname()[1]
        choices = iter([stolen, *ports.free_ports(1)])
        lines: list[str] = []
        port = port_retry.start_with_fresh_ports(
            lambda: _start_server(supervisor, tmp_path, next(choices)),
            supervisor,
            log=lines.append,
        )
        assert port != stolen
        assert ports.is_listening(port)
    assert [r.name for r in supervisor.records] == ["neighbour", "server"]  # one server, kept
    assert len(lines) == 1 and "lost a port" in lines[0] and "attempt 2 of 3" in lines[0]


def test_other_start_up_failures_and_the_last_attempt_are_raised(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    attempts: list[int] = []

    def broken() -> int:
        attempts.append(1)
        supervisor.start(
            "broken", [sys.executable, "-c", "raise SystemExit('no config')"], tmp_path / "b.log"
        )
        supervisor.wait_until("broken", lambda: False, timeout=10, what="listening")
        return 0

    with pytest.raises(StartupError, match="exited with code 1"):
        port_retry.start_with_fresh_ports(broken, supervisor)
    assert len(attempts) == 1  # not a lost port: no second try

    with socket.socket() as thief:
        thief.bind((ports.LOOPBACK, 0))
        thief.listen()
        stolen = thief.getsockname()[1]
        calls: list[int] = []

        def always_stolen() -> int:
            calls.append(1)
            return _start_server(supervisor, tmp_path, stolen)

        with pytest.raises(StartupError):
            port_retry.start_with_fresh_ports(always_stolen, supervisor, attempts=3)
    assert len(calls) == 3
