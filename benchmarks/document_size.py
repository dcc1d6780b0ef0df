"""Assignment document sizes and codec times for one member owning 500k partitions.

    .venv/bin/python -m benchmarks.document_size

A ConfigMap holds at most 1 MiB (1,048,576 bytes of data, keys included). Version 1 of the
document writes each partition as a JSON number; version 2 writes each topic as ranges or a
bitmap, whichever is shorter (`kafka_rebalance_common.wire.partitions`). Each row prints both
sizes, what `encode_document` picks, and the time to encode and decode version 2 relative to
encoding version 1 in the same run (the reference: what the operator paid before).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from kafka_rebalance_common import wire
from kafka_rebalance_common.wire.document import CONFIGMAP_LIMIT


def _cases() -> dict[str, wire.Partitions]:
    rng = random.Random(7)
    return {
        "1,000 topics x 500, whole topics": {
            f"topic-{i:04d}": tuple(range(500)) for i in range(1000)
        },
        "1,000 topics x 1,000, every other": {
            f"topic-{i:04d}": tuple(range(0, 1000, 2)) for i in range(1000)
        },
        "1,000 topics x 1,000, random half": {
            f"topic-{i:04d}": tuple(sorted(rng.sample(range(1000), 500))) for i in range(1000)
        },
        "1 topic x 1,000,000, every other": {"orders": tuple(range(0, 1_000_000, 2))},
        # the bound: a bitmap's length follows the highest partition number, not the pattern
        "1,000 topics x 5,000, every 10th (5M partitions in its topics)": {
            f"topic-{i:04d}": tuple(range(i % 10, 5000, 10)) for i in range(1000)
        },
    }


def _best_of(runs: int, action: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    print(f"ConfigMap data limit: {CONFIGMAP_LIMIT:,} bytes")
    print("case | owned | v1 bytes | v2 bytes | written | v2 encode, v2 decode (/ v1 encode)")
    for name, partitions in _cases().items():
        doc = wire.AssignmentDocument(
            "orders-processor", "orders-0", 12, partitions, {}, "0" * 20, "2026-11-23T22:00:00Z"
        )
        v1 = wire.encode_document(doc, version=1)
        v2 = wire.encode_document(doc, version=2)
        written = wire.encode_document(doc)
        assert wire.decode_document(v2) == doc
        reference = _best_of(3, lambda d=doc: wire.encode_document(d, version=1))
        encode = _best_of(3, lambda d=doc: wire.encode_document(d, version=2))
        decode = _best_of(3, lambda t=v2: wire.decode_document(t))
        print(
            f"{name} | {len(doc.owned()):,} | {len(v1):,} | {len(v2):,} | "
            f"v{2 if written == v2 else 1} ({len(written):,}) | "
            f"{encode * 1000:.0f} ms ({encode / reference:.2f}), "
            f"{decode * 1000:.0f} ms ({decode / reference:.2f})"
        )


if __name__ == "__main__":
    main()
