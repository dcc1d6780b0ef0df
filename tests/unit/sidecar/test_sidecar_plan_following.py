"""The leader's composition: claims by epoch, cooperative-sticky fallback, KIP-429 withholding."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_rebalance_assignors import plan
from kafka_rebalance_common.wire.user_data import NO_EPOCH, Claim
from kafka_rebalance_sidecar.plan_following import Composition, MemberView, compose, trusted


def view(
    member_id: str,
    topics: Sequence[str] = ("t",),
    claim: Claim | None = None,
    owned: Mapping[str, Sequence[int]] | None = None,
    instance_id: str | None = "same",
) -> MemberView:
    return MemberView(
        member_id=member_id,
        instance_id=member_id if instance_id == "same" else instance_id,
        topics=tuple(topics),
        claim=claim,
        owned=dict(owned or {}),
    )


def owners_of(composition: Composition) -> dict[tuple[str, int], str]:
    result: dict[tuple[str, int], str] = {}
    for member_id, topics in composition.assignment.items():
        for topic, partitions in topics.items():
            for partition in partitions:
                assert (topic, partition) not in result, f"{topic}-{partition} given twice"
                result[(topic, partition)] = member_id
    return result


def apply_round(members: Sequence[MemberView], composition: Composition) -> list[MemberView]:
    """Every member now owns exactly what it was assigned (the owner of a withheld partition
    revoked it; the cooperative protocol has it rejoin)."""
    return [
        MemberView(
            m.member_id, m.instance_id, m.topics, m.claim, composition.assignment[m.member_id]
        )
        for m in members
    ]


# -- known answers -------------------------------------------------------------------------


def test_claims_are_followed_exactly() -> None:
    members = [
        view("a", claim=Claim(4, {"t": (0, 3)})),
        view("b", claim=Claim(4, {"t": (1, 2)})),
    ]
    result = compose(members, {"t": 4}, cooperative=False)
    assert result.assignment == {"a": {"t": [0, 3]}, "b": {"t": [1, 2]}}
    assert result.epoch == 4
    assert result.fallback_partitions == 0
    assert result.claimed_partitions == 4
    assert result.withheld == ()


def test_highest_epoch_wins_a_conflict_with_a_stale_claim() -> None:
    # b has not seen epoch 5 yet: its epoch-4 claim still lists partition 1, which moved to a.
    members = [
        view("a", claim=Claim(5, {"t": (0, 1)})),
        view("b", claim=Claim(4, {"t": (1, 2, 3)})),
    ]
    result = compose(members, {"t": 4}, cooperative=False)
    assert result.assignment == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}
    assert result.epoch == 5


def test_equal_epochs_tie_break_on_the_lower_instance_id() -> None:
    members = [
        view("member-1", claim=Claim(3, {"t": (0,)}), instance_id="pod-b"),
        view("member-2", claim=Claim(3, {"t": (0, 1)}), instance_id="pod-a"),
    ]
    result = compose(members, {"t": 2}, cooperative=False)
    assert result.assignment == {"member-1": {}, "member-2": {"t": [0, 1]}}


def test_claims_of_missing_partitions_and_unsubscribed_topics_are_ignored() -> None:
    members = [
        view("a", topics=["t"], claim=Claim(2, {"t": (0, 7), "gone": (0,), "u": (0,)})),
        view("b", topics=["t", "u"], claim=Claim(1, {"u": (0,)}), owned={"t": [1]}),
    ]
    result = compose(members, {"t": 2, "u": 1}, cooperative=False)
    # a's claim of u-0 is ignored (a does not subscribe to u), so b's older claim wins it
    assert result.assignment == {"a": {"t": [0]}, "b": {"t": [1], "u": [0]}}
    assert result.ignored_claims == 3  # t-7, gone-0, u-0 (a)
    assert result.fallback_partitions == 1  # t-1, sticky to its current owner b


def test_partitions_of_a_vanished_member_go_to_the_least_loaded() -> None:
    # c's pod is gone: its claimed partitions 4 and 5 are claimed by no present member.
    members = [
        view("a", claim=Claim(6, {"t": (0, 1)}), owned={"t": [0, 1]}),
        view("b", claim=Claim(6, {"t": (2,)}), owned={"t": [2]}),
        view("d", claim=None),
    ]
    result = compose(members, {"t": 6}, cooperative=False)
    counts = {m: sum(map(len, t.values())) for m, t in result.assignment.items()}
    assert result.assignment["a"] == {"t": [0, 1]}
    assert 2 in result.assignment["b"]["t"]
    assert counts == {"a": 2, "b": 2, "d": 2}
    assert result.fallback_partitions == 3


def test_no_claims_at_all_is_plain_cooperative_sticky() -> None:
    members = [
        view("a", owned={"t": [0, 1, 2, 3]}),
        view("b", owned={"t": [4]}),
        view("c"),
    ]
    result = compose(members, {"t": 6}, cooperative=False)
    expected = plan(
        {
            "strategy": "cooperative-sticky",
            "topics": {"t": 6},
            "members": {
                "a": {"topics": ["t"], "owned": {"t": [0, 1, 2, 3]}},
                "b": {"topics": ["t"], "owned": {"t": [4]}},
                "c": {"topics": ["t"], "owned": {}},
            },
        }
    )["assignment"]
    assert result.assignment == expected
    assert result.epoch == NO_EPOCH
    assert result.fallback_partitions == 6


def test_cooperative_move_takes_two_rounds() -> None:
    """KIP-429: round 1 revokes partition 2 from b (nobody gets it), round 2 grants it to a."""
    claims = {"a": Claim(8, {"t": (0, 1, 2)}), "b": Claim(8, {"t": (3,)})}
    members = [
        view("a", claim=claims["a"], owned={"t": [0, 1]}),
        view("b", claim=claims["b"], owned={"t": [2, 3]}),
    ]
    first = compose(members, {"t": 4}, cooperative=True)
    assert first.assignment == {"a": {"t": [0, 1]}, "b": {"t": [3]}}
    assert first.withheld == (("t", 2),)

    second = compose(apply_round(members, first), {"t": 4}, cooperative=True)
    assert second.assignment == {"a": {"t": [0, 1, 2]}, "b": {"t": [3]}}
    assert second.withheld == ()

    eager = compose(members, {"t": 4}, cooperative=False)
    assert eager.assignment == second.assignment and eager.withheld == ()


def test_cooperative_grants_at_once_when_the_owner_is_gone() -> None:
    members = [view("a", claim=Claim(2, {"t": (0, 1)}), owned={"t": [0]})]
    result = compose(members, {"t": 2}, cooperative=True)
    assert result.assignment == {"a": {"t": [0, 1]}}
    assert result.withheld == ()


def test_partition_owned_by_two_members_is_withheld_from_both() -> None:
    members = [
        view("a", claim=Claim(1, {"t": (0,)}), owned={"t": [0]}),
        view("b", owned={"t": [0]}),
    ]
    result = compose(members, {"t": 1}, cooperative=True)
    assert result.withheld == (("t", 0),)
    assert owners_of(result) == {}


# -- properties ----------------------------------------------------------------------------

TOPICS = ("a", "b")


@st.composite
def groups(draw: st.DrawFn) -> tuple[list[MemberView], dict[str, int]]:
    counts = {t: draw(st.integers(0, 9)) for t in TOPICS}
    count = draw(st.integers(1, 5))
    ids = [f"m{i}" for i in range(count)]
    subscriptions = {
        m: draw(st.lists(st.sampled_from((*TOPICS, "missing")), unique=True, max_size=3))
        for m in ids
    }
    # current ownership: a valid previous assignment (each partition at most one owner)
    owned: dict[str, dict[str, list[int]]] = {m: {} for m in ids}
    for topic, n in counts.items():
        for partition in range(n):
            owner = draw(st.sampled_from((None, *ids)))
            if owner is not None:
                owned[owner].setdefault(topic, []).append(partition)
    members = []
    for m in ids:
        claim = None
        if draw(st.booleans()):
            claimed = {
                topic: tuple(sorted(draw(st.lists(st.integers(0, 11), unique=True, max_size=6))))
                for topic in draw(st.lists(st.sampled_from((*TOPICS, "z")), unique=True))
            }
            claim = Claim(draw(st.integers(0, 3)), {t: p for t, p in claimed.items() if p})
        instance = draw(st.sampled_from((m, f"pod-{m}", None)))
        members.append(view(m, subscriptions[m], claim, owned[m], instance_id=instance))
    return members, counts


def best_claimant(members: Sequence[MemberView], topic: str, partition: int) -> MemberView | None:
    eligible = [
        m
        for m in members
        if m.claim is not None
        and topic in m.topics
        and partition in m.claim.partitions.get(topic, ())
    ]
    if not eligible:
        return None
    return min(
        eligible,
        key=lambda m: (-m.claim.epoch, m.instance_id is None, m.instance_id or "", m.member_id),  # type: ignore[union-attr]
    )


def check_valid(
    members: Sequence[MemberView], counts: Mapping[str, int], result: Composition
) -> dict[tuple[str, int], str]:
    assert set(result.assignment) == {m.member_id for m in members}
    by_id = {m.member_id: m for m in members}
    owners = owners_of(result)
    for (topic, partition), member_id in owners.items():
        assert topic in by_id[member_id].topics, f"{member_id} got unsubscribed {topic}"
        assert 0 <= partition < counts[topic]
    for topic_lists in result.assignment.values():
        for partitions in topic_lists.values():
            assert partitions == sorted(partitions) and partitions
    withheld = set(result.withheld)
    assert not withheld.intersection(owners)
    subscribed = {t for m in members for t in m.topics if t in counts}
    for topic in subscribed:
        for partition in range(counts[topic]):
            key = (topic, partition)
            assert (key in owners) != (key in withheld), f"{topic}-{partition} unassigned"
    return owners


@settings(max_examples=200, deadline=None)
@given(groups(), st.booleans())
def test_composition_is_valid_and_honours_claims(
    group: tuple[list[MemberView], dict[str, int]], cooperative: bool
) -> None:
    members, counts = group
    result = compose(members, counts, cooperative=cooperative)
    owners = check_valid(members, counts, result)
    if not cooperative:
        assert result.withheld == ()
    current = {(t, p): m.member_id for m in members for t, ps in m.owned.items() for p in ps}
    claimed_epochs = []
    for topic, n in counts.items():
        for partition in range(n):
            best = best_claimant(members, topic, partition)
            if best is None:
                continue
            claimed_epochs.append(best.claim.epoch)  # type: ignore[union-attr]
            key = (topic, partition)
            if key in result.withheld:
                # only because another present member owns it now
                assert cooperative and current.get(key) not in (None, best.member_id)
            else:
                assert owners[key] == best.member_id
    assert result.epoch == max(claimed_epochs, default=NO_EPOCH)
    assert result.claimed_partitions == len(claimed_epochs)
    unclaimed_subscribed = sum(
        1
        for topic in {t for m in members for t in m.topics if t in counts}
        for partition in range(counts[topic])
        if best_claimant(members, topic, partition) is None
    )
    assert result.fallback_partitions == unclaimed_subscribed


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(0, 30), st.data())
def test_balanced_claims_and_ownership_are_kept_as_they_are(
    member_count: int, partitions: int, data: st.DataObject
) -> None:
    """Claims honoured and fallback sticky together: a balanced current assignment, where some
    members claim exactly what they own and the rest claim nothing, is kept unchanged."""
    ids = [f"m{i}" for i in range(member_count)]
    order = data.draw(st.permutations(range(partitions)))
    owned = {m: sorted(order[i::member_count]) for i, m in enumerate(ids)}
    claiming = data.draw(st.sets(st.sampled_from(ids)))
    members = [
        view(
            m,
            claim=Claim(1, {"t": tuple(owned[m])}) if m in claiming and owned[m] else None,
            owned={"t": owned[m]} if owned[m] else {},
        )
        for m in ids
    ]
    for cooperative in (False, True):
        result = compose(members, {"t": partitions}, cooperative=cooperative)
        assert result.withheld == ()
        assert result.assignment == {m: ({"t": owned[m]} if owned[m] else {}) for m in ids}


@settings(max_examples=150, deadline=None)
@given(groups())
def test_cooperative_rounds_never_double_assign_and_converge(
    group: tuple[list[MemberView], dict[str, int]],
) -> None:
    """Simulate rebalances: no partition is ever granted while another member owns it, and with
    fixed claims the group settles with nothing withheld within three rounds."""
    members, counts = group
    for _ in range(3):
        result = compose(members, counts, cooperative=True)
        check_valid(members, counts, result)
        current = {(t, p): m.member_id for m in members for t, ps in m.owned.items() for p in ps}
        for key, member_id in owners_of(result).items():
            assert current.get(key) in (None, member_id)
        members = apply_round(members, result)
        if not result.withheld:
            break
    assert result.withheld == ()
    # the settled assignment gives every claimed partition to its best claimant
    owners = owners_of(result)
    for topic, n in counts.items():
        for partition in range(n):
            best = best_claimant(members, topic, partition)
            if best is not None:
                assert owners[(topic, partition)] == best.member_id


# -- what the leader trusts (the Java assignor's rule, client-assignor/) ----------------------


def test_a_claim_above_the_leaders_own_epoch_counts_as_none() -> None:
    members = [
        view("a", claim=Claim(3, {"t": (0,)})),
        view("b", claim=Claim(3, {"t": (1,)})),
        view("rogue", claim=Claim(2**63 - 1, {"t": (0, 1, 2, 3)})),
    ]
    checked = trusted(members, leader_epoch=3)
    assert checked.untrusted_claims == (("rogue", 2**63 - 1),)
    result = compose(checked.members, {"t": 4}, cooperative=True)
    owners = owners_of(result)
    assert owners[("t", 0)] == "a" and owners[("t", 1)] == "b"
    # the rogue gets at most what nobody claims, through the fallback, never a claimed partition
    assert set(result.assignment["rogue"].get("t", [])) <= {2, 3}
    assert result.epoch == 3


def test_without_a_document_the_leader_trusts_no_claim() -> None:
    members = [view("a", claim=Claim(1, {"t": (0, 1)})), view("b")]
    checked = trusted(members, leader_epoch=NO_EPOCH)
    assert [m.claim for m in checked.members] == [None, None]
    assert checked.untrusted_claims == (("a", 1),)


def test_a_recreated_policy_at_epoch_one_overrides_the_old_incarnations_higher_claims() -> None:
    """The leader reads the new incarnation's document (epoch 1); a member still on the deleted
    policy's epoch 40 wins nothing with it."""
    members = [
        view("leader", claim=Claim(1, {"t": (0, 1)})),
        view("behind", claim=Claim(40, {"t": (0, 1, 2)})),
    ]
    result = compose(trusted(members, leader_epoch=1).members, {"t": 3}, cooperative=False)
    assert result.assignment["leader"] == {"t": [0, 1]}
    assert result.assignment["behind"] == {"t": [2]}


