"""`roundrobin`: Kafka's RoundRobinAssignor, partition for partition.

Kafka lays out every partition of every subscribed topic (topics by name, partitions ascending),
sorts the members, and walks a circular iterator over them: each partition goes to the next member
that subscribes to its topic, and the iterator then advances past that member.

Instead of stepping partition by partition, this works a topic at a time: inside one topic the
iterator only ever stops at that topic's subscribers, in circular order starting from the first
subscriber at or after the iterator's position, so subscriber number k of that rotation gets
partitions k, k+s, k+2s, ... (s = number of subscribers). That is one range per (topic, receiving
member) instead of one step per partition, with exactly Kafka's result.
"""

from __future__ import annotations

from bisect import bisect_left

from assignors.model import Assignment, Group, Options


def assign(group: Group, options: Options) -> Assignment:
    del options  # roundrobin has no tunables
    member_ids = list(group.members)  # sorted by id
    position_of = {member_id: index for index, member_id in enumerate(member_ids)}
    result: Assignment = {member_id: {} for member_id in member_ids}
    cursor = 0  # index (in member_ids) the circular iterator points at
    for topic, subscribers in group.subscribers().items():  # topics in name order
        count = group.topics[topic]
        if count == 0:
            continue
        positions = [position_of[member_id] for member_id in subscribers]  # ascending
        size = len(positions)
        first = bisect_left(positions, cursor) % size  # first subscriber at/after the cursor
        for offset in range(min(size, count)):
            member_id = member_ids[positions[(first + offset) % size]]
            result[member_id][topic] = list(range(offset, count, size))
        last_receiver = positions[(first + count - 1) % size]
        cursor = (last_receiver + 1) % len(member_ids)
    return result
