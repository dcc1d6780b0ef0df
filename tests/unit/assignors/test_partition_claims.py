"""Claims as columns (`PartitionClaims`): validation holds a member's one-partition-per-topic
claims as one array of global partition numbers, it reads as the mapping it stands for, and
every strategy plans a group of such members exactly as it plans the same claims held as a
plain topic -> partitions mapping."""

from __future__ import annotations

import dataclasses
import json
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors import MemberRequest, PlanRequest, plan_group
from kafka_rebalance_assignors.model import Group, ParsedRequest, PartitionClaims, claim_count
from kafka_rebalance_assignors.registry import STRATEGY_NAMES
from kafka_rebalance_assignors.validation import validate

EXAMPLES = settings(max_examples=80, deadline=None)


def _validated(owned: dict[str, list[int]], topics: dict[str, int]) -> Group:
    request = PlanRequest(topics=topics, members={"a": MemberRequest(list(topics), owned=owned)})
    return validate(request).group


def test_one_partition_per_topic_is_held_as_global_numbers() -> None:
    group = _validated({"b": [1], "a": [2]}, {"a": 3, "b": 4, "c": 2})
    claimed = group.members["a"].claimed
    assert type(claimed) is PartitionClaims
    assert claimed.names == ("a", "b")
    assert claimed.numbers == array("i", [2, 3 + 1])  # b starts at 3: a's 3 partitions first
    assert list(claimed) == ["a", "b"] and len(claimed) == 2
    assert claimed == {"a": (2,), "b": (1,)}
    assert dict(claimed.items()) == {"a": (2,), "b": (1,)}
    assert claimed["b"] == (1,) and "a" in claimed and "c" not in claimed
    assert claimed.as_lists() == {"a": [2], "b": [1]}
    assert list(claimed.partitions()) == [2, 1]
    assert claim_count(claimed) == 2 == claim_count({"a": [2], "b": [1]})


def test_other_claims_stay_a_plain_mapping() -> None:
    """Several partitions of a topic, a stale claim, a bool: the topic-by-topic path as before."""
    topics = {"a": 3, "b": 4}
    several = _validated({"a": [0, 2]}, topics).members["a"].claimed
    assert type(several) is dict and several == {"a": (0, 2)}
    stale = validate(
        PlanRequest(topics=topics, members={"a": MemberRequest(["a"], owned={"a": [5], "b": [1]})})
    )
    assert stale.group.members["a"].claimed == {"b": (1,)}
    assert stale.group.stale_ownership_dropped == 1


@st.composite
def one_partition_requests(draw: st.DrawFn) -> PlanRequest:
    """Up to 5 topics of up to 6 partitions and up to 6 members, mostly with identical
    subscriptions (the constrained sticky path), each claiming at most one partition per topic
    (overlapping, stale and out-of-range claims included), with or without generations."""
    topics = {f"t{i}": draw(st.integers(0, 6)) for i in range(draw(st.integers(1, 5)))}
    names = [*topics, "gone"]
    identical = draw(st.booleans())
    everyone = list(topics)
    members: dict[str, MemberRequest] = {}
    for i in range(draw(st.integers(1, 6))):
        subscription = everyone if identical else draw(st.lists(st.sampled_from(names)))
        claimed = draw(st.lists(st.sampled_from(names), unique=True))
        members[f"m{i}"] = MemberRequest(
            topics=subscription,
            owned={topic: [draw(st.integers(0, 6))] for topic in claimed},
            generation=draw(st.none() | st.integers(0, 2)),
        )
    return PlanRequest(
        topics=topics, members=members, strategy=draw(st.sampled_from(STRATEGY_NAMES))
    )


@EXAMPLES
@given(one_partition_requests())
def test_every_strategy_plans_columns_as_it_plans_the_mapping(request: PlanRequest) -> None:
    parsed = validate(request)
    plain = {
        member_id: dataclasses.replace(member, claimed=dict(member.claimed.items()))
        for member_id, member in parsed.group.members.items()
    }
    assert not any(type(m.claimed) is PartitionClaims for m in plain.values())
    as_mapping = ParsedRequest(
        parsed.strategy, dataclasses.replace(parsed.group, members=plain), parsed.options
    )
    columns = plan_group(parsed).to_document()
    mapping = plan_group(as_mapping).to_document()
    assert json.dumps(columns) == json.dumps(mapping)