def test_a_claim_of_another_incarnation_counts_as_none_at_any_epoch() -> None:
    """After the policy is recreated, a member still on the old incarnation's document claims at
    or below the new epoch: it is first in the tie order (instance "a"), yet wins nothing."""
    members = [
        view("a", claim=Claim(2, {"t": (0, 1, 2, 3)}, "uid-old")),
        view("b", claim=Claim(2, {"t": (0, 1)}, "uid-new")),
        view("c", claim=Claim(1, {"t": (2, 3)}, "uid-new")),
    ]
    checked = trusted(members, leader_epoch=2, leader_policy="uid-new")
    assert checked.other_incarnation_claims == (("a", 2, "uid-old"),)
    assert checked.untrusted_claims == ()
    assert [m.claim is None for m in checked.members] == [True, False, False]
    result = compose(checked.members, {"t": 4}, cooperative=True)
    assert result.assignment == {"a": {}, "b": {"t": [0, 1]}, "c": {"t": [2, 3]}}
    # without the incarnation, "a" would take every partition (same epoch, first instance id)
    unchecked = compose(trusted(members, leader_epoch=2).members, {"t": 4}, cooperative=True)
    assert unchecked.assignment["a"] == {"t": [0, 1, 2, 3]}


def test_a_claim_naming_no_incarnation_is_judged_by_its_epoch_alone() -> None:
    """A member of an older version names no incarnation: kept up to the leader's epoch, as a
    document that names none is taken as the same incarnation."""
    members = [
        view("legacy", claim=Claim(2, {"t": (0,)})),
        view("legacy-huge", claim=Claim(3, {"t": (1,)})),
        view("new", claim=Claim(2, {"t": (1,)}, "uid-new")),
    ]
    checked = trusted(members, leader_epoch=2, leader_policy="uid-new")
    assert [m.claim is not None for m in checked.members] == [True, False, True]
    assert checked.untrusted_claims == (("legacy-huge", 3),)
    assert checked.other_incarnation_claims == ()


