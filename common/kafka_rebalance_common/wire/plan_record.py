"""The plan record broker mode publishes for the brokers' `kafka-rebalance-plan` assignor
(broker-plugin/, docs/kip848.md): one record per group in a compacted topic, keyed by the group
id, so the topic holds each group's latest plan.

```
{"version":2,"group":"orders","incarnation":"<policy uid>","epoch":12,"planHash":"...",
 "generatedAt":"2026-...Z","memberIds":["<KIP-848 member id>",...],
 "members":{"orders-0":{"orders":"0-2,7"},"orders-1":{"orders":"bits:..."}}}
```

- A streams group's record (`kind: "streams"`, KIP-1071) is keyed the same way and has the
  same fields, its members keyed by streams member id and their inner maps by subtopology id
  (active tasks); `memberIds` are all the group's streams member ids.
- A streams record may carry `standbys`: streams member id -> subtopology id -> partitions of
  the standby tasks the plan places (members without standbys left out). Absent (records
  before planned standbys, or the group's standby count unknown), the plug-in places standbys
  itself; a plug-in that predates the field ignores it.
- A share group's record (`kind: "share"`, KIP-932, docs/share-groups.md) has the same fields,
  its members keyed by share member id and their inner maps by topic name; unlike the other
  kinds one partition may be planned for several members (a share partition is consumed by
  all of them). `memberIds` are all the group's share member ids.
- Members are keyed by their `group.instance.id`, which broker mode's consumers set to their
  pod name. Partitions are written as the assignment document's version 2 writes them
  (`kafka_rebalance_common.wire.partitions.encode_set`: ranges, or a bitmap when shorter), so
  a plan costs a few bytes per run of partitions, not per partition.
- `memberIds` are the group's KIP-848 member ids as the operator saw them: the assignor API
  gives the plug-in no group id, and instance ids are unique only within a group, so the
  plug-in follows a plan for a group only when they share a member id (client-generated UUIDs).
- `incarnation` (the policy's uid) and `epoch` order plans: within one incarnation the plug-in
  never replaces a higher epoch with a lower one.
- Each record, tombstones included, is signed: HMAC-SHA256 in the record header
  `kafka-rebalance-signature`, with a key the operator and the brokers share
  (`PlanKeys.java` checks it; the byte layout is defined there and here, and test vectors
  tie the two). A value is signed with `sign` (group, 0x01, value). A tombstone (value null)
  says which plan it retires: its headers `kafka-rebalance-incarnation` (the policy uid,
  UTF-8) and `kafka-rebalance-epoch` (the last published plan's epoch, decimal ASCII) are
  signed with the group by `sign_tombstone`, so a captured tombstone retires that
  incarnation's plans up to that epoch and nothing a later incarnation publishes.

The plug-in decodes strictly and within bounds (`PlanCodec.java`) and falls back to
uniform-style sticky assignment for anything it cannot follow.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from kafka_rebalance_common.wire import partitions as wire_partitions

VERSION = 2
KINDS = ("consumer", "streams", "share")
SIGNATURE_HEADER = "kafka-rebalance-signature"
INCARNATION_HEADER = "kafka-rebalance-incarnation"  # tombstones: the retired policy uid
EPOCH_HEADER = "kafka-rebalance-epoch"  # tombstones: the retired plan's epoch, decimal ASCII
SCHEME = "hmac-sha256:"
MIN_KEY_LENGTH = 16
_DOMAIN = b"kafka-rebalance-plan\x00"


class PlanKeyError(ValueError):
    """The plan key file cannot be used (one line naming the file and the problem)."""


def encode_plan(
    group: str,
    epoch: int,
    plan_hash: str,
    generated_at: str,
    assignment: Mapping[str, Mapping[str, Iterable[int]]],
    *,
    incarnation: str = "",
    member_ids: Iterable[str] = (),
    kind: str = "consumer",
    standbys: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
) -> bytes:
    """The record value: deterministic (sorted keys, compact separators) for the same input.

    `kind` "streams" writes a streams group's plan (docs/streams.md): `assignment` is then
    streams member id -> subtopology id -> partitions (its active tasks) and the record says
    `"kind":"streams"`; only the plug-in's task assignor follows it. `kind` "share" writes a
    share group's plan: share member id -> topic -> partitions, a partition under several
    members where the plan puts several on it; only the plug-in's share assignor follows it.
    A consumer plan carries no
    `kind` field, so its bytes are those of records written before streams groups existed.
    `standbys` (streams only) writes the planned standby tasks the same way; None writes no
    field, so such a record's bytes are those of records written before standbys were planned."""
    if kind not in KINDS:
        raise ValueError(f"plan kind: one of {', '.join(KINDS)}, got {kind!r}")
    if standbys is not None and kind != "streams":
        raise ValueError(f"plan standbys: only a streams plan has standbys, not a {kind} plan")
    members = {
        member: wire_partitions.encode_sets(wire_partitions.normalise(topics))
        for member, topics in sorted(assignment.items())
    }
    record = {
        "version": VERSION,
        "group": group,
        "incarnation": incarnation,
        "epoch": epoch,
        "planHash": plan_hash,
        "generatedAt": generated_at,
        "memberIds": sorted(set(member_ids)),
        "members": members,
    }
    if kind != "consumer":
        record["kind"] = kind
    if standbys is not None:
        placed = {m: wire_partitions.normalise(tasks) for m, tasks in sorted(standbys.items())}
        record["standbys"] = {m: wire_partitions.encode_sets(t) for m, t in placed.items() if t}
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def _framed(text: str) -> bytes:
    """`text` as UTF-8 after its length (4 bytes, big endian): no two fields run together."""
    data = text.encode()
    return len(data).to_bytes(4, "big") + data


