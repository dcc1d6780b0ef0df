"""What the plan-following assignor puts in the group protocol's user_data fields.

Text, not a binary encoding, because the operator reads both fields back with describe_groups,
which kafka-python returns as `str` decoded with errors="backslashreplace": plain ASCII JSON
survives that unchanged. Decoding never raises: user_data comes from other members (other
versions, other assignors), and one odd member must not break the leader's assignment.

- subscription user_data: the member's claim `{"epoch":E,"partitions":{"t":[0,2]}}` (its own
  document's plan), or empty when it has no document yet;
- assignment user_data: `{"claimEpoch":C,"composedEpoch":E}`: E is the highest claim epoch the
  leader composed from (-1 when no member claimed anything), C the epoch of this member's own
  claim as the leader saw it (-1: none). C tells a member whose claim missed the round (it joined
  with the user_data of before its new document, e.g. a JoinGroup already in flight) that it
  must rejoin, even though the round was composed from its document's epoch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_sidecar.document import AssignmentDocument

NO_EPOCH = -1  # composed from no claim at all (no member had a document)


@dataclass(frozen=True)
class Claim:
    """A member's statement of what its own assignment document gives it."""

    epoch: int
    partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)


def _compact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def encode_claim(doc: AssignmentDocument | None) -> bytes:
    """The subscription user_data for a member holding `doc` (b"" when it has none)."""
    if doc is None:
        return b""
    return _compact(
        {"epoch": doc.epoch, "partitions": {t: list(p) for t, p in doc.partitions.items()}}
    )


def _text(raw: bytes | str | None) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(raw, str):
        return raw
    return None


def _object(raw: bytes | str | None) -> dict[str, Any] | None:
    text = _text(raw)
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _epoch(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def decode_claim(raw: bytes | str | None) -> Claim | None:
    """A member's claim from its subscription user_data; None for anything that is not one."""
    value = _object(raw)
    if value is None:
        return None
    epoch = _epoch(value.get("epoch"))
    partitions = value.get("partitions")
    if epoch is None or not isinstance(partitions, dict):
        return None
    result: dict[str, tuple[int, ...]] = {}
    for topic, parts in partitions.items():
        if not isinstance(parts, list) or not all(_epoch(p) is not None for p in parts):
            return None
        if parts:
            result[topic] = tuple(sorted(set(parts)))
    return Claim(epoch, dict(sorted(result.items())))


def encode_composed(epoch: int, claim_epoch: int = NO_EPOCH) -> bytes:
    """The assignment user_data: the claim epoch the leader composed this assignment from, and
    the epoch of the receiving member's own claim in that round."""
    return _compact({"claimEpoch": claim_epoch, "composedEpoch": epoch})


def _assignment_epoch(raw: bytes | str | None, name: str) -> int | None:
    """An epoch field (>= -1) of an assignment's user_data; None when absent or not ours."""
    value = _object(raw)
    epoch = value.get(name) if value is not None else None
    if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= NO_EPOCH:
        return epoch
    return None


def decode_composed(raw: bytes | str | None) -> int | None:
    """The composed epoch from an assignment's user_data (-1: composed from no claim); None
    when the user_data is not ours (another assignor, garbage)."""
    return _assignment_epoch(raw, "composedEpoch")


def decode_claim_epoch(raw: bytes | str | None) -> int | None:
    """The receiving member's claim epoch the leader saw (-1: no claim), from an assignment's
    user_data; None when absent (a leader of an older version, another assignor, garbage)."""
    return _assignment_epoch(raw, "claimEpoch")
