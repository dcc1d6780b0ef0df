"""Benchmark telemetry for `kafka-rebalance pipeline`, one file per block of whole groups.

`pipeline generate` splits its output every 250,000 rows, which cuts groups in two. The
benchmark needs inputs of 10^6, 3x10^6 and 10^7 rows that are the *same* fleet cut at group
boundaries, so that each smaller input is a prefix of the larger one: the generator is
deterministic per group index, so `part-00000.jsonl` (groups 0-99) here holds exactly the rows of
`pipeline generate --groups 100` with the same options. Pass the first N files with `-i`.

    python -m benchmarks.pipeline_data --groups 1000 --out /tmp/h6-bench/t10m
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kafka_rebalance_pipeline.generate import FleetSpec, GroupTruth, generate_group
from kafka_rebalance_pipeline.sinks import encode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--per-file", type=int, default=100, help="groups per file")
    parser.add_argument("--polls", type=int, default=480)
    parser.add_argument("--partitions", default="12-30")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--no-previous",
        action="store_true",
        help="rows without the previous row's fields (an operator from before them)",
    )
    args = parser.parse_args()
    low, _, high = args.partitions.partition("-")
    spec = FleetSpec(
        groups=args.groups,
        polls=args.polls,
        partitions=(int(low), int(high)),
        previous=not args.no_previous,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    truth: list[GroupTruth] = []
    files = []
    for first in range(0, args.groups, args.per_file):
        path = args.out / f"part-{first // args.per_file:05d}.jsonl"
        rows = 0
        with path.open("wb") as handle:
            for index in range(first, min(first + args.per_file, args.groups)):
                for row in generate_group(spec, index, truth):
                    handle.write(encode(row) + b"\n")
                    rows += 1
        files.append({"file": path.name, "groups": index + 1 - first, "rows": rows})
        print(json.dumps({**files[-1], "seconds": round(time.perf_counter() - started, 1)}))
    (args.out.parent / f"{args.out.name}-truth.json").write_text(
        json.dumps([vars(t) for t in truth]) + "\n"
    )
    summary = {"files": files, "rows": sum(f["rows"] for f in files)}
    summary["seconds"] = round(time.perf_counter() - started, 1)
    (args.out.parent / f"{args.out.name}-files.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({"rows": summary["rows"], "seconds": summary["seconds"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
