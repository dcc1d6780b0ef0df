"""The share planner (`kafka_rebalance_assignors.share`) at share-group sizes.

    .venv/bin/python -m benchmarks.share_planner

Kafka 4.4 caps a share group at 200 members (`group.share.max.size`). Each row plans one group
on one topic whose partitions carry exponentially distributed rates (mean 50 records/s) and a
backlog on one partition in ten, from the worst start the operator meets in practice (every
partition with one member, dealt round-robin: what `simple` gives while members do not
outnumber partitions), with no move budget. It prints the steps taken, the peak load per
capacity before and after, the time of the plan, and that time per step relative to the
smallest row's in the same run (the search is a loop of steps, each costing a pass over the
partitions plus a pass over the members' candidate moves).
"""

from __future__ import annotations

import random
import time

from kafka_rebalance_assignors.share import (
    PartitionLoad,
    ShareMemberInput,
    ShareRequest,
    plan_share,
)

ROWS = ((12, 50), (100, 50), (200, 200), (1000, 200), (2000, 200))


def request(partitions: int, members: int, seed: int = 1) -> ShareRequest:
    rnd = random.Random(seed)
    loads = {
        ("t", p): PartitionLoad(
            rnd.expovariate(1 / 50), rnd.randint(0, 100_000) if rnd.random() < 0.1 else 0
        )
        for p in range(partitions)
    }
    ids = [f"m{i}" for i in range(members)]
    current: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
    for p in range(partitions):
        current[ids[p % members]].add(("t", p))
    return ShareRequest(
        loads,
        {m: ShareMemberInput(m, frozenset({"t"})) for m in ids},
        {m: frozenset(parts) for m, parts in current.items()},
        300.0,
        None,
    )


def main() -> None:
    base: float | None = None
    print("partitions members moves peak_before peak_after seconds per_move_vs_first_row")
    for partitions, members in ROWS:
        req = request(partitions, members)
        started = time.perf_counter()
        plan = plan_share(req)
        took = time.perf_counter() - started
        per_move = took / max(1, plan.moves)
        base = base or per_move
        print(
            f"{partitions} {members} {plan.moves} {plan.peak_before:.1f} {plan.peak_after:.1f} "
            f"{took:.2f} {per_move / base:.1f}x"
        )


if __name__ == "__main__":
    main()
