"""The leader's composition: the group assignment from the members' claims (pure, no I/O).

Every member puts its own document's `{epoch, partitions}` in its subscription (its claim). The
group leader sees all claims at once, but members refresh their documents at different moments, so
some claims are a plan behind. The rule:

- per partition, the present claimant with the highest epoch that subscribes to the topic wins
  (ties: the lower instance id, then member id), so a fresher plan always overrides a stale one
  and no partition is given twice; a claim of a partition that does not exist is ignored;
- partitions no present member claims (the operator is down, a pod is gone, a topic grew) go
  out by the project's `cooperative-sticky` planner among present members, sticky to their
  current owners, so the group keeps consuming without the operator;
- cooperative (KIP-429): a partition currently owned by another present member is withheld this
  round; its owner sees it revoked, rejoins, and the next round grants it once nobody owns it.

Before composing, the leader trusts the plan, not the claims (`trusted`, the Java assignor's
rule): a claim of another policy incarnation than the leader's own document's, or above that
document's epoch, counts as no claim, and owned partitions count only from members of the group's
current generation (or from members that report no generation, such as kafka-python's
subscription v1).

This runs on the Kafka client's network thread, inside the JoinGroup handling: it must stay fast.
The claimed part is linear in partitions; the planner runs only when something is unclaimed, and
only over the unclaimed partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafka_rebalance_assignors import MemberRequest, PlanRequest, plan_request
from kafka_rebalance_common.assignment import WireAssignment
from kafka_rebalance_common.wire.user_data import NO_EPOCH, Claim

NO_GENERATION = -1  # a subscription before v2 (KIP-792) reports no generation
FALLBACK_STRATEGY = "cooperative-sticky"
# Placed in the owner table for a partition held back this round (never equal to a member id).
_WITHHELD: str = "\x00withheld"
_PINNED_PREFIX = "claimed by "  # the fallback's private topic per member (see _fallback)


@dataclass(frozen=True)
class MemberView:
    """One member as the leader sees it in JoinGroup."""

    member_id: str
    instance_id: str | None
    topics: Iterable[str]
    claim: Claim | None = None
    owned: Mapping[str, Iterable[int]] = field(default_factory=dict)
    generation: int = NO_GENERATION  # the member's generation as its subscription says


@dataclass(frozen=True)
class Trusted:
    """The members as the leader composes from them, and what it set aside."""

    members: tuple[MemberView, ...]
    untrusted_claims: tuple[tuple[str, int], ...]  # (member id, claimed epoch) treated as none
    stale_owners: tuple[str, ...]  # members whose owned partitions were not counted
    # (member id, claimed epoch, the claim's incarnation) treated as none: another incarnation
    other_incarnation_claims: tuple[tuple[str, int, str], ...] = ()


def trusted(members: Sequence[MemberView], leader_epoch: int, leader_policy: str = "") -> Trusted:
    """The members with only what the leader may believe, `leader_epoch` and `leader_policy`
    being the epoch and incarnation (`policyUid`, "" when it names none) of the leader's own
    document (NO_EPOCH when it has none, so then no claim is kept).

    Invariants:
    - no claim kept is above `leader_epoch`, so a member claiming a huge epoch wins nothing;
    - no claim kept names an incarnation other than `leader_policy` when both name one, so after
      a policy is recreated (a new incarnation, epochs starting again at 1) a member still on the
      old incarnation's document wins nothing with it, whatever its epoch. A claim that names
      none, or a leader whose document names none, is judged by the epoch alone: "not said" is
      the same incarnation, as for documents (`AssignmentDocument.same_incarnation`), so members
      of a version that sends no incarnation keep their plan through a rolling upgrade. Such a
      claim of an old incarnation at or below the leader's epoch still counts; the check covers
      every member that names its incarnation;
    - owned partitions are kept only from members of the current generation (the highest any
      member reports) or from members reporting none.

    A claim set aside is reported in `untrusted_claims` (above the epoch) or
    `other_incarnation_claims` (another incarnation), never in both."""
    current = max((m.generation for m in members), default=NO_GENERATION)
    kept: list[MemberView] = []
    untrusted: list[tuple[str, int]] = []
    other: list[tuple[str, int, str]] = []
    stale: list[str] = []
    for view in members:
        claim, owned = view.claim, view.owned
        if claim is not None and leader_policy and claim.policy and claim.policy != leader_policy:
            other.append((view.member_id, claim.epoch, claim.policy))
            claim = None
        elif claim is not None and claim.epoch > leader_epoch:
            untrusted.append((view.member_id, claim.epoch))
            claim = None
        if view.generation >= 0 and view.generation != current:
            if any(True for parts in owned.values() for _ in parts):
                stale.append(view.member_id)
            owned = {}
        if claim is view.claim and owned is view.owned:
            kept.append(view)
        else:
            kept.append(
                MemberView(
                    view.member_id, view.instance_id, view.topics, claim, owned, view.generation
                )
            )
    return Trusted(tuple(kept), tuple(untrusted), tuple(stale), tuple(other))


@dataclass(frozen=True)
class Composition:
    # member id -> topic -> sorted partitions; every member present (possibly {})
    assignment: WireAssignment  # filled here, encoded into the group protocol's assignments
    epoch: int  # the highest claim epoch that placed a partition (NO_EPOCH: none did)
    fallback_partitions: int  # partitions placed by the fallback planner
    withheld: tuple[tuple[str, int], ...]  # held back for the cooperative second round
    claimed_partitions: int = 0  # partitions placed by a claim
    ignored_claims: int = 0  # claimed partitions that do not exist or are not subscribed


def _claim_key(view: MemberView) -> tuple[int, int, str, str]:
    """Sort key: better claimants first (higher epoch, then lower instance id, then member id;
    static members before dynamic ones at the same epoch)."""
    epoch = view.claim.epoch if view.claim is not None else NO_EPOCH
    instance = view.instance_id
    return (-epoch, 0 if instance is not None else 1, instance or "", view.member_id)


def _place_claims(
    members: Sequence[MemberView],
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, frozenset[str]],
) -> tuple[dict[str, list[str | None]], int, int]:
    """Owner table (topic -> member per partition) from the claims: claimants are visited best
    first and a partition keeps its first claimant, so each claimed partition is looked at once
    per claim. Returns (table, highest epoch that placed something, ignored claim count)."""
    table: dict[str, list[str | None]] = {t: [None] * n for t, n in partitions_per_topic.items()}
    epoch, ignored = NO_EPOCH, 0
    for view in sorted((m for m in members if m.claim is not None), key=_claim_key):
        claim = view.claim
        assert claim is not None
        subscribed = subscriptions[view.member_id]
        for topic, parts in claim.partitions.items():
            owners = table.get(topic)
            if owners is None or topic not in subscribed:
                ignored += len(parts)
                continue
            count, member_id, placed = len(owners), view.member_id, False
            for partition in parts:
                if not 0 <= partition < count:
                    ignored += 1
                elif owners[partition] is None:
                    owners[partition] = member_id
                    placed = True
            if placed and claim.epoch > epoch:
                epoch = claim.epoch
    return table, epoch, ignored


def _fallback(
    members: Sequence[MemberView],
    table: dict[str, list[str | None]],
    subscriptions: Mapping[str, frozenset[str]],
) -> int:
    """Fill the unowned partitions of subscribed topics in `table` with the cooperative-sticky
    planner. The planner sees the unclaimed partitions renumbered 0..k-1 per topic, plus, per
    member, a private topic holding as many partitions as its claims placed (only that member
    subscribes to it and owns all of it): claims can never move, yet the planner balances the
    members' total counts, so the partitions of a vanished pod go to the least loaded members.
    Runs only when something is unclaimed (a pod gone, the operator down, a topic grown)."""
    subscribed_topics = set().union(*subscriptions.values()) if subscriptions else set()
    free: dict[str, list[int]] = {}  # topic -> real partition per virtual index
    for topic in sorted(subscribed_topics):
        owners = table.get(topic)
        if owners is None:
            continue
        unowned = [p for p, owner in enumerate(owners) if owner is None]
        if unowned:
            free[topic] = unowned
    if not free:
        return 0
    virtual = {topic: {p: i for i, p in enumerate(parts)} for topic, parts in free.items()}
    claimed_count: dict[str, int] = {}
    for owners in table.values():
        for owner in owners:
            if owner is not None:
                claimed_count[owner] = claimed_count.get(owner, 0) + 1
    request_topics = {topic: len(parts) for topic, parts in free.items()}
    request_members: dict[str, MemberRequest] = {}
    for view in members:
        owned = {}
        for topic, parts in view.owned.items():
            virtual_of = virtual.get(topic)
            if virtual_of is not None:
                kept = sorted(virtual_of[p] for p in parts if p in virtual_of)
                if kept:
                    owned[topic] = kept
        topics = sorted(subscriptions[view.member_id].intersection(free))
        pinned = claimed_count.get(view.member_id, 0)
        if pinned:
            # A space is not allowed in Kafka topic names: no clash with a real topic.
            private = _PINNED_PREFIX + view.member_id
            request_topics[private] = pinned
            topics.append(private)
            owned[private] = list(range(pinned))
        request_members[view.member_id] = MemberRequest(topics=topics, owned=owned)
    result = plan_request(
        PlanRequest(topics=request_topics, members=request_members, strategy=FALLBACK_STRATEGY)
    )
    placed = 0
    for member_id, assigned in result.assignment.items():
        for topic, indexes in assigned.items():
            if topic not in free:
                continue  # the member's own claimed partitions, which stay where they are
            owners, parts = table[topic], free[topic]
            for index in indexes:
                owners[parts[index]] = member_id
            placed += len(indexes)
    return placed


def _withhold(members: Sequence[MemberView], table: dict[str, list[str | None]]) -> set[str]:
    """KIP-429: take out of `table` every partition that a present member other than its new
    owner says it owns now (that member revokes it first; the next round grants it). One pass
    over the members' owned partitions. Returns the topics that lost a partition."""
    touched: set[str] = set()
    for view in members:
        member_id = view.member_id
        for topic, parts in view.owned.items():
            owners = table.get(topic)
            if owners is None:
                continue
            count = len(owners)
            for partition in parts:
                if 0 <= partition < count:
                    target = owners[partition]
                    if target is not None and target is not _WITHHELD and target != member_id:
                        owners[partition] = _WITHHELD
                        touched.add(topic)
    return touched


