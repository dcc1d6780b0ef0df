"""Just enough of the Kafka wire protocol to tell whether a broker is really serving.

A listening port only proves a socket is open; readiness means the broker answers Kafka
requests and knows its cluster. Two requests suffice and both are spoken by 3.9 and 4.x alike:
ApiVersions v0 (every broker answers it, even with UNSUPPORTED_VERSION, so it works as a ping)
and Metadata v4 (the lowest version Kafka 4.0 kept after KIP-896), whose broker list shows
which nodes have registered and been unfenced. Kept dependency-free so `dev status` is fast.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

API_METADATA = 3
API_VERSIONS = 18
ERROR_NONE = 0
ERROR_UNSUPPORTED_VERSION = 35
CLIENT_ID = b"kafka-rebalance-devenv"


class KafkaProtocolError(RuntimeError):
    """The peer answered, but not the way a Kafka broker does."""


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int


def _request(
    host: str, port: int, api_key: int, version: int, body: bytes, timeout: float
) -> bytes:
    """Send one request with header v1 and return the response body after the correlation id."""
    correlation_id = 7
    header = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    payload = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read_exact(sock, 4))[0]
        if size < 4 or size > 64 * 1024 * 1024:
            raise KafkaProtocolError(f"implausible response size {size}")
        data = _read_exact(sock, size)
    (got,) = struct.unpack_from(">i", data, 0)
    if got != correlation_id:
        raise KafkaProtocolError(f"correlation id {got} != {correlation_id}")
    return data[4:]


def _read_exact(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise KafkaProtocolError("connection closed mid-response")
        chunks.extend(chunk)
    return bytes(chunks)


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """The broker's supported API version ranges: {api_key: (min, max)}."""
    body = _request(host, port, API_VERSIONS, 0, b"", timeout)
    (error,) = struct.unpack_from(">h", body, 0)
    if error not in (ERROR_NONE, ERROR_UNSUPPORTED_VERSION):
        raise KafkaProtocolError(f"ApiVersions error code {error}")
    (count,) = struct.unpack_from(">i", body, 2)
    ranges = {}
    offset = 6
    for _ in range(count):
        key, low, high = struct.unpack_from(">hhh", body, offset)
        ranges[key] = (low, high)
        offset += 6
    return ranges


def _string(data: bytes, offset: int) -> tuple[str | None, int]:
    (length,) = struct.unpack_from(">h", data, offset)
    offset += 2
    if length < 0:
        return None, offset
    return data[offset : offset + length].decode(), offset + length


def brokers(host: str, port: int, timeout: float = 2.0) -> list[BrokerInfo]:
    """The live brokers this broker's metadata lists (Metadata v4, no topics)."""
    body = _request(host, port, API_METADATA, 4, struct.pack(">ib", 0, 0), timeout)
    offset = 4  # throttle_time_ms
    (count,) = struct.unpack_from(">i", body, offset)
    offset += 4
    found = []
    for _ in range(count):
        (node_id,) = struct.unpack_from(">i", body, offset)
        host_name, offset = _string(body, offset + 4)
        (broker_port,) = struct.unpack_from(">i", body, offset)
        _rack, offset = _string(body, offset + 4)
        found.append(BrokerInfo(node_id, host_name or "", broker_port))
    return found
