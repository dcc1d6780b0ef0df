"""Kafka's own strategies on the worked examples of KIP-54 and on Kafka's assignor test cases.

Expected outputs come from the KIP-54 page / StickyAssignor javadoc (sticky), and from the
documented algorithms of RangeAssignor and RoundRobinAssignor (the scenarios of Kafka's
RangeAssignorTest and RoundRobinAssignorTest). Range and roundrobin are also compared, on random
groups, with a deliberately naive partition-by-partition transcription of Kafka's algorithm, which
guards the bulk formulation the modules use.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors.context import prepare
from kafka_rebalance_assignors.model import Assignment, Group, Options
from kafka_rebalance_assignors.parsing import parse_request, plan
from kafka_rebalance_assignors.registry import strategy_function

from tests.assignor_checks import (
    check_valid,
    is_balanced,
    is_fully_balanced,
    moves,
    sizes,
    two_cycles,
)

STICKY = ("sticky", "cooperative-sticky")


def group_of(topics: dict[str, int], members: dict[str, Any]) -> Group:
    spec = {m: (v if isinstance(v, dict) else {"topics": list(v)}) for m, v in members.items()}
    return parse_request({"topics": topics, "members": spec}).group


def run(strategy: str, group: Group) -> Assignment:
    raw = strategy_function(strategy)(prepare(group, Options()))
    check_valid(group, raw)
    return {
        m: {t: sorted(ps) for t, ps in sorted(raw.get(m, {}).items()) if ps} for m in group.members
    }


def flat(owned: dict[str, list[int]]) -> set[str]:
    return {f"{t}p{p}" for t, ps in owned.items() for p in ps}


def feed_back(group: Group, assignment: Assignment, generation: int, drop=(), add=None) -> Group:
    """The next rebalance: members report `assignment` as owned at `generation`."""
    members: dict[str, Any] = {}
    for member_id, member in group.members.items():
        if member_id in drop:
            continue
        members[member_id] = {
            "topics": list(member.topics),
            "owned": assignment.get(member_id, {}),
            "generation": generation,
        }
    members.update(add or {})
    return group_of(dict(group.topics), members)


# --------------------------------------------------------------------------- range


def test_range_one_consumer_one_topic() -> None:
    assert run("range", group_of({"t": 3}, {"c": ["t"]})) == {"c": {"t": [0, 1, 2]}}


def test_range_consumer_with_no_or_unknown_topic_gets_nothing() -> None:
    group = group_of({"t": 3}, {"c1": [], "c2": ["missing"]})
    assert run("range", group) == {"c1": {}, "c2": {}}


def test_range_only_subscribed_topics() -> None:
    group = group_of({"topic": 3, "other": 3}, {"c": ["topic"]})
    assert run("range", group) == {"c": {"topic": [0, 1, 2]}}


def test_range_two_consumers_one_partition() -> None:
    assert run("range", group_of({"t": 1}, {"c1": ["t"], "c2": ["t"]})) == {
        "c1": {"t": [0]},
        "c2": {},
    }


def test_range_multiple_consumers_mixed_topics() -> None:
    # RangeAssignorTest.testMultipleConsumersMixedTopics
    group = group_of(
        {"topic1": 3, "topic2": 2},
        {"consumer1": ["topic1"], "consumer2": ["topic1", "topic2"], "consumer3": ["topic1"]},
    )
    assert run("range", group) == {
        "consumer1": {"topic1": [0]},
        "consumer2": {"topic1": [1], "topic2": [0, 1]},
        "consumer3": {"topic1": [2]},
    }


def test_range_two_consumers_two_topics_six_partitions() -> None:
    # RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions: remainders go to the first member
    group = group_of(
        {"topic1": 3, "topic2": 3}, {"c1": ["topic1", "topic2"], "c2": ["topic1", "topic2"]}
    )
    assert run("range", group) == {
        "c1": {"topic1": [0, 1], "topic2": [0, 1]},
        "c2": {"topic1": [2], "topic2": [2]},
    }


def test_range_kip54_example_3_leaves_the_new_member_empty() -> None:
    group = group_of(
        {"t0": 2, "t1": 2}, {"C0": ["t0", "t1"], "C1": ["t0", "t1"], "C2": ["t0", "t1"]}
    )
    assert run("range", group) == {
        "C0": {"t0": [0], "t1": [0]},
        "C1": {"t0": [1], "t1": [1]},
        "C2": {},
    }


# --------------------------------------------------------------------------- roundrobin


def test_roundrobin_multiple_consumers_mixed_topics() -> None:
    # RoundRobinAssignorTest.testMultipleConsumersMixedTopics
    group = group_of(
        {"topic1": 3, "topic2": 2},
        {"consumer1": ["topic1"], "consumer2": ["topic1", "topic2"], "consumer3": ["topic1"]},
    )
    assert run("roundrobin", group) == {
        "consumer1": {"topic1": [0]},
        "consumer2": {"topic1": [1], "topic2": [0, 1]},
        "consumer3": {"topic1": [2]},
    }


def test_roundrobin_two_consumers_two_topics_six_partitions() -> None:
    # RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    group = group_of(
        {"topic1": 3, "topic2": 3}, {"c1": ["topic1", "topic2"], "c2": ["topic1", "topic2"]}
    )
    assert run("roundrobin", group) == {
        "c1": {"topic1": [0, 2], "topic2": [1]},
        "c2": {"topic1": [1], "topic2": [0, 2]},
    }


def test_roundrobin_kip54_examples() -> None:
    # The round robin outcomes KIP-54 quotes for contrast.
    members = {c: [f"t{i}" for i in range(4)] for c in ("C0", "C1", "C2")}
    group = group_of({f"t{i}": 2 for i in range(4)}, members)
    result = {m: flat(a) for m, a in run("roundrobin", group).items()}
    assert result == {
        "C0": {"t0p0", "t1p1", "t3p0"},
        "C1": {"t0p1", "t2p0", "t3p1"},
        "C2": {"t1p0", "t2p1"},
    }
    del members["C1"]
    result = {
        m: flat(a) for m, a in run("roundrobin", group_of(dict(group.topics), members)).items()
    }
    assert result == {
        "C0": {"t0p0", "t1p0", "t2p0", "t3p0"},
        "C2": {"t0p1", "t1p1", "t2p1", "t3p1"},
    }
    group = group_of(
        {"t0": 1, "t1": 2, "t2": 3}, {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    )
    result = {m: flat(a) for m, a in run("roundrobin", group).items()}
    assert result == {"C0": {"t0p0"}, "C1": {"t1p0"}, "C2": {"t1p1", "t2p0", "t2p1", "t2p2"}}


def naive_roundrobin(group: Group) -> Assignment:
    """Kafka's loop, one partition at a time, for comparison."""
    members = sorted(group.members)
    result: Assignment = {m: {} for m in members}
    position = 0
    for topic in sorted({t for m in group.members.values() for t in m.topics}):
        for p in range(group.topics[topic]):
            while topic not in group.members[members[position]].topics:
                position = (position + 1) % len(members)
            result[members[position]].setdefault(topic, []).append(p)
            position = (position + 1) % len(members)
    return result


