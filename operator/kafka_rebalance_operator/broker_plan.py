"""The plan record broker mode publishes for the brokers' `kafka-rebalance-plan` assignor
(broker-plugin/, docs/kip848.md): one record per group in a compacted topic, keyed by the group
id, so the topic holds each group's latest plan.

```
{"version":1,"group":"orders","epoch":12,"planHash":"...","generatedAt":"2026-...Z",
 "members":{"orders-0":{"orders":[0,2]},"orders-1":{"orders":[1,3]}}}
```

Members are keyed by their `group.instance.id`, which broker mode's consumers set to their pod
name. The plug-in decodes it strictly (`PlanCodec.java`) and falls back to uniform-style sticky
assignment for anything it cannot follow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

VERSION = 1


def encode_plan(
    group: str,
    epoch: int,
    plan_hash: str,
    generated_at: str,
    assignment: Mapping[str, Mapping[str, list[int]]],
) -> bytes:
    members = {
        member: {topic: sorted(parts) for topic, parts in sorted(topics.items()) if parts}
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
