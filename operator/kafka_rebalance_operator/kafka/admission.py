"""Where a policy may send its namespace's Kafka credentials: the bootstrap-server allowlist.

The operator reads the Secret a policy names with its own RBAC and sends those credentials to
the policy's `bootstrapServers`. Without a limit, anyone who may create a policy could point it
at a server of their own and receive another team's password (a confused deputy). With
`--allowed-bootstrap-servers` set, a policy whose bootstrap list names any server outside the
allowlist is refused before its Secret is read or any connection is made.

Every listed server must be allowed, not just one: the client connects to each of them. The
brokers a client later learns from metadata come from the allowed cluster itself, so they need
no entry. Pure: no I/O, no module state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

REFUSAL_REASON = "BootstrapNotAllowed"


class AllowlistError(ValueError):
    """An allowlist entry the operator cannot use (raised at start-up, naming the entry)."""


@dataclass(frozen=True)
class AllowedServer:
    """`host:port`, `host` (any port), `*.domain` or `*.domain:port`; hosts compare lowercased."""

    host: str
    port: int | None

    def allows(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host


def _split(server: str) -> tuple[str, int | None]:
    """`host[:port]` (IPv6 as `[addr]:port`) into a lowercased host and an optional port;
    raises ValueError for anything else."""
    text = server.strip()
    port_text: str | None = None
    if text.startswith("["):
        host, closed, rest = text[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ValueError(server)
        port_text = rest[1:] if rest else None
    elif ":" in text:
        if text.count(":") > 1:
            raise ValueError(server)  # a bare IPv6 address is ambiguous: bracket it
        host, port_text = text.split(":")
    else:
        host = text
    if not host or any(c.isspace() for c in host):
        raise ValueError(server)
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(server)
        port = int(port_text)
    return host.lower().rstrip("."), port


def parse_allowlist(entries: Iterable[str]) -> tuple[AllowedServer, ...]:
    """Entries from the flag (each may itself be comma-separated); raises AllowlistError."""
    allowed = []
    for entry in entries:
        for item in entry.split(","):
            if not item.strip():
                continue
            try:
                host, port = _split(item)
            except ValueError:
                raise AllowlistError(
                    f"--allowed-bootstrap-servers: {item.strip()!r} is not host, host:port, "
                    "*.domain or *.domain:port"
                ) from None
            if "*" in host and not (host.startswith("*.") and "*" not in host[2:]):
                raise AllowlistError(
                    f"--allowed-bootstrap-servers: {item.strip()!r}: '*' only as a leading '*.'"
                )
            allowed.append(AllowedServer(host, port))
    return tuple(allowed)


def bootstrap_allowed(servers: str, allowlist: Iterable[AllowedServer | str] | None) -> str | None:
    """None when every server of `servers` (Kafka's comma-separated bootstrap list) is on the
    allowlist, or the allowlist is empty (no restriction); else a one-line refusal naming the
    first server that is not. Entries may be parsed (parse_allowlist) or the flag's strings."""
    allowed = tuple(
        entry
        for item in allowlist or ()
        for entry in ((item,) if isinstance(item, AllowedServer) else parse_allowlist([item]))
    )
    if not allowed:
        return None
    for server in servers.split(","):
        if not server.strip():
            continue
        try:
            host, port = _split(server)
        except ValueError:
            return f"spec.kafka.bootstrapServers: {server.strip()!r} is not host:port"
        if port is None:
            return f"spec.kafka.bootstrapServers: {server.strip()!r} has no port"
        if not any(entry.allows(host, port) for entry in allowed):
            return (
                f"spec.kafka.bootstrapServers: {server.strip()} is not on the operator's "
                "allowlist (--allowed-bootstrap-servers); the policy's Secret is not read and "
                "no connection is made"
            )
    return None
