"""Loopback port allocation and probing for the local environment.

Every server of the environment binds 127.0.0.1 on a port the kernel hands out, so several
environments (a developer's `dev up`, a pytest session, a second checkout) can run side by side
without a fixed-port collision.
"""

from __future__ import annotations

import contextlib
import socket

LOOPBACK = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free on 127.0.0.1 a moment ago.

    All sockets stay open until every port is chosen, so the kernel cannot return the same port
    twice; they are closed before the caller's servers bind. A server started later could still
    lose a port to an unrelated process in between, which start-up then reports as a failure.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def is_listening(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False
