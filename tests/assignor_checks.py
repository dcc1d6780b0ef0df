"""Checkers for assignments, written from Kafka's definitions, for tests and benchmarks to share.

API (all take the `Group` the assignment was planned for and an `Assignment`; members missing
from the assignment count as holding nothing, partition lists may be in any order):

* `check_valid(group, assignment)`: raises AssertionError naming the first problem: an unknown
  member, a topic the member does not subscribe to, a partition that does not exist, a partition
  assigned twice, or a subscribed partition left unassigned (Kafka assigns every partition of every
  subscribed topic).
* `sizes(group, assignment)`: member id -> number of partitions.
* `is_fully_balanced(group, assignment)`: every member's count within one of every other's
  (Kafka's `isFullyBalanced`; what identical subscriptions must give).
* `is_balanced(group, assignment)` / `balance_violation(...)`: Kafka's balance definition
  (StickyAssignor javadoc, `verifyValidityAndBalance`): no member with two or more fewer
  partitions than another may subscribe to a topic the other holds. Computed per topic as
  max(count of holders) - min(count of subscribers) <= 1, so it is linear in the assignment.
* `previous_owners(group)`: topic -> {partition: owner} after the KIP-341 generation rule.
* `moves(group, assignment)`: (topic, partition, from, to) for partitions whose resolved previous
  owner differs from the new one (grants of unowned partitions are not moves).
* `two_cycles(group, assignment)`: per topic, pairs of members that traded partitions both ways
  (A->B and B->A), which Kafka's `isSticky` forbids.
"""

from __future__ import annotations

from itertools import chain

from kafka_rebalance_assignors.model import Assignment, Group
from kafka_rebalance_assignors.ownership import resolve_ownership


def check_valid(group: Group, assignment: Assignment) -> None:
    per_topic: dict[str, list[list[int]]] = {}
    for member_id, owned in assignment.items():
        member = group.members.get(member_id)
        assert member is not None, f"assignment names unknown member {member_id!r}"
        subscribed = set(member.topics)
        for topic, partitions in owned.items():
            if not partitions:
                continue
            assert topic in subscribed, f"{member_id} got {topic}, which it does not subscribe to"
            per_topic.setdefault(topic, []).append(partitions)
    for topic, lists in per_topic.items():  # set arithmetic per topic; details only on failure
        every = list(chain.from_iterable(lists))
        count = group.topics[topic]
        assert min(every) >= 0 and max(every) < count, f"a partition of {topic} does not exist"
        if len(set(every)) != len(every):
            seen: set[int] = set()
            for p in every:
                assert p not in seen, f"{topic}-{p} assigned twice"
                seen.add(p)
    wanted = {t for member in group.members.values() for t in member.topics}
    for topic in wanted:
        assigned = set(chain.from_iterable(per_topic.get(topic, [])))
        if len(assigned) != group.topics[topic]:
            missing = min(set(range(group.topics[topic])) - assigned)
            raise AssertionError(f"{topic}-{missing} left unassigned")


def sizes(group: Group, assignment: Assignment) -> dict[str, int]:
    return {
        member_id: sum(map(len, assignment.get(member_id, {}).values()))
        for member_id in group.members
    }


def is_fully_balanced(group: Group, assignment: Assignment) -> bool:
    counts = sizes(group, assignment).values()
    return not counts or max(counts) - min(counts) <= 1


def balance_violation(group: Group, assignment: Assignment) -> tuple[str, str, str] | None:
    """(topic, bigger member, smaller member) breaking Kafka's balance rule, or None."""
    counts = sizes(group, assignment)
    subscribers: dict[str, list[str]] = {}
    for member_id, member in group.members.items():
        for topic in member.topics:
            subscribers.setdefault(topic, []).append(member_id)
    holders: dict[str, list[str]] = {}
    for member_id, owned in assignment.items():
        for topic, partitions in owned.items():
            if partitions:
                holders.setdefault(topic, []).append(member_id)
    for topic, held_by in holders.items():
        biggest = max(held_by, key=counts.__getitem__)
        smallest = min(subscribers.get(topic, [biggest]), key=counts.__getitem__)
        if counts[biggest] - counts[smallest] >= 2:
            return topic, biggest, smallest
    return None


def is_balanced(group: Group, assignment: Assignment) -> bool:
    return balance_violation(group, assignment) is None


def previous_owners(group: Group) -> dict[str, dict[int, str]]:
    resolved, _ = resolve_ownership(group)
    owners: dict[str, dict[int, str]] = {}
    for member_id, owned in resolved.items():
        for topic, partitions in owned.items():
            table = owners.setdefault(topic, {})
            for p in partitions:
                table[p] = member_id
    return owners


def moves(group: Group, assignment: Assignment) -> list[tuple[str, int, str, str]]:
    before = previous_owners(group)
    result = []
    for member_id, owned in assignment.items():
        for topic, partitions in owned.items():
            table = before.get(topic)
            if not table:
                continue
            for p in partitions:
                old = table.get(p)
                if old is not None and old != member_id:
                    result.append((topic, p, old, member_id))
    return sorted(result)


def two_cycles(group: Group, assignment: Assignment) -> list[tuple[str, str, str]]:
    directed = {(topic, old, new) for topic, _, old, new in moves(group, assignment)}
    return sorted((t, a, b) for t, a, b in directed if a < b and (t, b, a) in directed)