def _signature(key: bytes, message: bytes) -> bytes:
    return (SCHEME + hmac.new(key, message, hashlib.sha256).hexdigest()).encode("ascii")


def sign(key: bytes, group: str, value: bytes) -> bytes:
    """The `kafka-rebalance-signature` header value for a plan record's value. Signed bytes:
    the domain tag, the group framed (`_framed`), 0x01, the value. Tombstones are signed by
    `sign_tombstone`: a None value is refused, so no tombstone goes out unbound to a plan."""
    if value is None:
        raise TypeError("plan_record.sign: a tombstone is signed with sign_tombstone")
    return _signature(key, _DOMAIN + _framed(group) + b"\x01" + value)


def sign_tombstone(key: bytes, group: str, incarnation: str, epoch: int) -> bytes:
    """The `kafka-rebalance-signature` header value for a tombstone that retires the plans of
    policy `incarnation` up to `epoch` (its INCARNATION_HEADER and EPOCH_HEADER). Signed
    bytes: the domain tag, the group framed, 0x00, the incarnation framed, the epoch (8 bytes,
    big endian, signed). The 0x00 after the group keeps them apart from every value's bytes."""
    message = _DOMAIN + _framed(group) + b"\x00" + _framed(incarnation)
    return _signature(key, message + epoch.to_bytes(8, "big", signed=True))


def tombstone_headers(incarnation: str, epoch: int) -> list[tuple[str, bytes]]:
    """The incarnation and epoch headers a tombstone carries (the signature is added apart)."""
    return [(INCARNATION_HEADER, incarnation.encode()), (EPOCH_HEADER, str(epoch).encode())]


def load_keys(path: str | Path) -> tuple[bytes, ...]:
    """The keys in a plan key file, in order (the first one signs): one key per line, blank
    lines and `#` lines ignored, each at least MIN_KEY_LENGTH characters. The brokers read the
    same format (`kafka.rebalance.plans.keys.file`), so one Secret can serve both."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise PlanKeyError(f"plan key file {path}: cannot read it: {error.strerror}") from None
    keys = []
    for line in text.splitlines():
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        if len(key) < MIN_KEY_LENGTH:
            raise PlanKeyError(
                f"plan key file {path}: a key is shorter than {MIN_KEY_LENGTH} characters"
            )
        keys.append(key.encode())
    if not keys:
        raise PlanKeyError(f"plan key file {path}: holds no key")
    return tuple(keys)
