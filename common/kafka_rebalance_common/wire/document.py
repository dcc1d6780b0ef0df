"""The assignment document (`assignment.json` in ConfigMap `<policy>.<pod>`): the operator
encodes it, the sidecar decodes it, and both use this module.

```
{"epoch":12,"generatedAt":"...","group":"orders-processor","member":"orders-0",
 "partitions":{"orders":[0,2]},"planHash":"...","revoking":{}}                       version 1
{"epoch":12,...,"partitions":{"orders":"0-99,150"},...,"version":2}                   version 2
```

Both versions may carry `policyUid`, the uid of the policy that wrote the document. Epochs count
within one incarnation of a policy: a policy deleted and created again starts a new one, and a
reader compares epochs only between documents of the same incarnation. A document without it
comes from an operator that did not write it; readers ignore keys they do not know, so adding it
changes nothing for them.

Both versions may also carry `leaderTerm`, the `leaseTransitions` of the Lease the writing
operator held (only operators run with leader election write it). It fences a deposed leader: a
reader that holds a document of epoch E and term T refuses another document of epoch E from a
term below T, and takes one from a term above T in its place (the new leader re-wrote that
epoch). Terms are compared only at equal epochs: a Lease deleted and created again restarts its
count at 0, and a later epoch from such a leader must still be followed. A document without the
key is byte for byte what an operator without leader election wrote before it existed.

Version 1 has no `version` key. Version 2 differs only in how partitions are written (one string
per topic, `wire.partitions`), which keeps a member owning 500k partitions far below the 1 MiB a
ConfigMap may hold. A version-1 reader (which ignores the `version` key) refuses a version-2
document because its partitions are not lists, and keeps its last good document; it never
misreads one (a document with no partitions at all means the same in both versions).

`encode_document` writes version 1 whenever the API server accepts it (`V1_MAX_BYTES`), and
version 2 only for documents version 1 cannot carry: those ConfigMaps could not be written at all
before, so no document a previous sidecar could read is ever written in a form it cannot.

Decoding is strict and names the field (`DocumentError`): the document is acted on, so a wrong
field is refused rather than guessed. It does not judge whether the document is meant for its
reader (group, member, epoch order): that is the sidecar's tracker's job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_common.assignment import MemberPartitions
from kafka_rebalance_common.wire import partitions as codec
from kafka_rebalance_common.wire.errors import DocumentError

VERSIONS = (1, 2)  # what this module reads
DATA_KEY = "assignment.json"  # the ConfigMap data key holding the document
CONFIGMAP_LIMIT = 1_048_576  # the API server's limit on a ConfigMap's data values, in bytes
V1_MAX_BYTES = CONFIGMAP_LIMIT  # the longest version-1 text the API server takes (one data key)


@dataclass(frozen=True)
class AssignmentDocument:
    """What the operator tells one member: its partitions at an epoch, and (assign mode's first
    hand-over step) the partitions it must give up. `generated_at` is when it was written; it is
    not part of the plan, so two documents that differ only there are equal.

    The operator builds and holds its documents as this type too (with its compact, read-only
    `MemberPartitions`); `decode_document` gives each topic's partitions as an ascending tuple.
    Two documents compare their partitions as mappings, so hold them in one form per side."""

    group: str
    member: str
    epoch: int
    partitions: MemberPartitions = field(default_factory=dict)
    revoking: MemberPartitions = field(default_factory=dict)
    plan_hash: str = ""
    generated_at: str = field(default="", compare=False)
    # which incarnation of the policy wrote it ("" = not said); not part of the plan either:
    # readers compare it on its own (`same_incarnation`)
    policy_uid: str = field(default="", compare=False)
    # the leadership term (Lease transitions) of the operator that wrote it (None = not said);
    # not part of the plan: readers compare it only between documents of one epoch
    leader_term: int | None = field(default=None, compare=False)

    def owned(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this member should consume."""
        return frozenset((t, p) for t, parts in self.partitions.items() for p in parts)

    def revoking_set(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this member must stop consuming and acknowledge."""
        return frozenset((t, p) for t, parts in self.revoking.items() for p in parts)

    def same_incarnation(self, other: AssignmentDocument) -> bool:
        """Written by the same incarnation of the policy, as far as both say: epochs of the
        two are comparable. A document that does not say is taken as the same (an operator
        from before `policyUid` writing for a policy that still exists)."""
        return not self.policy_uid or not other.policy_uid or self.policy_uid == other.policy_uid

    def term_order(self, other: AssignmentDocument) -> int:
        """-1, 0 or 1 as this document's leadership term is below, equal to or above `other`'s;
        0 when either does not say (nothing to compare)."""
        if self.leader_term is None or other.leader_term is None:
            return 0
        return (self.leader_term > other.leader_term) - (self.leader_term < other.leader_term)


def _text(document: AssignmentDocument, version: int) -> str:
    if version == 1:
        encode: Any = codec.encode_lists
    elif version == 2:
        encode = codec.encode_sets
    else:
        raise ValueError(f"version: {version} is not one of {VERSIONS}")
    raw: dict[str, Any] = {
        "group": document.group,
        "member": document.member,
        "epoch": document.epoch,
        "partitions": encode(codec.normalise(document.partitions)),
        "revoking": encode(codec.normalise(document.revoking)),
        "planHash": document.plan_hash,
        "generatedAt": document.generated_at,
    }
    if document.policy_uid:
        raw["policyUid"] = document.policy_uid
    if document.leader_term is not None:
        raw["leaderTerm"] = document.leader_term
    if version > 1:
        raw["version"] = version
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


def encode_document(document: AssignmentDocument, version: int | None = None) -> str:
    """The `assignment.json` text: compact JSON, keys sorted, partitions ascending. `version`
    None picks version 1 while it fits in `V1_MAX_BYTES` (ASCII: characters are bytes), else 2."""
    if version is not None:
        return _text(document, version)
    text = _text(document, 1)
    return text if len(text) <= V1_MAX_BYTES else _text(document, 2)


def _string(raw: Mapping[str, Any], name: str, *, required: bool) -> str:
    if name not in raw:
        if required:
            raise DocumentError(name, "missing")
        return ""
    value = raw[name]
    if not isinstance(value, str):
        raise DocumentError(name, f"not a string ({type(value).__name__})")
    return value


def _version(raw: Mapping[str, Any]) -> int:
    version = raw.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise DocumentError("version", f"not an integer ({type(version).__name__})")
    if version not in VERSIONS:
        raise DocumentError(
            "version",
            f"{version} is not one this reader knows ({', '.join(map(str, VERSIONS))}); "
            "a newer operator wrote it: upgrade this reader",
        )
    return version


def decode_document(text: str | bytes) -> AssignmentDocument:
    """An `assignment.json` of any known version back into a document; DocumentError (one line,
    naming the field) when it is not a usable one."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DocumentError("input", f"not UTF-8 ({error.reason})") from None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise DocumentError("input", f"not JSON ({error})") from None
    if not isinstance(raw, dict):
        raise DocumentError("input", f"not a JSON object ({type(raw).__name__})")
    version = _version(raw)
    group = _string(raw, "group", required=True)
    member = _string(raw, "member", required=True)
    if "epoch" not in raw:
        raise DocumentError("epoch", "missing")
    epoch = raw["epoch"]
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise DocumentError("epoch", "not an integer")
    if epoch < 0:
        raise DocumentError("epoch", f"negative ({epoch})")
    decode = codec.decode_lists if version == 1 else codec.decode_sets
    if "partitions" not in raw:
        raise DocumentError("partitions", "missing")
    partitions = decode(raw["partitions"], "partitions")
    revoking = decode(raw["revoking"], "revoking") if "revoking" in raw else {}
    for topic, parts in revoking.items():
        both = set(parts).intersection(partitions.get(topic, ()))
        if both:
            raise DocumentError(f"revoking.{topic}", f"partition {min(both)} is also in partitions")
    term = raw.get("leaderTerm")
    if term is not None and (not isinstance(term, int) or isinstance(term, bool) or term < 0):
        raise DocumentError("leaderTerm", f"not a non-negative integer ({term!r})")
    return AssignmentDocument(
        group=group,
        member=member,
        epoch=epoch,
        partitions=partitions,
        revoking=revoking,
        plan_hash=_string(raw, "planHash", required=False),
        generated_at=_string(raw, "generatedAt", required=False),
        policy_uid=_string(raw, "policyUid", required=False),
        leader_term=term,
    )
