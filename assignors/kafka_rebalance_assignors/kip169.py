"""KIP-169 lag-aware assignment, exactly as the KIP and its prototype describe it.

Per topic, independently: partitions in descending lag (ties: lower partition first), each to the
subscriber with the fewest partitions of that topic so far, then the lowest lag of that topic
assigned so far, then the smallest member id. Count balance always wins over lag balance, and
weights and previous ownership are ignored: that is the KIP, and the baseline `lag-aware` is
measured against.
"""

from __future__ import annotations

import heapq

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.load import partition_loads
from kafka_rebalance_assignors.model import Assignment, Options

_LAG_ONLY = Options(load_model="lag")


def assign(context: PlanContext) -> Assignment:
    # KIP-169 balances offset lag whatever the requested load model; unknown lags take the mean of
    # the known ones (see assignors.load), and with no lag at all every partition weighs the same.
    group = context.group
    if context.load_model == "lag":
        loads = context.loads
    else:
        _, loads = partition_loads(group, _LAG_ONLY)
    assignment: Assignment = {member_id: {} for member_id in group.members}
    for topic, subscribers in context.subscriber_ids().items():
        lags = loads[topic]
        order = sorted(range(group.topics[topic]), key=lags.__getitem__, reverse=True)
        # (partitions so far, lag so far, member id): the heap top is KIP-169's choice.
        heap = [(0, 0.0, member_id) for member_id in subscribers]
        heapq.heapify(heap)
        owned: dict[str, list[int]] = {member_id: [] for member_id in subscribers}
        for partition in order:
            count, lag, member_id = heap[0]
            owned[member_id].append(partition)
            heapq.heapreplace(heap, (count + 1, lag + lags[partition], member_id))
        for member_id, partitions in owned.items():
            if partitions:
                assignment[member_id][topic] = partitions
    return assignment
