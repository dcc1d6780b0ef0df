"""Kafka's sticky invariants as properties over random groups (hypothesis).

The invariants are those AbstractStickyAssignorTest enforces for both StickyAssignor and
CooperativeStickyAssignor: validity, full balance for identical subscriptions, Kafka's balance
rule otherwise, no A->B / B->A trades, stability when nothing changes, survivors keeping their
partitions when a member leaves, KIP-341 conflict resolution, and convergence of the cooperative
two-round protocol. Range and roundrobin are checked for validity on the same groups.

Each property runs 80 examples by default;
`STICKY_EXAMPLES=2000 .venv/bin/python -m pytest tests/unit/assignors/test_sticky_properties.py`
searches harder.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors.context import prepare
from kafka_rebalance_assignors.model import Assignment, Group, Options
from kafka_rebalance_assignors.ownership import resolve, resolve_ownership
from kafka_rebalance_assignors.parsing import parse_request, plan
from kafka_rebalance_assignors.registry import strategy_function

from tests.assignor_checks import (
    balance_violation,
    check_valid,
    is_fully_balanced,
    moves,
    sizes,
    two_cycles,
)

STICKY = ("sticky", "cooperative-sticky")
EXAMPLES = settings(max_examples=int(os.environ.get("STICKY_EXAMPLES", "80")), deadline=None)


def run(strategy: str, group: Group) -> Assignment:
    raw = strategy_function(strategy)(prepare(group, Options()))
    check_valid(group, raw)
    return {
        m: {t: sorted(ps) for t, ps in sorted(raw.get(m, {}).items()) if ps} for m in group.members
    }


def build(topics: dict[str, int], members: dict[str, dict[str, Any]]) -> Group:
    return parse_request({"topics": topics, "members": members}).group


def next_round(
    group: Group, assignment: Assignment, generation: int, drop: frozenset[str] = frozenset()
) -> Group:
    members = {
        member_id: {
            "topics": list(member.topics),
            "owned": assignment.get(member_id, {}),
            "generation": generation,
        }
        for member_id, member in group.members.items()
        if member_id not in drop
    }
    return build(dict(group.topics), members)


@st.composite
def groups(draw: st.DrawFn, identical: bool | None = None, claims: bool = True) -> Group:
    """Up to 5 topics of up to 9 partitions, up to 7 members, random (possibly conflicting,
    possibly stale) previous ownership with random generations."""
    topics = {f"t{i}": draw(st.integers(0, 9)) for i in range(draw(st.integers(1, 5)))}
    names = list(topics)
    if identical is None:
        identical = draw(st.booleans())
    common = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    members: dict[str, dict[str, Any]] = {}
    for i in range(draw(st.integers(1, 7))):
        subscription = common if identical else draw(st.lists(st.sampled_from(names), unique=True))
        spec: dict[str, Any] = {"topics": sorted(subscription)}
        if claims and draw(st.booleans()):
            owned = {}
            for topic in draw(st.lists(st.sampled_from(names), unique=True)):
                if topics[topic]:
                    owned[topic] = draw(
                        st.lists(st.integers(0, topics[topic] - 1), unique=True, max_size=4)
                    )
            spec["owned"] = owned
            generation = draw(st.none() | st.integers(0, 3))
            if generation is not None:
                spec["generation"] = generation
        members[f"m{i}"] = spec
    return build(topics, members)


def retained(group: Group, assignment: Assignment) -> int:
    resolved, _ = resolve_ownership(group)
    return sum(
        len(set(partitions) & set(assignment.get(m, {}).get(topic, [])))
        for m, owned in resolved.items()
        for topic, partitions in owned.items()
    )


# --------------------------------------------------------------------------- validity, balance


@EXAMPLES
@given(groups())
def test_every_strategy_is_valid(group: Group) -> None:
    for strategy in ("range", "roundrobin", *STICKY):
        run(strategy, group)  # check_valid inside


@EXAMPLES
@given(groups(identical=True))
def test_identical_subscriptions_are_fully_balanced_and_maximally_sticky(group: Group) -> None:
    member = next(iter(group.members.values()))
    total = sum(group.topics[t] for t in member.topics)
    size = len(group.members)
    min_quota, extra = divmod(total, size)
    max_quota = min_quota + (1 if extra else 0)
    resolved, _ = resolve_ownership(group)
    owned_counts = [
        sum(len(ps) for t, ps in resolved[m].items() if t in member.topics) for m in group.members
    ]
    # The most any assignment within the quotas can keep: everyone min(owned, minQuota), plus
    # one more for as many owners of maxQuota or more as there are maxQuota slots.
    best = sum(min(c, min_quota) for c in owned_counts)
    if extra:
        best += min(extra, sum(1 for c in owned_counts if c >= max_quota))
    for strategy in STICKY:
        assignment = run(strategy, group)
        assert is_fully_balanced(group, assignment)
        assert retained(group, assignment) == best


@EXAMPLES
@given(groups(identical=False))
def test_general_subscriptions_meet_kafkas_balance_rule(group: Group) -> None:
    for strategy in STICKY:
        assignment = run(strategy, group)
        assert balance_violation(group, assignment) is None
        assert two_cycles(group, assignment) == []


@EXAMPLES
@given(groups(identical=False))
def test_general_path_keeps_owned_partitions_when_already_balanced(group: Group) -> None:
    # Start from a balanced assignment (our own), perturb nothing: the owned partitions are a
    # valid balanced assignment, so none of them may move.
    first = run("sticky", group)
    again = run("sticky", next_round(group, first, 7))
    assert again == first


# --------------------------------------------------------------------------- stability


@EXAMPLES
@given(groups())
def test_replanning_an_unchanged_group_moves_nothing(group: Group) -> None:
    for strategy in STICKY:
        first = run(strategy, group)
        follow = next_round(group, first, 10)
        second = run(strategy, follow)
        assert moves(follow, second) == []
        assert second == first


@EXAMPLES
@given(groups(identical=True, claims=False), st.data())
def test_a_member_leaving_costs_the_survivors_nothing(group: Group, data: st.DataObject) -> None:
    for strategy in STICKY:
        first = run(strategy, group)
        leaver = data.draw(st.sampled_from(sorted(group.members)))
        if len(group.members) == 1:
            return
        follow = next_round(group, first, 1, drop=frozenset({leaver}))
        second = run(strategy, follow)
        assert is_fully_balanced(follow, second)
        for member_id in follow.members:
            for topic, partitions in first[member_id].items():
                assert set(partitions) <= set(second[member_id].get(topic, []))


# --------------------------------------------------------------------------- cooperative protocol


def cooperative_round(group: Group) -> tuple[Assignment, Assignment, int]:
    """One rebalance of Kafka's cooperative protocol: the target, what is handed out now (the
    target minus partitions changing owner: their owners revoke them first), and how many are
    in transfer."""
    target = run("cooperative-sticky", group)
    transferring = {(topic, p) for topic, p, _, _ in moves(group, target)}
    handed_out = {
        m: {t: [p for p in ps if (t, p) not in transferring] for t, ps in owned.items()}
        for m, owned in target.items()
    }
    return target, handed_out, len(transferring)


def generation_after(group: Group) -> int:
    known = [m.generation for m in group.members.values() if m.generation is not None]
    return max(known, default=0) + 1


@EXAMPLES
@given(groups(identical=True))
def test_cooperative_transfers_reach_the_target_in_two_rounds(group: Group) -> None:
    """Identical subscriptions: round 1 hands out the target minus the transfers; round 2, planned
    from that ownership, grants exactly the transferred partitions and lands on the same target
    (no change of mind mid-transfer); round 3 moves nothing."""
    target, handed_out, _ = cooperative_round(group)
    state = next_round(group, handed_out, generation_after(group))
    second, _, transferring = cooperative_round(state)
    assert transferring == 0  # round 2 revokes nothing: it only grants
    assert second == target
    state = next_round(group, second, generation_after(state))
    assert moves(state, run("cooperative-sticky", state)) == []


@EXAMPLES
@given(groups(identical=False))
def test_cooperative_transfers_converge_on_the_general_path(group: Group) -> None:
    """General subscriptions: Kafka's CooperativeStickyAssignorTest criterion. Re-feeding each
    round's hand-out as ownership, no round revokes and grants the same partition (transfers are
    withheld), and the process settles within four rebalances on a valid, balanced assignment
    that a further round leaves alone."""
    state = group
    for _ in range(4):
        target, handed_out, transferring = cooperative_round(state)
        state = next_round(state, handed_out, generation_after(state))
        if transferring == 0:
            break
    else:
        raise AssertionError("still transferring after four rebalances")
    assert handed_out == target
    assert balance_violation(state, target) is None
    assert moves(state, run("cooperative-sticky", state)) == []


# --------------------------------------------------------------------------- KIP-341


@EXAMPLES
@given(groups())
def test_the_runner_up_is_the_unique_claimant_of_the_next_lower_generation(group: Group) -> None:
    """KIP-341's "previous owner", which the sticky paths move a partition back to: for every
    contested partition, exactly the claimants below the top generation decide it."""
    ownership = resolve(group)
    members = list(group.members.values())
    for topic in group.topics:
        claimants: dict[int, list[tuple[int, int]]] = {}
        for index, member in enumerate(members):
            generation = -1 if member.generation is None else member.generation
            for partition in member.claimed.get(topic, ()):
                claimants.setdefault(partition, []).append((generation, index))
        for partition, claims in claimants.items():
            top = max(generation for generation, _ in claims)
            lower = [g for g, _ in claims if g < top]
            below = max(lower, default=None)
            unique = [i for g, i in claims if g == below]
            expected = unique[0] if len(claims) > 1 and len(unique) == 1 else None
            assert ownership.runner_up.get(topic, {}).get(partition) == expected


@EXAMPLES
@given(groups(identical=True))
def test_a_losing_claim_never_beats_the_winner(group: Group) -> None:
    """A partition whose winning claimant keeps it within its quota stays with the winner: a
    lower-generation claimant never takes it over."""
    resolved, _ = resolve_ownership(group)
    assignment = run("sticky", group)
    counts = sizes(group, assignment)
    for member_id, owned in resolved.items():
        mine = assignment.get(member_id, {})
        kept = sum(len(set(ps) & set(mine.get(t, []))) for t, ps in owned.items())
        claimed = sum(len(ps) for t, ps in owned.items() if t in group.members[member_id].topics)
        # a winner keeps everything it can within its final size
        assert kept == min(claimed, counts[member_id])


@EXAMPLES
@given(groups(identical=True, claims=False))
def test_plan_hands_out_independent_lists_even_where_the_strategy_shares_tuples(
    group: Group,
) -> None:
    """The fresh constrained deal shares one immutable tuple per partition number between
    members' entries; `plan` must copy them, so a caller mutating one list changes nothing else."""
    document = {
        "topics": dict(group.topics),
        "members": {m: {"topics": list(member.topics)} for m, member in group.members.items()},
    }
    result = plan(document, "cooperative-sticky")
    lists = [partitions for owned in result["assignment"].values() for partitions in owned.values()]
    assert all(type(partitions) is list for partitions in lists)
    assert len({id(partitions) for partitions in lists}) == len(lists)
    before = plan(document, "cooperative-sticky")["assignment"]
    for partitions in lists:
        partitions.append(-1)
    assert plan(document, "cooperative-sticky")["assignment"] == before
