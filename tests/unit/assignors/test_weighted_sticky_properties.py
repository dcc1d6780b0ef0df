"""`weighted-sticky`'s invariant (see its module docstring) as properties over random groups.

Shares, exactly (Fractions): member m's share of topic t is n_t * w_m / (sum of the weights of
t's subscribers), 0 when m does not subscribe to t; its total share T(m) is the sum over topics.
"Within one" means strictly: a count is the floor or the ceiling of its share (an integer share
must be met exactly).

Generated groups: up to 6 topics of 0..9 partitions, up to 6 members (and, for the bounds, up to
40 topics of 0..3 partitions over up to 12 members), identical or mixed subscriptions, equal or
unequal weights, and no, random (stale, conflicting, with generations) or complete previous
ownership.

Each property runs 150 examples by default;
`WEIGHTED_EXAMPLES=3000 .venv/bin/python -m pytest
tests/unit/assignors/test_weighted_sticky_properties.py`
searches harder.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors import parse_request, plan
from kafka_rebalance_assignors.ownership import resolve_ownership

from tests.assignor_checks import check_valid

EXAMPLES = settings(
    max_examples=int(os.environ.get("WEIGHTED_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
WEIGHTS = (0.5, 1.0, 2.0, 3.0, 4.0)


@st.composite
def groups(
    draw: st.DrawFn,
    equal: bool | None = None,
    ownership: str | None = None,
    max_topics: int = 6,
    max_partitions: int = 9,
    max_members: int = 6,
) -> dict:
    topics = {
        f"t{i:02d}": draw(st.integers(0, max_partitions))
        for i in range(draw(st.integers(1, max_topics)))
    }
    names = list(topics)
    member_ids = [f"m{i:02d}" for i in range(draw(st.integers(1, max_members)))]
    if equal is None:
        equal = draw(st.booleans())
    identical = draw(st.booleans())
    members: dict[str, dict[str, Any]] = {}
    for member_id in member_ids:
        subscription = names if identical else draw(st.lists(st.sampled_from(names), unique=True))
        members[member_id] = {"topics": list(subscription)}
        if not equal:
            members[member_id]["weight"] = draw(st.sampled_from(WEIGHTS))
    if ownership is None:
        ownership = draw(st.sampled_from(["none", "random", "complete"]))
    if ownership == "random":
        for member_id in member_ids:
            if draw(st.booleans()):
                owned = {}
                for name in draw(st.lists(st.sampled_from([*names, "gone"]), unique=True)):
                    owned[name] = draw(st.lists(st.integers(0, 10), max_size=5))
                members[member_id]["owned"] = owned
                members[member_id]["generation"] = draw(st.integers(0, 2))
    elif ownership == "complete":
        # every partition owned by one member (subscribed or not: subscriptions change)
        for name, count in topics.items():
            for partition in range(count):
                owner = members[draw(st.sampled_from(member_ids))]
                owner.setdefault("owned", {}).setdefault(name, []).append(partition)
    return {"topics": topics, "members": members}


def shares(document: dict) -> tuple[dict[tuple[str, str], Fraction], dict[str, Fraction]]:
    """(member, topic) -> share, member -> total share (module docstring)."""
    per_topic: dict[tuple[str, str], Fraction] = {}
    total = {m: Fraction(0) for m in document["members"]}
    for topic, count in document["topics"].items():
        weights = {
            m: Fraction(spec.get("weight", 1.0))
            for m, spec in document["members"].items()
            if topic in spec["topics"]
        }
        for m, w in weights.items():
            share = count * w / sum(weights.values())
            per_topic[(m, topic)] = share
            total[m] += share
    return per_topic, total


def within_one(count: int, share: Fraction) -> bool:
    return math.floor(share) <= count <= math.ceil(share)


def counts(assignment: dict) -> dict[str, int]:
    return {m: sum(map(len, owned.values())) for m, owned in assignment.items()}


def owned_counts(document: dict) -> tuple[dict[tuple[str, str], int], int]:
    """Resolved previous ownership: (member, topic) -> count for subscribed topics, and the
    number of owned partitions whose owner no longer subscribes (they move whatever happens)."""
    resolved, _ = resolve_ownership(parse_request(document).group)
    owned: dict[tuple[str, str], int] = {}
    forced = 0
    for m, topics in resolved.items():
        for topic, partitions in topics.items():
            if topic in document["members"][m]["topics"]:
                owned[(m, topic)] = len(partitions)
            else:
                forced += len(partitions)
    return owned, forced


def fewest_moves(document: dict) -> int | None:
    """The fewest moves of any assignment meeting both bounds: brute force over every quota
    matrix (each fractional share rounded down or up), None when there are too many."""
    per_topic, total = shares(document)
    owned, forced = owned_counts(document)
    free = [key for key, share in per_topic.items() if share.denominator != 1]
    if len(free) > 10:
        return None
    best = None
    for ups in itertools.product((0, 1), repeat=len(free)):
        quota = {key: math.floor(share) for key, share in per_topic.items()}
        for key, up in zip(free, ups, strict=True):
            quota[key] += up
        if any(
            sum(q for (_, t), q in quota.items() if t == topic) != count
            for topic, count in document["topics"].items()
            if any(t == topic for _, t in quota)
        ):
            continue
        sums = dict.fromkeys(total, 0)
        for (m, _), q in quota.items():
            sums[m] += q
        if not all(within_one(sums[m], total[m]) for m in total):
            continue
        moves = forced + sum(max(0, n - quota.get(key, 0)) for key, n in owned.items())
        best = moves if best is None else min(best, moves)
    return best


def as_ownership(document: dict, assignment: dict) -> dict:
    copy = json.loads(json.dumps(document))
    for member_id, member in copy["members"].items():
        member["owned"] = assignment[member_id]
        member["generation"] = 7
    return copy


def check_bounds(document: dict, assignment: dict) -> None:
    check_valid(parse_request(document).group, assignment)
    per_topic, total = shares(document)
    for (m, topic), share in per_topic.items():
        got = len(assignment[m].get(topic, []))
        assert within_one(got, share), f"{m} has {got} of {topic}, share {share}"
    for m, got in counts(assignment).items():
        assert within_one(got, total[m]), f"{m} has {got} in all, share {total[m]}"


@EXAMPLES
@given(groups())
def test_every_count_within_one_of_its_weighted_share_per_topic_and_in_total(document):
    check_bounds(document, plan(document, "weighted-sticky")["assignment"])


@EXAMPLES
@given(groups(max_topics=40, max_partitions=3, max_members=12))
def test_many_small_topics_within_one_and_stable_when_fed_back(document):
    first = plan(document, "weighted-sticky")
    check_bounds(document, first["assignment"])
    second = plan(as_ownership(document, first["assignment"]), "weighted-sticky")
    assert second["moves"] == []


@EXAMPLES
@given(groups())
def test_owners_keep_what_their_quota_allows_and_never_gain_where_they_lose(document):
    result = plan(document, "weighted-sticky")
    resolved, _ = resolve_ownership(parse_request(document).group)
    for m, topics in resolved.items():
        for topic, partitions in topics.items():
            if topic not in document["members"][m]["topics"]:
                continue
            got = set(result["assignment"][m].get(topic, []))
            kept = got & set(partitions)
            assert len(kept) == min(len(partitions), len(got))
    lost = {(move["from"], move["topic"]) for move in result["moves"]}
    gained = {(move["to"], move["topic"]) for move in result["moves"]}
    assert not lost & gained


@EXAMPLES
@given(groups())
def test_moves_are_the_fewest_any_assignment_within_both_bounds_needs(document):
    best = fewest_moves(document)
    if best is not None:
        assert plan(document, "weighted-sticky")["stats"]["moves"] == best


@EXAMPLES
@given(groups())
def test_replanning_its_own_plan_moves_nothing(document):
    first = plan(document, "weighted-sticky")
    second = plan(as_ownership(document, first["assignment"]), "weighted-sticky")
    assert second["moves"] == []
    assert second["assignment"] == first["assignment"]


@EXAMPLES
@given(groups())
def test_deterministic_whatever_the_input_order(document):
    reordered = json.loads(json.dumps(document), object_pairs_hook=lambda p: dict(reversed(p)))
    first = json.dumps(plan(document, "weighted-sticky"))
    assert first == json.dumps(plan(reordered, "weighted-sticky"))
    assert first == json.dumps(plan(document, "weighted-sticky"))


@EXAMPLES
@given(groups(equal=True))
def test_equal_weights_identical_subscriptions_balance_as_sticky_does(document):
    topics = list(document["topics"])
    for spec in document["members"].values():
        spec["topics"] = topics
    ours = counts(plan(document, "weighted-sticky")["assignment"])
    kafka = counts(plan(document, "sticky")["assignment"])
    assert sorted(ours.values()) == sorted(kafka.values())
    assert max(ours.values()) - min(ours.values()) <= 1
