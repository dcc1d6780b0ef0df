"""Validity, balance and stickiness of an assignment, applied alike to Kafka's output and ours.

The rules are Kafka's own test invariants (research note, section 4.1): every partition of a
subscribed topic assigned exactly once and only to a subscriber; with identical subscriptions the
member sizes differ by at most one; otherwise Kafka's balance definition (`isBalanced`): no member
could legally take a partition from a member holding two or more partitions more than it.
Written for 1M partitions: one pass over the assignment, one over the subscriptions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

Assignment = dict[str, dict[str, list[int]]]


@dataclass
class Check:
    valid: bool  # nothing twice, nothing foreign, nothing out of range, nobody unknown
    complete: bool  # every partition of every subscribed topic assigned
    balanced: bool
    rule: str  # which balance rule applied
    assigned: int
    missing: int
    count_spread: int
    problems: list[str] = field(default_factory=list)  # the first few, for the report

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return self.valid and self.complete and self.balanced

    def summary(self) -> str:
        if self.ok:
            return "ok"
        parts = []
        if not self.valid:
            parts.append("INVALID")
        if not self.complete:
            parts.append(f"missing {self.missing}")
        if not self.balanced:
            parts.append(f"unbalanced (spread {self.count_spread})")
        return ", ".join(parts)


def _subscriptions(document: dict[str, Any]) -> dict[str, frozenset[str]]:
    topics = document["topics"]
    return {
        member: frozenset(t for t in spec["topics"] if t in topics)
        for member, spec in document["members"].items()
    }


def check(document: dict[str, Any], assignment: Assignment) -> Check:
    """Apply Kafka's validity and balance rules to `assignment` for the case `document`."""
    topics: dict[str, int] = document["topics"]
    subscriptions = _subscriptions(document)
    problems: list[str] = []

    def problem(text: str) -> None:
        if len(problems) < 5:
            problems.append(text)

    valid = True
    owner: dict[str, list[str | None]] = {}
    counts = dict.fromkeys(subscriptions, 0)
    for member, owned in assignment.items():
        if member not in subscriptions:
            valid = False
            problem(f"unknown member {member}")
            continue
        for topic, partitions in owned.items():
            if topic not in subscriptions[member]:
                valid = False
                problem(f"{member} holds {topic} without subscribing")
                continue
            table = owner.get(topic)
            if table is None:
                table = owner[topic] = [None] * topics[topic]
            for partition in partitions:
                if not 0 <= partition < len(table):
                    valid = False
                    problem(f"{topic}-{partition} does not exist")
                elif table[partition] is not None:
                    valid = False
                    problem(f"{topic}-{partition} on {table[partition]} and {member}")
                else:
                    table[partition] = member
            counts[member] += len(partitions)

    subscribed = set().union(*subscriptions.values()) if subscriptions else set()
    missing = 0
    for topic in subscribed:
        table = owner.get(topic)
        missing += topics[topic] if table is None else sum(1 for o in table if o is None)
    if missing:
        problem(f"{missing} partitions unassigned")

    active = [counts[m] for m, topics_ in subscriptions.items() if topics_]
    spread = (max(active) - min(active)) if active else 0
    identical = len(set(subscriptions.values())) <= 1
    if identical:
        rule = "sizes within one"
        balanced = spread <= 1
    else:
        rule = "Kafka isBalanced"
        balanced = _kafka_balanced(subscriptions, owner, counts, problem)
    return Check(
        valid=valid,
        complete=missing == 0,
        balanced=balanced,
        rule=rule,
        assigned=sum(counts.values()),
        missing=missing,
        count_spread=spread,
        problems=problems,
    )


def _kafka_balanced(
    subscriptions: dict[str, frozenset[str]],
    owner: dict[str, list[str | None]],
    counts: dict[str, int],
    problem: Any,
) -> bool:
    """Per topic: the fullest holder of one of its partitions may not exceed the emptiest
    subscriber by two or more, else that subscriber could take a partition (Kafka's isBalanced)."""
    least: dict[str, int] = {}
    for member, topics in subscriptions.items():
        for topic in topics:
            count = counts[member]
            if count < least.get(topic, count + 1):
                least[topic] = count
    balanced = True
    for topic, table in owner.items():
        holders = {m for m in table if m is not None}
        if not holders:
            continue
        most = max(counts[m] for m in holders)
        if most - least[topic] >= 2:
            balanced = False
            problem(f"{topic}: a holder has {most}, a subscriber only {least[topic]}")
    return balanced


def moves(previous: Assignment, assignment: Assignment) -> int:
    """Partitions whose previous owner exists and differs from the new one (revocations)."""
    before: dict[tuple[str, int], str] = {}
    for member, owned in previous.items():
        for topic, partitions in owned.items():
            for partition in partitions:
                before[(topic, partition)] = member
    moved = 0
    for member, owned in assignment.items():
        for topic, partitions in owned.items():
            for partition in partitions:
                was = before.get((topic, partition))
                if was is not None and was != member:
                    moved += 1
    return moved
