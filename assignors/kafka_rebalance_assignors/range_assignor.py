"""`range`: Kafka's client RangeAssignor (without racks), partition for partition.

Kafka assigns each topic on its own: the topic's subscribers sorted by member id, each gets
floor(n/c) consecutive partitions and the first n mod c subscribers one more. Nothing carries over
between topics, so with many topics the first members collect the remainders of every topic;
that skew is Kafka's, kept on purpose so the plan matches what a real group would get.

Each topic costs a few C-level `map`/`accumulate` passes over its subscribers (no Python step
per member), so a million partitions over 2,000 members take about a second.

Ordering caveat: Python compares member ids by code point, Java by UTF-16 code unit; the two only
disagree for ids containing characters outside the Basic Multilingual Plane. Kafka sorts static
members by `group.instance.id`; the plan contract has no instance ids, so member id order is used.
"""

from __future__ import annotations

from collections import deque
from itertools import accumulate, chain, repeat

from kafka_rebalance_assignors.collector import collector_paused
from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment


def assign(context: PlanContext) -> Assignment:
    group = context.group  # range has no tunables: only the group matters
    member_ids = list(group.members)  # sorted by id
    results: list[dict[str, list[int]]] = [{} for _ in member_ids]
    with collector_paused():
        for topic, subscribers in context.subscribers.items():  # indexes in id order
            count = group.topics[topic]
            if count == 0:
                continue
            share, extra = divmod(count, len(subscribers))
            receivers = len(subscribers) if share else extra
            lengths = [share + 1] * extra + [share] * (receivers - extra)
            if share + (1 if extra else 0) == 1:  # one partition each: skip range objects
                pieces = map(list, zip(range(receivers)))
            else:
                ends = list(accumulate(lengths))
                pieces = map(list, map(range, chain((0,), ends), ends))
            targets = map(results.__getitem__, subscribers[:receivers])
            deque(map(dict.__setitem__, targets, repeat(topic), pieces), maxlen=0)
    return dict(zip(member_ids, results, strict=True))
