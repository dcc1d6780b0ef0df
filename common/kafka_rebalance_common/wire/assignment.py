"""The canonical text of a whole group's assignment, and the plan hash made from it.

The hash names a plan everywhere it is compared: each document's `planHash`, the policy's
`status.appliedPlan` and `status.proposal.hash`, and the `spec.approvedPlan` a user copies from
it. Members without partitions are part of it (an empty member is a decision too).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from kafka_rebalance_common.assignment import Assignment, WireAssignment
from kafka_rebalance_common.wire.errors import WireError

HASH_LENGTH = 20  # hex digits: short enough to paste into spec.approvedPlan


def encode_assignment(assignment: Mapping[str, Mapping[str, Collection[int]]]) -> str:
    """Compact JSON, members and topics in order, partitions ascending, empty topics dropped
    (`status.proposal.assignment` stores exactly this)."""
    # A list of one partition is its own canonical form: at a million partitions a plan is a
    # million such lists, and copying each (with the garbage collections a million new lists
    # set off) was 40 % of the hash's CPU. Its text is the same either way.
    canonical = {
        member: {
            t: p if type(p) is list and len(p) < 2 else sorted(p)
            for t, p in sorted(topics.items())
            if p
        }
        for member, topics in sorted(assignment.items())
    }
    return json.dumps(canonical, sort_keys=True, separators=(",", ":"))


def assignment_hash(assignment: Mapping[str, Mapping[str, Collection[int]]]) -> str:
    """The first `HASH_LENGTH` hex digits of the SHA-256 of `encode_assignment`."""
    return hashlib.sha256(encode_assignment(assignment).encode()).hexdigest()[:HASH_LENGTH]


class AssignmentError(WireError):
    """A whole assignment's text (`status.proposal.assignment`) that is not one."""


def decode_assignment(text: str | bytes) -> Assignment:
    """`encode_assignment`'s text back into an `Assignment` (partitions ascending, members and
    topics as the text orders them); AssignmentError (one line naming the field) otherwise."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise AssignmentError("input", f"not JSON ({error})") from None
    if not isinstance(raw, dict):
        raise AssignmentError("input", f"not a JSON object ({type(raw).__name__})")
    built: WireAssignment = {}
    for member, topics in raw.items():
        if not isinstance(topics, dict):
            raise AssignmentError(member, f"not an object ({type(topics).__name__})")
        built[member] = {}
        for topic, parts in topics.items():
            built[member][topic] = _partitions(parts, f"{member}.{topic}")
    return Assignment(built)


def _partitions(value: Any, where: str) -> list[int]:
    if not isinstance(value, list):
        raise AssignmentError(where, f"not a list ({type(value).__name__})")
    for index, partition in enumerate(value):
        if type(partition) is not int:
            raise AssignmentError(f"{where}[{index}]", "not an integer")
        if partition < 0:
            raise AssignmentError(f"{where}[{index}]", f"negative partition {partition}")
    parts = sorted(value)
    if len(set(parts)) != len(parts):
        raise AssignmentError(where, "a partition is listed twice")
    return parts