def test_a_leader_whose_document_names_no_incarnation_judges_by_epoch_alone() -> None:
    members = [
        view("a", claim=Claim(2, {"t": (0,)}, "uid-x")),
        view("b", claim=Claim(3, {"t": (1,)}, "uid-y")),
    ]
    checked = trusted(members, leader_epoch=2)
    assert [m.claim is not None for m in checked.members] == [True, False]
    assert checked.untrusted_claims == (("b", 3),)
    assert checked.other_incarnation_claims == ()


def test_a_claim_of_another_incarnation_above_the_epoch_is_reported_once() -> None:
    members = [view("a", claim=Claim(9, {"t": (0,)}, "uid-old"))]
    checked = trusted(members, leader_epoch=1, leader_policy="uid-new")
    assert checked.other_incarnation_claims == (("a", 9, "uid-old"),)
    assert checked.untrusted_claims == ()


def test_owned_partitions_count_only_from_the_current_generation() -> None:
    members = [
        MemberView("a", "a", ("t",), Claim(2, {"t": (0,)}), {"t": [0]}, generation=7),
        # a member still reporting the partitions of generation 5 (it lost its membership)
        MemberView("old", "old", ("t",), Claim(2, {"t": (1,)}), {"t": [0, 2]}, generation=5),
        # kafka-python's subscription v1 reports no generation: its owned partitions count
        MemberView("v1", "v1", ("t",), None, {"t": [3]}),
    ]
    checked = trusted(members, leader_epoch=2)
    assert checked.stale_owners == ("old",)
    assert [dict(m.owned) for m in checked.members] == [{"t": [0]}, {}, {"t": [3]}]
    result = compose(checked.members, {"t": 4}, cooperative=True)
    # the stale owner's report does not hold back partition 0 nor 2; v1's partition 3 stays put
    assert result.withheld == ()
    assert result.assignment["v1"] == {"t": [3]}


def test_trusted_keeps_members_unchanged_when_all_is_in_bounds() -> None:
    members = [view("a", claim=Claim(2, {"t": (0,)})), view("b", claim=Claim(1, {"t": (1,)}))]
    checked = trusted(members, leader_epoch=2)
    assert checked.members == tuple(members)
    assert checked.untrusted_claims == () and checked.stale_owners == ()