def compose(
    members: Sequence[MemberView],
    partitions_per_topic: Mapping[str, int],
    *,
    cooperative: bool,
) -> Composition:
    """The group assignment for `members` (see the module docstring for the rule).

    `partitions_per_topic`: topic -> partition count for the topics the leader has metadata for;
    a subscription to a topic missing here gets nothing from it.
    """
    known = partitions_per_topic.keys()
    subscriptions = {m.member_id: frozenset(m.topics).intersection(known) for m in members}
    table, epoch, ignored = _place_claims(members, partitions_per_topic, subscriptions)
    claimed = sum(len(owners) - owners.count(None) for owners in table.values())
    fallback = _fallback(members, table, subscriptions)
    touched = _withhold(members, table) if cooperative else set()

    assignment: WireAssignment = {m.member_id: {} for m in members}
    withheld: list[tuple[str, int]] = []
    for topic in sorted(table):
        owners = table[topic]
        if topic in touched:
            withheld.extend((topic, p) for p, owner in enumerate(owners) if owner is _WITHHELD)
        for partition, member_id in enumerate(owners):
            if member_id is not None and member_id is not _WITHHELD:
                topics = assignment[member_id]
                if topic in topics:
                    topics[topic].append(partition)
                else:
                    topics[topic] = [partition]
    return Composition(
        assignment=assignment,
        epoch=epoch,
        fallback_partitions=fallback,
        withheld=tuple(withheld),
        claimed_partitions=claimed,
        ignored_claims=ignored,
    )
