"""The canonical text of a whole group's assignment, and the plan hash made from it.

The hash names a plan everywhere it is compared: each document's `planHash`, the policy's
`status.appliedPlan` and `status.proposal.hash`, and the `spec.approvedPlan` a user copies from
it. Members without partitions are part of it (an empty member is a decision too).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping

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