def naive_range(group: Group) -> Assignment:
    result: Assignment = {m: {} for m in group.members}
    for topic, count in group.topics.items():
        subscribers = sorted(m for m, member in group.members.items() if topic in member.topics)
        for i, member_id in enumerate(subscribers):
            share, extra = divmod(count, len(subscribers))
            start = i * share + min(i, extra)
            length = share + (1 if i < extra else 0)
            if length:
                result[member_id][topic] = list(range(start, start + length))
    return result


@st.composite
def random_groups(draw: st.DrawFn, identical: bool | None = None) -> Group:
    topic_count = draw(st.integers(1, 5))
    topics = {f"t{i}": draw(st.integers(0, 9)) for i in range(topic_count)}
    names = list(topics)
    member_count = draw(st.integers(1, 7))
    if identical is None:
        identical = draw(st.booleans())
    common = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    members = {}
    for i in range(member_count):
        subscription = common if identical else draw(st.lists(st.sampled_from(names), unique=True))
        members[f"m{i}"] = sorted(subscription)
    return group_of(topics, members)


@settings(max_examples=60, deadline=None)
@given(random_groups())
def test_range_and_roundrobin_match_kafkas_loop(group: Group) -> None:
    assert run("range", group) == naive_range(group)
    assert run("roundrobin", group) == naive_roundrobin(group)


# --------------------------------------------------------------------------- KIP-54 examples


