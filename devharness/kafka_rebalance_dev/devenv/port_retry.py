"""Starting a group of servers again, on fresh ports, when one of them lost its port.

A port is chosen free (`ports.free_ports`) and bound by the server a moment later; in between,
another process (a second pytest worker's broker, a client's connection) can take it. The
server then exits at start-up with "Address already in use" in its log. That is not a fault of
the code under test, so the whole group (a Kafka cluster, a control plane) is stopped and started
again with new ports, a bounded number of times. Any other start-up failure is raised at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kafka_rebalance_dev.devenv.supervisor import StartupError, Supervisor

T = TypeVar("T")

ATTEMPTS = 3
BIND_FAILURE = "address already in use"  # Java's BindException and Go's listen error alike
LOG_WINDOW = 64 * 1024  # a failed start's lines, stack trace included


def lost_its_port(error: StartupError) -> bool:
    """True when the failed component's error or the end of its log (where its last start
    wrote; logs are appended to across starts) says a bind failed."""
    if BIND_FAILURE in str(error).lower():
        return True
    if not error.log:
        return False
    try:
        with Path(error.log).open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - LOG_WINDOW))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return False
    return BIND_FAILURE in text.lower()


def start_with_fresh_ports(
    start: Callable[[], T],
    supervisor: Supervisor,
    *,
    attempts: int = ATTEMPTS,
    log: Callable[[str], None] = lambda _line: None,
) -> T:
    """`start()`, and while it fails because a server lost its port, stop what that attempt
    started under `supervisor` and call it again (each call must choose its ports anew)."""
    for attempt in range(1, attempts):
        mark = len(supervisor.records)
        try:
            return start()
        except StartupError as error:
            if not lost_its_port(error):
                raise
            supervisor.stop_since(mark, grace=5)
            log(
                f"{error.component}: lost a port to another process; starting again on fresh "
                f"ports (attempt {attempt + 1} of {attempts})"
            )
    return start()
