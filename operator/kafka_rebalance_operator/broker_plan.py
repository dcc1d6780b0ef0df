"""The plan record broker mode publishes for the brokers' `kafka-rebalance-plan` assignor
(broker-plugin/, docs/kip848.md): one record per group in a compacted topic, keyed by the group
id, so the topic holds each group's latest plan.

```
{"version":2,"group":"orders","epoch":12,"planHash":"...","generatedAt":"2026-...Z",
 "members":{"orders-0":{"orders":"0-2,7"},"orders-1":{"orders":"bits:..."}}}
```

Members are keyed by their `group.instance.id`, which broker mode's consumers set to their pod
name. Partitions are written as the assignment document's version 2 writes them
(`kafka_rebalance_common.wire.partitions.encode_set`: ranges, or a bitmap when shorter), so a
plan costs a few bytes per run of partitions, not per partition. The plug-in decodes strictly
and within bounds (`PlanCodec.java`) and falls back to uniform-style sticky assignment for
anything it cannot follow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from kafka_rebalance_common.wire import partitions as wire_partitions

VERSION = 2


def encode_plan(
    group: str,
    epoch: int,
    plan_hash: str,
    generated_at: str,
    assignment: Mapping[str, Mapping[str, Iterable[int]]],
) -> bytes:
    """The record value: deterministic (sorted keys, compact separators) for the same input."""
    members = {
        member: wire_partitions.encode_sets(wire_partitions.normalise(topics))
        for member, topics in sorted(assignment.items())
    }
    record = {
        "version": VERSION,
        "group": group,
        "epoch": epoch,
        "planHash": plan_hash,
        "generatedAt": generated_at,
        "members": members,
    }
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