@pytest.mark.parametrize("strategy", STICKY)
def test_kip54_example_1(strategy: str) -> None:
    topics = {f"t{i}": 2 for i in range(4)}
    everything = [f"t{i}" for i in range(4)]
    group = group_of(topics, {c: everything for c in ("C0", "C1", "C2")})
    first = run(strategy, group)
    assert {m: flat(a) for m, a in first.items()} == {
        "C0": {"t0p0", "t1p1", "t3p0"},
        "C1": {"t0p1", "t2p0", "t3p1"},
        "C2": {"t1p0", "t2p1"},
    }
    second = run(strategy, feed_back(group, first, 1, drop={"C1"}))
    # "C0 [t0p0, t1p1, t3p0, t2p0], C2 [t1p0, t2p1, t0p1, t3p1]": all previous assignments kept
    assert {m: flat(a) for m, a in second.items()} == {
        "C0": {"t0p0", "t1p1", "t3p0", "t2p0"},
        "C2": {"t1p0", "t2p1", "t0p1", "t3p1"},
    }


@pytest.mark.parametrize("strategy", STICKY)
def test_kip54_example_2(strategy: str) -> None:
    group = group_of(
        {"t0": 1, "t1": 2, "t2": 3}, {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    )
    first = run(strategy, group)
    assert {m: flat(a) for m, a in first.items()} == {
        "C0": {"t0p0"},
        "C1": {"t1p0", "t1p1"},
        "C2": {"t2p0", "t2p1", "t2p2"},
    }
    second = run(strategy, feed_back(group, first, 1, drop={"C0"}))
    # "Sticky (preserves 5 partition assignments)"
    assert {m: flat(a) for m, a in second.items()} == {
        "C1": {"t1p0", "t1p1", "t0p0"},
        "C2": {"t2p0", "t2p1", "t2p2"},
    }


@pytest.mark.parametrize("strategy", STICKY)
def test_kip54_example_3(strategy: str) -> None:
    both = ["t0", "t1"]
    group = group_of({"t0": 2, "t1": 2}, {"C0": both, "C1": both})
    first = run(strategy, group)
    assert {m: flat(a) for m, a in first.items()} == {
        "C0": {"t0p0", "t1p0"},
        "C1": {"t0p1", "t1p1"},
    }
    second = run(strategy, feed_back(group, first, 1, add={"C2": {"topics": both}}))
    # "move one of the partitions to the new consumer ... preserving 3 partition assignments"
    assert {m: flat(a) for m, a in second.items()} == {
        "C0": {"t0p0", "t1p0"},
        "C1": {"t0p1"},
        "C2": {"t1p1"},
    }


# --------------------------------------------------------------------------- Kafka's sticky tests


@pytest.mark.parametrize("strategy", STICKY)
def test_topic_balance_after_reassignment(strategy: str) -> None:
    # AbstractStickyAssignorTest.testTopicBalanceAfterReassignment (KAFKA-16277): 2 topics x 12,
    # consumers 1 -> 2 -> 4 -> 2; every consumer holds an equal share of each topic.
    topics = {"t1": 12, "t2": 12}
    both = ["t1", "t2"]
    group = group_of(topics, {"c1": both})
    assignment = run(strategy, group)
    generation = 1
    for consumers, share in ((["c1", "c2"], 6), (["c1", "c2", "c3", "c4"], 3), (["c1", "c2"], 6)):
        members = {
            c: {"topics": both, "owned": assignment.get(c, {}), "generation": generation}
            for c in consumers
        }
        group = group_of(topics, members)
        assignment = run(strategy, group)
        generation += 1
        assert all(len(assignment[c].get(t, [])) == share for c in consumers for t in both)


@pytest.mark.parametrize("strategy", STICKY)
def test_stickiness_when_the_leader_leaves(strategy: str) -> None:
    # testStickiness: 3 partitions, 4 consumers; after one holder leaves the others keep theirs.
    members = {f"c{i}": ["t"] for i in range(1, 5)}
    group = group_of({"t": 3}, members)
    first = run(strategy, group)
    holder = next(c for c in sorted(first) if first[c])
    second = run(strategy, feed_back(group, first, 1, drop={holder}))
    for member_id, owned in first.items():
        if member_id != holder:
            assert flat(owned) <= flat(second[member_id])
    assert sum(sizes(group, second).values()) == 3


@pytest.mark.parametrize("strategy", STICKY)
def test_add_and_remove_consumer_one_topic(strategy: str) -> None:
    # testAddRemoveConsumerOneTopic: c1 alone owns all 3; c2 joins; c1 leaves.
    group = group_of({"t": 3}, {"c1": ["t"]})
    first = run(strategy, group)
    assert first == {"c1": {"t": [0, 1, 2]}}
    second = run(strategy, feed_back(group, first, 1, add={"c2": {"topics": ["t"]}}))
    assert second["c1"]["t"] == [0, 1] and second["c2"] == {"t": [2]}
    third = run(
        strategy, feed_back(group_of({"t": 3}, {"c1": ["t"], "c2": ["t"]}), second, 2, drop={"c1"})
    )
    assert third == {"c2": {"t": [0, 1, 2]}}


@pytest.mark.parametrize("strategy", STICKY)
def test_poor_round_robin_scenario_is_balanced(strategy: str) -> None:
    # testPoorRoundRobinAssignmentScenario: nested subscriptions where round robin fails
    topics = {"topic1": 2, "topic2": 1, "topic3": 2, "topic4": 1, "topic5": 2}
    members = {
        "consumer1": ["topic1", "topic2", "topic3", "topic4", "topic5"],
        "consumer2": ["topic1", "topic3", "topic5"],
        "consumer3": ["topic1", "topic3", "topic5"],
        "consumer4": ["topic1", "topic2", "topic3", "topic4", "topic5"],
    }
    group = group_of(topics, members)
    assignment = run(strategy, group)
    assert is_balanced(group, assignment)
    assert sorted(sizes(group, assignment).values()) == [2, 2, 2, 2]


@pytest.mark.parametrize("strategy", STICKY)
def test_reassignment_after_one_consumer_added(strategy: str) -> None:
    # testReassignmentAfterOneConsumerAdded: 1 topic x 20, 9 -> 10 consumers; the newcomer only
    # takes the excess, nobody else loses more than that.
    members = {f"c{i}": ["t"] for i in range(9)}
    group = group_of({"t": 20}, members)
    first = run(strategy, group)
    second = run(strategy, feed_back(group, first, 1, add={"c9": {"topics": ["t"]}}))
    assert is_fully_balanced(group_of({"t": 20}, {**members, "c9": ["t"]}), second)
    assert len(second["c9"]["t"]) == 2
    for member_id in members:
        assert flat(second[member_id]) <= flat(first[member_id])


@pytest.mark.parametrize("strategy", STICKY)
def test_reassignment_with_nested_subscriptions_after_one_leaves(strategy: str) -> None:
    # testReassignmentAfterOneConsumerLeaves, with a consumer that really leaves: topic i has i
    # partitions, consumer i subscribes to topics 1..i.
    topics = {f"t{i:02d}": i for i in range(1, 20)}
    names = list(topics)
    members = {f"c{i:02d}": names[:i] for i in range(1, 20)}
    group = group_of(topics, members)
    first = run(strategy, group)
    assert is_balanced(group, first)
    follow = feed_back(group, first, 1, drop={"c10"})
    second = run(strategy, follow)
    assert is_balanced(follow, second)
    assert two_cycles(follow, second) == []


@pytest.mark.parametrize("strategy", STICKY)
def test_move_existing_assignments(strategy: str) -> None:
    # testMoveExistingAssignments (general path): six one-partition topics
    topics = {f"topic{i}": 1 for i in range(1, 7)}
    members = {
        "consumer1": {"topics": ["topic1", "topic2"], "owned": {"topic1": [0]}, "generation": 1},
        "consumer2": {
            "topics": ["topic1", "topic2", "topic3", "topic4"],
            "owned": {"topic2": [0], "topic3": [0]},
            "generation": 1,
        },
        "consumer3": {
            "topics": ["topic2", "topic3", "topic4", "topic5", "topic6"],
            "owned": {"topic4": [0], "topic5": [0], "topic6": [0]},
            "generation": 1,
        },
    }
    group = group_of(topics, members)
    assignment = run(strategy, group)
    # Already balanced in Kafka's sense (consumer1 cannot take any of consumer3's topics), so
    # nothing moves even though the sizes are 1, 2, 3.
    assert is_balanced(group, assignment)
    assert sizes(group, assignment) == {"consumer1": 1, "consumer2": 2, "consumer3": 3}
    assert moves(group, assignment) == []


# --------------------------------------------------------------------------- KIP-341


@pytest.mark.parametrize("strategy", STICKY)
def test_highest_generation_wins_a_conflicting_claim(strategy: str) -> None:
    # testEnsurePartitionsAssignedToHighestGeneration: stale claims lose to newer ones
    topics = {"t": 6}
    members = {
        "c1": {"topics": ["t"], "owned": {"t": [0, 1]}, "generation": 3},
        "c2": {"topics": ["t"], "owned": {"t": [2, 3]}, "generation": 2},
        "c3": {"topics": ["t"], "owned": {"t": [0, 2, 4, 5]}, "generation": 1},
    }
    assignment = run(strategy, group_of(topics, members))
    assert assignment["c1"]["t"] == [0, 1]
    assert assignment["c2"]["t"] == [2, 3]
    assert assignment["c3"]["t"] == [4, 5]


@pytest.mark.parametrize("strategy", STICKY)
def test_same_generation_double_claim_is_dropped(strategy: str) -> None:
    # Two members claiming the same partition in the same generation: neither keeps it by right;
    # the partition is a fresh grant, counted as a conflict.
    topics = {"t": 3}
    members = {
        "c1": {"topics": ["t"], "owned": {"t": [0, 1]}, "generation": 5},
        "c2": {"topics": ["t"], "owned": {"t": [1, 2]}, "generation": 5},
    }
    result = plan({"strategy": strategy, "topics": topics, "members": members})
    assert result["stats"]["conflicting_claims"] == 1
    assert result["assignment"]["c1"]["t"][0] == 0 and 2 in result["assignment"]["c2"]["t"]
    assert result["stats"]["moves"] == 0  # partition 1 had no owner to move from


@pytest.mark.parametrize("strategy", STICKY)
def test_kip341_returning_member_gets_its_old_partitions_back(strategy: str) -> None:
    # The KIP-341 pull request example: A, B, C own {0,3}, {1,4}, {2,5}; A drops out and B, C take
    # {0,1,4} and {2,3,5} (generation 2); A returns claiming {0,3} from generation 1. The newer
    # claims win, and A gets back partitions it had when balance allows it.
    members = {
        "A": {"topics": ["t"], "owned": {"t": [0, 3]}, "generation": 1},
        "B": {"topics": ["t"], "owned": {"t": [0, 1, 4]}, "generation": 2},
        "C": {"topics": ["t"], "owned": {"t": [2, 3, 5]}, "generation": 2},
    }
    group = group_of({"t": 6}, members)
    assignment = run(strategy, group)
    assert assignment["A"]["t"] == [0, 3]
    assert assignment["B"]["t"] == [1, 4] and assignment["C"]["t"] == [2, 5]


def test_kip341_move_back_on_the_general_path() -> None:
    # Same story with non-identical subscriptions (C also reads another topic).
    members = {
        "A": {"topics": ["t"], "owned": {"t": [0, 3]}, "generation": 1},
        "B": {"topics": ["t"], "owned": {"t": [0, 1, 4]}, "generation": 2},
        "C": {"topics": ["t", "u"], "owned": {"t": [2, 3, 5]}, "generation": 2},
    }
    group = group_of({"t": 6, "u": 0}, members)
    assignment = run("sticky", group)
    assert is_balanced(group, assignment)
    assert set(assignment["A"]["t"]) == {0, 3}


# --------------------------------------------------------------------------- Kafka's random cases


def _after(group: Group, assignment: Assignment, subscriptions: dict[str, list[str]]) -> Group:
    members = {
        m: {"topics": topics, "owned": assignment.get(m, {}), "generation": 1}
        for m, topics in subscriptions.items()
    }
    return group_of(dict(group.topics), members)


@pytest.mark.parametrize("strategy", STICKY)
def test_non_equal_subscription_does_not_time_out(strategy: str) -> None:
    # testAssignmentAndGroupWithNonEqualSubscriptionNotTimeout (KAFKA-15106): 100 topics x 200
    # partitions, 500 consumers; every fourth reads the first half of the topics, the rest the
    # second half. Two rounds, both valid and balanced.
    names = [f"t{i:03d}" for i in range(100)]
    subscriptions = {f"c{i:03d}": names[:50] if i % 4 == 0 else names[50:] for i in range(500)}
    group = group_of(dict.fromkeys(names, 200), subscriptions)
    first = run(strategy, group)
    assert is_balanced(group, first)
    follow = _after(group, first, subscriptions)
    second = run(strategy, follow)
    assert is_balanced(follow, second)
    assert moves(follow, second) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_many_consumers_leaving_with_random_subscriptions(seed: int) -> None:
    # testLargeAssignmentWithMultipleConsumersLeavingAndRandomSubscription: 40 topics with 1-10
    # partitions, 200 consumers with random subscriptions; 50 random consumers leave.
    rng = random.Random(seed)
    names = [f"t{i:02d}" for i in range(40)]
    topics = {t: rng.randint(1, 10) for t in names}
    subscriptions = {f"c{i:03d}": sorted(rng.sample(names, rng.randint(1, 19))) for i in range(200)}
    group = group_of(topics, subscriptions)
    first = run("sticky", group)
    assert is_balanced(group, first)
    for leaver in rng.sample(sorted(subscriptions), 50):
        del subscriptions[leaver]
    follow = _after(group, first, subscriptions)
    second = run("sticky", follow)
    assert is_balanced(follow, second)
    assert two_cycles(follow, second) == []


def test_reassignment_with_random_subscription_changes() -> None:
    # testReassignmentWithRandomSubscriptionsAndChanges, 25 rounds instead of 100: 20-39
    # consumers, 10-19 topics (topic i has i+1 partitions), random re-subscriptions.
    rng = random.Random(42)
    for _ in range(25):
        names = [f"t{i:02d}" for i in range(rng.randint(10, 19))]
        topics = {t: i + 1 for i, t in enumerate(names)}
        consumers = [f"c{i:02d}" for i in range(rng.randint(20, 39))]
        subscriptions = {
            c: sorted(rng.sample(names, rng.randint(1, len(names)))) for c in consumers
        }
        group = group_of(topics, subscriptions)
        first = run("cooperative-sticky", group)
        assert is_balanced(group, first)
        changed = {c: sorted(rng.sample(names, rng.randint(1, len(names)))) for c in consumers}
        follow = _after(group, first, changed)
        second = run("cooperative-sticky", follow)
        assert is_balanced(follow, second)
        assert two_cycles(follow, second) == []


# ------------------------------------------------------------------ the checkers themselves


def test_checkers_reject_what_kafka_rejects() -> None:
    group = group_of({"t": 3, "u": 1}, {"a": ["t"], "b": ["t", "u"]})
    check_valid(group, {"a": {"t": [0, 1]}, "b": {"t": [2], "u": [0]}})
    bad = [
        ({"a": {"t": [0, 1], "u": [0]}, "b": {"t": [2]}}, "does not subscribe"),
        ({"a": {"t": [0, 1]}, "b": {"t": [1, 2], "u": [0]}}, "assigned twice"),
        ({"a": {"t": [0]}, "b": {"t": [2], "u": [0]}}, "t-1 left unassigned"),
        ({"a": {"t": [0, 1, 3]}, "b": {"t": [2], "u": [0]}}, "does not exist"),
        ({"x": {"t": [0, 1, 2]}, "b": {"u": [0]}}, "unknown member"),
    ]
    for assignment, message in bad:
        with pytest.raises(AssertionError, match=message):
            check_valid(group, assignment)


def test_balance_checker_follows_kafkas_definition() -> None:
    # c has 2 fewer than a and reads a's topic: unbalanced. d has 3 fewer than a but cannot read
    # t: that alone is fine (testMoveExistingAssignments' situation).
    group = group_of({"t": 5, "v": 1}, {"a": ["t"], "c": ["t"], "d": ["v"]})
    assert not is_balanced(group, {"a": {"t": [0, 1, 2, 3]}, "c": {"t": [4]}, "d": {"v": [0]}})
    assert is_balanced(group, {"a": {"t": [0, 1, 2]}, "c": {"t": [3, 4]}, "d": {"v": [0]}})
    assert not is_fully_balanced(group, {"a": {"t": [0, 1, 2]}, "c": {"t": [3, 4]}, "d": {}})
    trades = {"a": {"t": [1, 2]}, "c": {"t": [0, 3, 4]}}
    claims = {
        "a": {"topics": ["t"], "owned": {"t": [0, 1]}, "generation": 1},
        "c": {"topics": ["t"], "owned": {"t": [2, 3, 4]}, "generation": 1},
    }
    assert two_cycles(group_of({"t": 5}, claims), trades) == [("t", "a", "c")]
