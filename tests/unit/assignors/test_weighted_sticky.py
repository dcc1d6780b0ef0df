"""`weighted-sticky` on worked examples, and the cross-topic check of issue 12 on groups with many
small topics (per-tenant topics, CDC topics per table).

Shares as in tests/unit/assignors/test_weighted_sticky_properties.py: member m's share of topic t is
n_t * w_m / (sum of the weights of t's subscribers), its total share the sum over topics; a
count is within one of a share when it is the share's floor or ceiling.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from kafka_rebalance_assignors import plan

from tests.unit.assignors.test_weighted_sticky_properties import counts, shares, within_one


def _everyone(topics: dict[str, int], members: int, **spec) -> dict:
    return {
        "topics": topics,
        "members": {f"m{i}": {"topics": list(topics), **spec} for i in range(members)},
    }


def test_six_single_partition_topics_spread_over_three_members():
    document = _everyone({f"t{i}": 1 for i in range(6)}, 3)
    assert counts(plan(document, "weighted-sticky")["assignment"]) == {"m0": 2, "m1": 2, "m2": 2}


def test_forty_three_partition_topics_over_seven_members():
    document = _everyone({f"t{i:02d}": 3 for i in range(40)}, 7)
    assignment = plan(document, "weighted-sticky")["assignment"]
    assert sorted(counts(assignment).values()) == [17] * 6 + [18]  # 120 = 7 x 17 + 1
    for owned in assignment.values():  # and still within one per topic: 0 or 1 of each
        assert set(map(len, owned.values())) == {1}


def test_kip54_example_3_the_new_member_gets_one_partition_for_one_move():
    both = ["t0", "t1"]
    owned = {"C0": {"t0": [0], "t1": [0]}, "C1": {"t0": [1], "t1": [1]}}
    document = {
        "topics": {"t0": 2, "t1": 2},
        "members": {
            **{c: {"topics": both, "owned": owned[c], "generation": 1} for c in owned},
            "C2": {"topics": both},
        },
    }
    result = plan(document, "weighted-sticky")
    assert sorted(counts(result["assignment"]).values()) == [1, 1, 2]  # as Kafka's sticky
    assert result["assignment"]["C2"] != {}
    assert result["stats"]["moves"] == 1  # preserving 3 partition assignments, as in KIP-54


def test_kip54_example_1_balance_as_sticky():
    everything = [f"t{i}" for i in range(4)]
    document = _everyone(dict.fromkeys(everything, 2), 3)
    first = plan(document, "weighted-sticky")
    assert sorted(counts(first["assignment"]).values()) == [2, 3, 3]
    members = {
        m: {"topics": everything, "owned": first["assignment"][m], "generation": 1}
        for m in ("m0", "m2")  # m1 leaves
    }
    second = plan({"topics": document["topics"], "members": members}, "weighted-sticky")
    assert counts(second["assignment"]) == {"m0": 4, "m2": 4}
    for m in members:  # "all previous assignments kept"
        for topic, partitions in first["assignment"][m].items():
            assert set(partitions) <= set(second["assignment"][m][topic])


def test_kip54_example_2_keeps_per_topic_proportions_where_sticky_does_not():
    # Sticky gives C1 both partitions of t1 (C2 holds all of t2); weighted-sticky shares every
    # topic among its subscribers: t1 is split between C1 and C2.
    document = {
        "topics": {"t0": 1, "t1": 2, "t2": 3},
        "members": {
            "C0": {"topics": ["t0"]},
            "C1": {"topics": ["t0", "t1"]},
            "C2": {"topics": ["t0", "t1", "t2"]},
        },
    }
    assignment = plan(document, "weighted-sticky")["assignment"]
    assert len(assignment["C1"]["t1"]) == len(assignment["C2"]["t1"]) == 1
    assert len(assignment["C2"]["t2"]) == 3


def test_unequal_weights_many_small_topics_totals_follow_weights():
    # 30 single-partition topics, weights 4/2/1/1 (sum 8): shares 15, 7.5, 3.75, 3.75
    document = _everyone({f"t{i:02d}": 1 for i in range(30)}, 4)
    for member, weight in zip(document["members"].values(), (4, 2, 1, 1), strict=True):
        member["weight"] = weight
    got = counts(plan(document, "weighted-sticky")["assignment"])
    assert got["m0"] == 15 and got["m1"] in (7, 8) and got["m2"] in (3, 4) and got["m3"] in (3, 4)


def test_a_member_joining_takes_its_share_from_every_member_not_one():
    # 12 topics x 2 partitions settled on m0..m2 (8 each); m3 joins: 6 moves, 2 off each.
    topics = {f"t{i:02d}": 2 for i in range(12)}
    settled = plan(_everyone(topics, 3), "weighted-sticky")["assignment"]
    members = {m: {"topics": list(topics), "owned": settled[m], "generation": 1} for m in settled}
    members["m3"] = {"topics": list(topics)}
    result = plan({"topics": topics, "members": members}, "weighted-sticky")
    assert counts(result["assignment"]) == {"m0": 6, "m1": 6, "m2": 6, "m3": 6}
    assert result["stats"]["moves"] == 6
    assert sorted(move["from"] for move in result["moves"]) == ["m0"] * 2 + ["m1"] * 2 + ["m2"] * 2


# --------------------------------------------------------------------------- held-out cross-topic


def many_small_topic_groups(weights: str, identical: bool, seeds: int = 20):
    """Groups of 6..300 topics of 1..3 partitions, 2..13 members, no lag (counts only)."""
    rng = random.Random(f"{weights}-{identical}")
    for _ in range(seeds):
        topics = {f"t{j:03d}": rng.randint(1, 3) for j in range(rng.choice([6, 20, 40, 100, 300]))}
        members = {}
        for k in range(rng.randint(2, 13)):
            subscription = [t for t in topics if identical or rng.random() < 0.6]
            spec: dict = {"topics": subscription}
            if weights == "unequal":
                spec["weight"] = rng.choice([1, 2, 4])
            members[f"m{k:02d}"] = spec
        yield {"topics": topics, "members": members}


def _worst(document: dict, strategy: str) -> tuple[str, int, Fraction] | None:
    _, total = shares(document)
    got = counts(plan(document, strategy)["assignment"])
    for m, share in total.items():
        if not within_one(got[m], share):
            return m, got[m], share
    return None


@pytest.mark.parametrize("identical", [True, False], ids=["identical", "mixed"])
@pytest.mark.parametrize("weights", ["equal", "unequal"])
def test_weighted_sticky_every_member_within_one_of_its_weighted_share(weights, identical):
    for document in many_small_topic_groups(weights, identical):
        assert _worst(document, "weighted-sticky") is None


@pytest.mark.parametrize("identical", [True, False], ids=["identical", "mixed"])
@pytest.mark.parametrize("weights", ["equal", "unequal"])
def test_lag_aware_every_member_within_one_of_its_weighted_share(weights, identical):
    for document in many_small_topic_groups(weights, identical):
        assert _worst(document, "lag-aware") is None


def test_lag_aware_unequal_weights_many_small_topics():
    # m01, weight 4 of 23, share 2.61: the search alone gave it 4 while four weight-1 members
    # had none (every plan there tied on the largest load / weight).
    weights = (1, 4, 4, 1, 4, 1, 2, 1, 1, 4)
    document = _everyone({f"t{i}": c for i, c in enumerate((3, 3, 2, 3, 1, 3))}, len(weights))
    for member, weight in zip(document["members"].values(), weights, strict=True):
        member["weight"] = weight
    assert _worst(document, "lag-aware") is None
