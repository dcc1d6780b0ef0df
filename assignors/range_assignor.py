"""`range`: Kafka's client RangeAssignor (without racks), partition for partition.

Kafka assigns each topic on its own: the topic's subscribers sorted by member id, each gets
floor(n/c) consecutive partitions and the first n mod c subscribers one more. Nothing carries over
between topics, so with many topics the first members collect the remainders of every topic;
that skew is Kafka's, kept on purpose so the plan matches what a real group would get.

Ordering caveat: Python compares member ids by code point, Java by UTF-16 code unit; the two only
disagree for ids containing characters outside the Basic Multilingual Plane. Kafka sorts static
members by `group.instance.id`; the plan contract has no instance ids, so member id order is used.
"""

from __future__ import annotations

from assignors.model import Assignment, Group, Options


def assign(group: Group, options: Options) -> Assignment:
    del options  # range has no tunables
    result: Assignment = {member_id: {} for member_id in group.members}
    # Group.members is sorted by id, so subscribers() lists each topic's members in id order.
    for topic, subscribers in group.subscribers().items():
        count = group.topics[topic]
        if count == 0:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member_id in enumerate(subscribers):
            length = share + (1 if index < extra else 0)
            if length == 0:
                break  # later subscribers get nothing either
            result[member_id][topic] = list(range(start, start + length))
            start += length
    return result
