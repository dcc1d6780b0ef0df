"""Broker-mode plan record sizes at 100k and 500k partitions.

    .venv/bin/python -m benchmarks.plan_record_size

The operator writes one record per group to the plan topic (`plan_record.encode_plan`); Kafka's
default `max.message.bytes` is 1,048,588 bytes and applies to the record batch as written, that
is after the producer's compression (the operator's plan producer uses gzip). Each row prints the
record as the previous release wrote it (a JSON list of numbers per topic: version 1), as it is
written now (ranges, or a bitmap where shorter: version 2), and version 2 after gzip, plus the
time to encode version 2 relative to encoding version 1 in the same run.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from collections.abc import Callable
from typing import Any

from kafka_rebalance_common.wire import plan_record

Assignment = dict[str, dict[str, list[int]]]
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def _v1(group: str, assignment: Assignment) -> bytes:
    """The record as the previous release wrote it (partition lists), for comparison."""
    record = {
        "version": 1,
        "group": group,
        "epoch": 12,
        "planHash": "0" * 16,
        "generatedAt": "2026-11-26T12:00:00Z",
        "members": {
            m: {t: sorted(p) for t, p in topics.items()} for m, topics in assignment.items()
        },
    }
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def _v2(group: str, assignment: Assignment, member_ids: list[str]) -> bytes:
    return plan_record.encode_plan(
        group,
        12,
        "0" * 16,
        "2026-11-26T12:00:00Z",
        assignment,
        incarnation="5b0c2f8e-1a2b-4c3d-8e9f-0123456789ab",
        member_ids=member_ids,
    )


def _cases(total: int) -> dict[str, Assignment]:
    rng = random.Random(total)
    members = [f"consumer-{i}" for i in range(100)]
    per = total // len(members)
    blocks = {m: {"orders": list(range(i * per, (i + 1) * per))} for i, m in enumerate(members)}
    round_robin = {
        m: {"orders": list(range(i, total, len(members)))} for i, m in enumerate(members)
    }
    scattered: Assignment = {m: {"orders": []} for m in members}
    for p in range(total):  # what a lag-aware plan looks like: each partition to any member
        scattered[rng.choice(members)]["orders"].append(p)
    topics = total // 100
    many: Assignment = {m: {} for m in members}
    for t in range(topics):
        for p in range(100):
            many[rng.choice(members)].setdefault(f"topic-{t:05d}", []).append(p)
    return {
        "100 members, 1 topic, contiguous blocks (range)": blocks,
        "100 members, 1 topic, round-robin": round_robin,
        "100 members, 1 topic, random (lag-aware-like)": scattered,
        f"100 members, {topics:,} topics x 100, random": many,
    }


def _best_of(runs: int, action: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    print(f"Kafka's default max.message.bytes: {KAFKA_DEFAULT_MAX_MESSAGE_BYTES:,}")
    print("partitions | case | v1 bytes | v2 bytes | v2 gzip bytes | v2 encode ms (/ v1)")
    for total in (100_000, 500_000):
        for name, assignment in _cases(total).items():
            ids = [f"{i:032x}" for i in range(len(assignment))]
            v1 = _v1("orders", assignment)
            v2 = _v2("orders", assignment, ids)
            packed = gzip.compress(v2)
            reference = _best_of(2, lambda a=assignment: _v1("orders", a))
            encode = _best_of(2, lambda a=assignment, i=ids: _v2("orders", a, i))
            print(
                f"{total:,} | {name} | {len(v1):,} | {len(v2):,} | {len(packed):,} | "
                f"{encode * 1000:.0f} ({encode / reference:.2f})"
            )


if __name__ == "__main__":
    main()
