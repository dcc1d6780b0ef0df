"""Kafka's large-scale sticky scenarios: 500 topics x 2,000 partitions (1,000,000) and 2,000
members, with identical subscriptions (AbstractStickyAssignorTest.
testLargeAssignmentAndGroupWithUniformSubscription) and with the last member subscribed to one
topic only, which forces the general path (testLargeAssignmentAndGroupWithNonEqualSubscription).
Both run Kafka's two rounds: a fresh assignment, then the same group reporting that assignment as
owned, except member 0 which comes back empty.

The tests assert validity, balance and stickiness, not time. Timings are printed by running this
file as a script (`.venv/bin/python tests/unit/assignors/test_scale.py [identical|general]
[plan]`), which
measures `assign()` on an already-parsed group and the whole `plan()` on the JSON document.
"""

from __future__ import annotations

import sys
import time
from itertools import repeat
from typing import Any

import pytest
from kafka_rebalance_assignors import sticky_core
from kafka_rebalance_assignors.context import prepare
from kafka_rebalance_assignors.model import Assignment, Group, Member, Options


def sticky_assignment(group: Group) -> Assignment:
    """The sticky target for `group`, with its planning context prepared as `plan` does."""
    return sticky_core.sticky_assignment(prepare(group, Options()))


TOPICS = 500
PARTITIONS = 2_000
MEMBERS = 2_000


def topic_names() -> list[str]:
    return [f"t{i:03d}" for i in range(TOPICS)]


def member_ids() -> list[str]:
    return [f"c{i:04d}" for i in range(MEMBERS)]


def subscription(index: int, general: bool) -> list[str]:
    names = topic_names()
    return names[:1] if general and index == MEMBERS - 1 else names


def first_group(general: bool) -> Group:
    names = tuple(topic_names())
    members = {
        m: Member(m, tuple(subscription(i, general)) if general else names)
        for i, m in enumerate(member_ids())
    }
    return Group(topics=dict.fromkeys(names, PARTITIONS), members=members)


def second_group(group: Group, previous: Assignment) -> Group:
    """Everyone reports what it got as owned (generation 1), except member 0."""
    members = {}
    for i, (member_id, member) in enumerate(group.members.items()):
        owned = previous.get(member_id, {}) if i else {}
        claimed = {t: tuple(sorted(ps)) for t, ps in owned.items() if ps}
        members[member_id] = Member(member_id, member.topics, 1.0, claimed, 1 if i else None)
    return Group(topics=group.topics, members=members)


def document(general: bool, previous: Assignment | None = None) -> dict[str, Any]:
    """The same scenario as a plan-contract document, for timing `plan()`."""
    members: dict[str, Any] = {}
    for i, member_id in enumerate(member_ids()):
        spec: dict[str, Any] = {"topics": subscription(i, general)}
        if previous is not None and i:
            spec["owned"] = previous.get(member_id, {})
            spec["generation"] = 1
        members[member_id] = spec
    topics = dict.fromkeys(topic_names(), PARTITIONS)
    return {"strategy": "cooperative-sticky", "topics": topics, "members": members}


def survivors_keep_everything(group: Group, before: Assignment, after: Assignment) -> None:
    for i, member_id in enumerate(group.members):
        if i == 0:
            continue
        old, new = before.get(member_id, {}), after[member_id]
        kept = map(set.issubset, map(set, old.values()), map(set, map(new.get, old, repeat(()))))
        assert all(kept), member_id


@pytest.mark.scale
@pytest.mark.parametrize("general", [False, True], ids=["identical", "general"])
def test_million_partitions_two_thousand_members(general: bool) -> None:
    from tests.assignor_checks import balance_violation, check_valid, is_fully_balanced

    group = first_group(general)
    first = sticky_assignment(group)
    check_valid(group, first)
    assert balance_violation(group, first) is None
    assert is_fully_balanced(group, first)  # possible in both shapes: 500 each

    follow = second_group(group, first)
    second = sticky_assignment(follow)
    check_valid(follow, second)
    assert balance_violation(follow, second) is None
    assert is_fully_balanced(follow, second)
    # Member 0 lost its claims; everyone else keeps all 500 and member 0 gets its old ones back.
    survivors_keep_everything(follow, first, second)


# --------------------------------------------------------------------------- timing script


def _time(label: str, action: Any) -> Any:
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:<34} wall {wall:6.2f} s   cpu {cpu:6.2f} s")
    return result


def main(argv: list[str]) -> None:
    from kafka_rebalance_assignors.parsing import plan

    shapes = [a for a in argv if a in ("identical", "general")] or ["identical", "general"]
    with_plan = "plan" in argv
    for shape in shapes:
        general = shape == "general"
        group = first_group(general)
        first = _time(f"{shape} round 1 assign()", lambda g=group: sticky_assignment(g))
        follow = second_group(group, first)
        _time(f"{shape} round 2 assign()", lambda g=follow: sticky_assignment(g))
        if with_plan:
            doc = document(general)
            result = _time(f"{shape} round 1 plan()", lambda d=doc: plan(d))
            doc = document(general, result["assignment"])
            del result
            _time(f"{shape} round 2 plan()", lambda d=doc: plan(d))


if __name__ == "__main__":
    main(sys.argv[1:])
