"""Loopback port allocation and probing for the local environment.

Every server of the environment binds 127.0.0.1 on a port chosen at start, so several
environments (a developer's `dev up`, a pytest session or two of its workers, a second checkout)
can run side by side without a fixed-port collision.

Ports are drawn below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`): the kernel
gives every outgoing connection's local end a port from that range, so a server port chosen
inside it can be taken by any client's connection between the choice and the bind, and a broker
restarted on its old port can find it gone. Below the range only another server choosing at
random could take it. Where the range leaves too little room below it, the kernel's own choice
(bind to port 0) is used. Whatever remains is handled by the start-up retry
(`kafka_rebalance_dev.devenv.port_retry`).
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000  # clear of the well-known and most registered service ports
MIN_POOL = 4096  # below this many candidates, fall back to the kernel's choice
DRAWS = 64  # ports tried from the pool for one server before the kernel chooses


def server_port_pool(range_file: Path = EPHEMERAL_RANGE) -> range | None:
    """The ports between LOWEST_PORT and the start of the ephemeral range, or None when that is
    too narrow (or the range cannot be read) to draw from at random."""
    try:
        low = int(range_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    pool = range(LOWEST_PORT, low)
    return pool if len(pool) >= MIN_POOL else None


def free_ports(
    count: int, *, pool: range | None = None, rng: random.Random | None = None
) -> list[int]:
    """`count` distinct ports that were free on 127.0.0.1 a moment ago.

    Every socket stays bound until all ports are chosen, so no port is returned twice; they are
    closed before the caller's servers bind. A port drawn from the pool is bound as a test, so
    one in use by any process is skipped; after DRAWS misses in a row the kernel chooses.
    """
    pool = pool if pool is not None else server_port_pool()
    rng = rng or random.SystemRandom()
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(_bound_socket(pool, rng))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _bound_socket(pool: range | None, rng: random.Random) -> socket.socket:
    """A socket bound to a free port of `pool`, or to the kernel's choice."""
    for port in [rng.choice(pool) for _ in range(DRAWS)] if pool is not None else []:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            sock.close()
            continue
        return sock
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOOPBACK, 0))
    return sock


def is_listening(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False
