"""`Plan.assignment` as a `PlanAssignment`: the lazy view the planner returns reads exactly as
the eager lists it stands for, on random plans of every shape the planner keeps entries in
(fresh groups: shared 1-tuples; members that kept their one-partition-per-topic claims:
columns; anything else: fresh lists)."""

from __future__ import annotations

import json
import random

import pytest
from kafka_rebalance_assignors import (
    MemberRequest,
    Plan,
    PlanAssignment,
    PlanRequest,
    plan,
    plan_request,
)
from kafka_rebalance_assignors.planner import differing_positions
from kafka_rebalance_assignors.registry import STRATEGY_NAMES


def _random_request(seed: int, strategy: str) -> PlanRequest:
    """Up to 12 topics of up to 12 partitions, up to 10 members subscribing to all of them
    (the shape whose claims validation keeps as columns) or to a random part; claims either
    none (a fresh group), one partition per topic per member (columns), or several."""
    rng = random.Random(seed)
    topics = {f"t{i:02d}": rng.randint(1, 12) for i in range(rng.randint(1, 12))}
    names = sorted(topics)
    member_ids = [f"m{i}" for i in range(rng.randint(1, 10))]
    shape = rng.choice(["fresh", "one-per-topic", "several", "partial"])
    owned: dict[str, dict[str, list[int]]] = {m: {} for m in member_ids}
    if shape != "fresh":
        for topic, count in topics.items():
            partitions = list(range(count))
            rng.shuffle(partitions)
            for index, partition in enumerate(partitions):
                member = member_ids[index % len(member_ids)]
                if shape == "one-per-topic" and topic in owned[member]:
                    continue  # at most one partition of each topic per member
                owned[member].setdefault(topic, []).append(partition)
    members = {}
    for member_id in member_ids:
        subscribed = names if shape != "partial" else rng.sample(names, rng.randint(1, len(names)))
        members[member_id] = MemberRequest(
            topics=subscribed,
            owned={t: p for t, p in owned[member_id].items() if t in subscribed},
        )
    return PlanRequest(topics=topics, members=members, strategy=strategy)


def _eager(view: PlanAssignment) -> dict[str, dict[str, list[int]]]:
    """The view read member by member, topic by topic: what a caller iterating it sees."""
    return {m: {t: list(p) for t, p in view[m].items()} for m in view}


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("seed", range(25))
def test_the_view_reads_as_the_eager_lists(strategy: str, seed: int) -> None:
    request = _random_request(seed, strategy)
    result = plan_request(request)
    view = result.assignment
    assert isinstance(view, PlanAssignment)
    eager = _eager(view)
    # the plan-contract document (plain lists) and the view agree, in either direction
    document = plan(request.to_document())
    assert document["assignment"] == eager
    assert view == document["assignment"] and document["assignment"] == view
    assert list(view) == list(request.members) == sorted(request.members)
    assert len(view) == len(request.members)
    owners: dict[tuple[str, int], str] = {}
    for member_id in view:
        entry = view[member_id]
        assert type(entry) is dict and list(entry) == sorted(entry)
        assert view.topics(member_id) == list(entry)
        for topic, partitions in entry.items():
            assert type(partitions) is list and partitions == sorted(set(partitions))
            assert partitions, "no empty lists"
            for partition in partitions:
                assert (topic, partition) not in owners
                owners[topic, partition] = member_id
        assert sum(map(len, entry.values())) == result.members[member_id].partitions
    subscribed = {t for m in request.members.values() for t in m.topics}
    wanted = {(t, p) for t in subscribed for p in range(request.topics[t])}
    assert set(owners) == wanted


@pytest.mark.parametrize("owned", [False, True])
def test_reads_are_stable_and_private(owned: bool) -> None:
    """A member's lists are built once (the same objects on every read) and belong to this plan:
    changing them changes neither another member nor the next plan of the same request."""
    topics = {f"t{i}": 4 for i in range(5)}
    members = {
        f"m{i}": MemberRequest(
            topics=sorted(topics), owned={t: [i] for t in topics} if owned else {}
        )
        for i in range(4)
    }
    request = PlanRequest(topics=topics, members=members, strategy="cooperative-sticky")
    first = plan_request(request)
    # the two shapes this test is for: shared 1-tuples (fresh), the members' columns (owned)
    entries = first.assignment._entries  # type: ignore[attr-defined]
    if owned:
        assert {type(e).__name__ for e in entries.values()} == {"PartitionClaims"}
    else:
        assert first.assignment._shared  # type: ignore[attr-defined]
    before = _eager(first.assignment)  # type: ignore[arg-type]
    entry = first.assignment["m0"]
    assert first.assignment["m0"] is entry
    for partitions in entry.values():
        partitions.append(99)
    assert first.assignment["m0"] is entry
    assert {m: first.assignment[m] for m in ("m1", "m2", "m3")} == {
        m: before[m] for m in ("m1", "m2", "m3")
    }
    assert plan_request(request).assignment == before


def test_the_document_is_plain_json_and_round_trips() -> None:
    request = _random_request(7, "cooperative-sticky")
    result = plan_request(request)
    document = result.to_document()
    assert type(document["assignment"]) is dict
    assert all(type(entry) is dict for entry in document["assignment"].values())
    assert json.loads(json.dumps(document)) == document
    assert Plan.from_document(document) == result
    assert dict(result.assignment) == document["assignment"]


@pytest.mark.parametrize("seed", range(40))
def test_differing_positions_equal_the_entrywise_comparison(seed: int) -> None:
    """The block-by-block search finds exactly the positions an entry-by-entry comparison
    finds: lengths around the block size, no change, a few, and many."""
    rng = random.Random(seed)
    total = rng.choice([0, 1, 255, 256, 257, 511, 1000, rng.randint(0, 3000)])
    previous = [rng.randint(-1, 5) for _ in range(total)]
    target = list(previous)
    for _ in range(rng.choice([0, 1, 3, total // 2 + 1])):
        if total:
            target[rng.randrange(total)] = rng.randint(-1, 5)
    expected = [i for i in range(total) if previous[i] != target[i]]
    assert differing_positions(previous, target) == expected


def test_differing_positions_refuses_arrays_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        differing_positions([1, 2], [1])
