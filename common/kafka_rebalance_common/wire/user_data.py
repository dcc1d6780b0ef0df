"""What the plan-following assignor (`kafka-rebalance-plan`) puts in the group protocol's
user_data fields. The sidecar writes and reads them; the operator names the assignor when it checks
that a group can follow the plan.

Text, not a binary encoding, because the operator reads both fields back with describe_groups,
which kafka-python returns as `str` decoded with errors="backslashreplace": plain ASCII JSON
survives that unchanged.

- subscription user_data: the member's claim `{"epoch":E,"partitions":{"t":[0,2]},"policy":U}`
  (its own document's plan; `policy` is the document's `policyUid`, the policy incarnation the
  epoch counts in, left out when the document names none), or empty when it has no document yet.
  A claim without `policy` (a member of an older version, or a document that names no
  incarnation) parses as `policy` "" ("not said"); readers of an older version ignore the key;
- assignment user_data: `{"claimEpoch":C,"composedEpoch":E}`: E is the highest claim epoch the
  leader composed from (-1 when no member claimed anything), C the epoch of this member's own
  claim as the leader saw it (-1: none). C tells a member whose claim missed the round (it joined
  with the user_data of before its new document, e.g. a JoinGroup already in flight) that it
  must rejoin, even though the round was composed from its document's epoch. A leader of an
  older version writes no C.

`parse_*` raise UserDataError naming the field; `decode_*` never raise and return None instead,
for the assignor: user_data comes from other members (other versions, other assignors), and one
odd member must not break the leader's assignment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_common.wire.document import AssignmentDocument
from kafka_rebalance_common.wire.errors import UserDataError
from kafka_rebalance_common.wire.partitions import Partitions

ASSIGNOR_NAME = "kafka-rebalance-plan"  # the protocol name members join with
NO_EPOCH = -1  # composed from no claim at all (no member had a document)


@dataclass(frozen=True)
class Claim:
    """A member's statement of what its own assignment document gives it. `policy` is the
    incarnation (policy uid) its epoch counts in; "" when the claim does not say."""

    epoch: int
    partitions: Partitions = field(default_factory=dict)
    policy: str = ""


@dataclass(frozen=True)
class Composed:
    """What the leader says about one member's assignment: the claim epoch it composed the round
    from, and the epoch of that member's own claim (None: the leader did not say)."""

    composed_epoch: int
    claim_epoch: int | None = None


def _compact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def encode_claim(doc: AssignmentDocument | None) -> bytes:
    """The subscription user_data for a member holding `doc` (b"" when it has none); it names
    the document's incarnation when the document does."""
    if doc is None:
        return b""
    claim: dict[str, Any] = {
        "epoch": doc.epoch,
        "partitions": {t: list(p) for t, p in doc.partitions.items()},
    }
    if doc.policy_uid:
        claim["policy"] = doc.policy_uid
    return _compact(claim)


def _object(raw: bytes | str | None) -> dict[str, Any]:
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as error:
            raise UserDataError("input", f"not UTF-8 ({error.reason})") from None
    elif isinstance(raw, str):
        text = raw
    elif raw is None:
        raise UserDataError("input", "absent")
    else:
        raise UserDataError("input", f"not bytes or text ({type(raw).__name__})")
    if not text:
        raise UserDataError("input", "empty")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise UserDataError("input", f"not JSON ({error})") from None
    if not isinstance(value, dict):
        raise UserDataError("input", f"not a JSON object ({type(value).__name__})")
    return value


def _epoch(value: Any, name: str, *, lowest: int) -> int:
    if value is None:
        raise UserDataError(name, "missing")
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserDataError(name, "not an integer")
    if value < lowest:
        raise UserDataError(name, f"below {lowest} ({value})")
    return value


def parse_claim(raw: bytes | str | None) -> Claim:
    """A member's claim from its subscription user_data."""
    value = _object(raw)
    epoch = _epoch(value.get("epoch"), "epoch", lowest=0)
    partitions = value.get("partitions")
    if not isinstance(partitions, dict):
        raise UserDataError("partitions", "missing" if partitions is None else "not an object")
    result: Partitions = {}
    for topic in sorted(partitions):
        parts = partitions[topic]
        if not isinstance(parts, list):
            raise UserDataError(f"partitions.{topic}", "not a list")
        for index, p in enumerate(parts):
            _epoch(p, f"partitions.{topic}[{index}]", lowest=0)
        if parts:
            result[topic] = tuple(sorted(set(parts)))
    policy = value.get("policy", "")
    if not isinstance(policy, str):
        raise UserDataError("policy", f"not a string ({type(policy).__name__})")
    return Claim(epoch, result, policy)


def decode_claim(raw: bytes | str | None) -> Claim | None:
    """`parse_claim`, or None for anything that is not a claim."""
    try:
        return parse_claim(raw)
    except UserDataError:
        return None


def encode_composed(epoch: int, claim_epoch: int = NO_EPOCH) -> bytes:
    """The assignment user_data: the claim epoch the leader composed this assignment from, and
    the epoch of the receiving member's own claim in that round."""
    return _compact({"claimEpoch": claim_epoch, "composedEpoch": epoch})


def parse_composed(raw: bytes | str | None) -> Composed:
    """An assignment's user_data; `claim_epoch` None when an older leader did not write it."""
    value = _object(raw)
    composed = _epoch(value.get("composedEpoch"), "composedEpoch", lowest=NO_EPOCH)
    claim = value.get("claimEpoch")
    return Composed(
        composed, None if claim is None else _epoch(claim, "claimEpoch", lowest=NO_EPOCH)
    )


def _assignment_epoch(raw: bytes | str | None, name: str) -> int | None:
    """One epoch field (>= -1) of an assignment's user_data; None when absent or not ours. The
    fields are read independently: each answers its own question."""
    try:
        return _epoch(_object(raw).get(name), name, lowest=NO_EPOCH)
    except UserDataError:
        return None


def decode_composed(raw: bytes | str | None) -> int | None:
    """The composed epoch from an assignment's user_data (-1: composed from no claim); None
    when the user_data is not ours (another assignor, garbage)."""
    return _assignment_epoch(raw, "composedEpoch")


def decode_claim_epoch(raw: bytes | str | None) -> int | None:
    """The receiving member's claim epoch the leader saw (-1: no claim), from an assignment's
    user_data; None when absent (a leader of an older version, another assignor, garbage)."""
    return _assignment_epoch(raw, "claimEpoch")
