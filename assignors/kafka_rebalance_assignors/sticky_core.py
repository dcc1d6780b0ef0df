"""The computation shared by `sticky` and `cooperative-sticky`: KIP-54 balance and stickiness
with the KIP-341 generation rule, fast enough for Kafka's 1,000,000-partition budgets in Python.

Goals, in Kafka's order of precedence (StickyAssignor javadoc, KIP-54):

1. Balance. Either all members' partition counts differ by at most one, or no member with two or
   more fewer partitions than another could legally take one of that other's partitions (it does
   not subscribe to any topic the other holds). Equivalently: for every topic t,
   max(count of members holding t) - min(count of members subscribing to t) <= 1.
2. Stickiness. Keep as many previously owned partitions where they are as balance allows, and
   never move partitions of one topic around a cycle (A->B and B->A), which Kafka's `isSticky`
   check forbids.

Ownership (KIP-341). Claims come from `Member.claimed` with `Member.generation` (None counts as
-1). The highest generation wins a conflicting claim; a tie at the top leaves the partition unowned.
`claims_resolution` gives the same owners as `model.resolve_ownership` (a property test holds it to
that) but first checks, with one set of global partition numbers, whether any partition is claimed
twice at all; only topics whose claims really overlap are resolved partition by partition. It also
reports the runner-up, the unique claimant of the next lower generation, which is the "previous
owner" KIP-341 moves a partition back to when balance allows.

Identical subscriptions (the KAFKA-9987 constrained algorithm). With P partitions and C members,
minQuota = P // C, maxQuota = ceil(P / C), and P % C members may end at maxQuota.
  * Retention, members in id order: a member owning fewer than minQuota keeps everything; one owning
    maxQuota or more keeps maxQuota while maxQuota slots remain, else minQuota. When it must drop
    some, it keeps them in (partition, topic) order (KAFKA-16277: spreads each topic evenly), except
    that partitions whose previous-generation owner is short of minQuota are dropped first so they
    can go home.
  * Fill: the unassigned sequence is the partitions nobody owned, in (topic, partition) order
    (those whose previous-generation owner is short of minQuota go back to it first), followed by
    the partitions revoked above, in the same order. Each goes to the least loaded member (ties by
    member id) until everyone has minQuota; the P % C remainder goes one each to members at
    minQuota in id order. This is the greedy of KIP-54's first worked example, and it deals each
    topic round-robin, so members get near-even shares of every topic (KAFKA-16277's test).
    Dealing revoked partitions last makes the plan stable under the cooperative protocol: once
    round one has handed out the target minus the transfers, the only unowned partitions are the
    revoked ones, the counts are those reached before they were dealt, and the memoryless rule
    gives each to the same member again (a property test checks round two reproduces the target).
    The fill is computed in "phases": while the set of least loaded members is unchanged, member
    j of k gets positions j, j+k, j+2k... of the sequence, so a phase costs one list slice per
    (topic, member), stored with C-level `map` calls, instead of one step per partition.
  Result: fully balanced (sizes within one) and maximally sticky (every member keeps
  min(owned, its cap), and no partition can return to an owner already at its cap).

General subscriptions (own design, same invariants as Kafka's GeneralAssignmentBuilder):
  1. Every owned partition of a still-subscribed topic stays where it is (as Kafka does).
  2. Greedy: topics with fewer subscribers first (ties by name); each topic's unassigned partitions
     are water-filled onto its least loaded subscribers (ties by id), which is exactly what giving
     the partitions one by one to the least loaded subscriber does, in one sort per topic.
  3. KIP-341 move-back: a partition whose previous-generation owner subscribes and has two or more
     fewer partitions than its current owner goes back to it (Kafka's first reassignment rule).
  4. Balancing passes until a whole pass moves nothing: for each topic with two or more
     subscribers, while (most loaded holder of t) - (least loaded subscriber of t) >= 2, move one
     partition of t from the former to the latter, taking partitions granted in this round before
     previously owned ones (moving a fresh grant costs no stickiness). Every move lowers the sum of
     squared counts, so the loop ends, and it ends exactly at Kafka's balance condition above.
     Kafka instead re-scans all partitions with an `isBalanced` test per step and can be
     super-quadratic; here a pass costs one `min` per topic when nothing is left to do.
     When the most loaded holder of t would have to give up a partition it owned before, a
     holder of a fresh grant of t that is loaded enough is asked instead.
  5. Repair: for each owned partition the balancing moved, try giving it back to its owner and
     letting the owner pass one of its fresh grants to the least loaded subscriber of that
     grant's topic; kept when the balance rule still holds (one move saved each time). Skipped
     when more than 500 partitions moved, since every attempt re-checks the topics involved.
  6. Cycle cancelling: per topic, if moved partitions form a cycle of owners (A->B, B->A, or
     longer), every partition on the cycle goes back to its owner. Counts and the set of topics
     each member holds are unchanged, so balance is kept, and stickiness strictly improves; the
     result never has the A->B / B->A churn Kafka's `isSticky` check looks for.

  State is member-major (the output's shape) with a separate record of this round's grants, so an
  almost unchanged group is not transposed back and forth. On the general path the cooperative
  protocol converges (Kafka's criterion: no round revokes and grants the same partition, settled
  within four rounds; property-tested) but round two need not reproduce the first target exactly,
  as with Kafka.

Speed notes: no per-partition objects beyond the output lists themselves, per-topic work done with
slices, `map`, `filterfalse` and `accumulate`, and Python's cyclic garbage collector paused while
the million small lists are built (see `collector_paused`).

Output partition lists are not sorted (the plan contract's `plan` normalises them); members that
get nothing may be absent. Everything is deterministic for the same input.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, chain, compress, filterfalse, repeat
from operator import add, floordiv, mod, mul, not_, sub

from kafka_rebalance_assignors.collector import collector_paused
from kafka_rebalance_assignors.model import Assignment, Group

# Per member (by index in id order): topic -> partitions it still owns after KIP-341 resolution.
Owned = list[dict[str, Sequence[int]]]
# topic -> partition -> member index of the previous-generation owner (KIP-341 runner-up).
Previous = dict[str, dict[int, int]]


# --------------------------------------------------------------------------- ownership


def claims_resolution(group: Group) -> tuple[Owned, Previous, set[int] | None]:
    """Resolve conflicting claims per topic (highest generation wins, a top tie leaves the
    partition unowned) and record each contested partition's previous-generation owner.

    The usual case, no partition claimed twice, is recognised with one C-level set of global
    partition numbers and returns the members' own claim mappings untouched; only when some
    partition is claimed twice are the contested topics resolved partition by partition.
    The third result is that set of global partition numbers (see `_offsets`) when there was no
    conflict, None otherwise."""
    members = list(group.members.values())
    offsets = _offsets(group)
    seen: set[int] = set()
    total = 0
    for member in members:
        claimed = member.claimed
        if claimed:
            total += sum(map(len, claimed.values()))
            _collect(seen, claimed, offsets)
    if len(seen) == total:
        return [member.claimed for member in members], {}, seen

    owned: Owned = [{} for _ in members]
    by_topic: dict[str, list[tuple[int, int, Sequence[int]]]] = {}
    for index, member in enumerate(members):
        generation = -1 if member.generation is None else member.generation
        for topic, partitions in member.claimed.items():
            if partitions:
                by_topic.setdefault(topic, []).append((generation, index, partitions))
    previous: Previous = {}
    for topic, claims in by_topic.items():
        if len(claims) == 1 or sum(len(c[2]) for c in claims) == len(
            set().union(*(c[2] for c in claims))
        ):
            for _, index, partitions in claims:  # disjoint claims: nothing to resolve
                owned[index][topic] = partitions
            continue
        _resolve_topic(topic, claims, owned, previous)
    return owned, previous, None


def _offsets(group: Group) -> dict[str, int]:
    """Topic -> number of its partition 0 when all partitions are numbered in topic order."""
    offsets: dict[str, int] = {}
    start = 0
    for topic, count in group.topics.items():
        offsets[topic] = start
        start += count
    return offsets


def _collect(
    numbers: set[int], mapping: Mapping[str, Sequence[int]], offsets: dict[str, int]
) -> None:
    """Add the global partition numbers of a topic -> partitions mapping to `numbers`. (A plain
    loop: measured faster than chaining iterator objects when most lists are short.)"""
    add_number = numbers.add
    for topic, partitions in mapping.items():
        start = offsets[topic]
        for p in partitions:
            add_number(start + p)


def _discard(
    numbers: set[int], mapping: Mapping[str, Sequence[int]], offsets: dict[str, int]
) -> None:
    for topic, partitions in mapping.items():
        start = offsets[topic]
        for p in partitions:
            numbers.discard(start + p)


def _resolve_topic(
    topic: str, claims: list[tuple[int, int, Sequence[int]]], owned: Owned, previous: Previous
) -> None:
    claimants: dict[int, list[tuple[int, int]]] = {}
    for generation, index, partitions in claims:
        for partition in partitions:
            claimants.setdefault(partition, []).append((generation, index))
    won: dict[int, list[int]] = {}
    runner_up: dict[int, int] = {}
    for partition, contenders in claimants.items():
        if len(contenders) == 1:
            won.setdefault(contenders[0][1], []).append(partition)
            continue
        contenders.sort(key=lambda c: -c[0])
        top = contenders[0][0]
        if contenders[1][0] != top:
            won.setdefault(contenders[0][1], []).append(partition)
        lower = [c for c in contenders if c[0] < top]
        if lower and (len(lower) == 1 or lower[1][0] != lower[0][0]):
            runner_up[partition] = lower[0][1]
    for index, partitions in won.items():
        partitions.sort()
        owned[index][topic] = partitions
    if runner_up:
        previous[topic] = runner_up


def partition_numbers(counts: Iterable[int]) -> list[int]:
    """0 .. the largest count - 1, once: every topic's partition lists are slices of it and so
    share its int objects (at 1M partitions, not allocating 870,000 ints is measurable)."""
    return list(range(max(counts, default=0)))


def free_partitions(numbers: list[int], count: int, start: int, taken: set[int]) -> list[int]:
    """The partitions of a topic (partition 0 at global number `start`) whose global numbers
    are not in `taken`, ascending, as shared ints from `numbers`."""
    return list(
        compress(numbers[:count], map(not_, map(taken.__contains__, range(start, start + count))))
    )


# --------------------------------------------------------------------------- entry point


def sticky_assignment(group: Group) -> Assignment:
    """The KIP-54 target assignment: constrained path for identical subscriptions, else general."""
    if not group.members:
        return {}
    with collector_paused():
        owned, previous, claimed = claims_resolution(group)
        if group.subscriptions_identical():
            return _constrained(group, owned, previous, claimed)
        return _general(group, owned, previous, claimed)


# --------------------------------------------------------------------------- constrained path


def _add(target: dict[str, list[int]], topic: str, piece: list[int]) -> None:
    current = target.get(topic)
    if current is None:
        target[topic] = piece
    elif type(current) is tuple:  # a shared single from `_Dealer._deal_columns`: never mutate
        target[topic] = [*current, *piece]
    else:
        current.extend(piece)


def _constrained(
    group: Group, owned: Owned, previous: Previous, claimed: set[int] | None
) -> Assignment:
    """The KAFKA-9987 path. `claimed`: global numbers of all claims when none conflicted (it is
    consumed: partitions not kept are removed from it)."""
    member_ids = list(group.members)
    size = len(member_ids)
    topics = next(iter(group.members.values())).topics
    if not topics:
        return {member_id: {} for member_id in member_ids}
    topic_index = {topic: i for i, topic in enumerate(topics)}
    total = sum(group.topics[t] for t in topics)
    min_quota, extra = divmod(total, size)
    max_quota = min_quota + 1 if extra else min_quota

    # Retention.
    offsets = _offsets(group)
    taken: set[int] = claimed if claimed is not None else set()
    subscribed = topic_index.keys()
    trimmed = []
    for mine in owned:
        if mine and not mine.keys() <= subscribed:
            dropped = {t: mine[t] for t in mine if t not in subscribed}
            if claimed is not None:
                _discard(taken, dropped, offsets)
            mine = {t: mine[t] for t in mine if t in subscribed}
        trimmed.append(mine)
    owned = trimmed
    owned_counts = [sum(map(len, mine.values())) for mine in owned]
    kept: list[dict[str, list[int]]] = []
    counts = [0] * size
    max_slots_used = 0
    revoked: dict[str, list[int]] = {}  # owned partitions given up to meet the quota
    for index, mine in enumerate(owned):
        held = owned_counts[index]
        cap = held
        if held > min_quota:
            if extra and held >= max_quota and max_slots_used < extra:
                cap = max_quota
                max_slots_used += 1
            else:
                cap = min_quota
        if held > cap:
            keep = _keep_first(mine, cap, topic_index, previous, owned_counts, min_quota)
            if claimed is not None:
                _discard(taken, mine, offsets)
                _collect(taken, keep, offsets)
            for topic, partitions in mine.items():
                given_up = set(partitions).difference(keep.get(topic, ()))
                if given_up:
                    revoked.setdefault(topic, []).extend(given_up)
            mine = keep
        kept.append(dict(zip(mine.keys(), map(list, mine.values()), strict=True)))
        counts[index] = min(held, cap)
    if claimed is None:
        for mine in kept:
            _collect(taken, mine, offsets)

    # Unassigned partitions, topic by topic in name order (global numbers: see _offsets): first
    # those nobody owned, then those revoked above. Dealing the revoked ones last makes the plan
    # stable under the cooperative protocol: after round one (target minus transfers) the only
    # unowned partitions are exactly the revoked ones, the fill starts from the same counts, and
    # the memoryless least-loaded rule hands each to the same member again.
    held_topics: set[str] = set()  # topics some member keeps partitions of
    segments: list[tuple[str, list[int]]] = []
    numbers = partition_numbers(group.topics[t] for t in topics)
    for topic in topics:
        count = group.topics[topic]
        if taken:
            free = free_partitions(numbers, count, offsets[topic], taken)
            if len(free) < count:
                held_topics.add(topic)
        else:
            free = numbers[:count]
        given_up = revoked.get(topic)
        if given_up:
            free = list(filterfalse(set(given_up).__contains__, free))
            held_topics.add(topic)
        if previous.get(topic) and free:
            free = _return_to_previous(topic, free, previous[topic], kept, counts, min_quota)
            held_topics.add(topic)  # the dealer must merge into this topic from now on
        if free:
            segments.append((topic, free))
    segments.extend((topic, sorted(revoked[topic])) for topic in topics if topic in revoked)

    # Fill: least loaded first, ties by id, in phases of identical rounds.
    remaining = sum(len(free) for _, free in segments)
    dealer = _Dealer(segments, kept, held_topics, numbers)
    order = sorted(range(size), key=counts.__getitem__)  # stable: ties stay in id order
    active: list[int] = []
    next_member = 0
    level = counts[order[0]]
    while remaining > 0:
        joining = []
        while next_member < size and counts[order[next_member]] == level:
            joining.append(order[next_member])
            next_member += 1
        if joining:
            active = sorted(active + joining)
        if level < min_quota:
            ceiling = counts[order[next_member]] if next_member < size else min_quota
            rounds = min(ceiling, min_quota) - level
            dealer.deal(active, rounds)
            remaining -= len(active) * rounds
            level += rounds
        else:  # everyone is at minQuota: the remainder goes one each, in id order
            if remaining > len(active):
                raise AssertionError("constrained fill: more leftovers than maxQuota slots")
            dealer.deal(active[:remaining], 1)
            remaining = 0
    if remaining < 0:
        raise AssertionError("constrained fill: quota accounting went negative")
    return dict(zip(member_ids, kept, strict=True))


def _keep_first(
    mine: dict[str, Sequence[int]],
    cap: int,
    topic_index: dict[str, int],
    previous: Previous,
    owned_counts: list[int],
    min_quota: int,
) -> dict[str, Sequence[int]]:
    """The `cap` partitions a member over its quota keeps: (partition, topic) order, except that
    partitions whose previous-generation owner is short of minQuota are given up first."""
    width = len(topic_index)
    keys: list[int] = []
    homeless_rank = 1 << 62
    for topic, partitions in mine.items():
        t = topic_index[topic]
        back = previous.get(topic)
        for p in partitions:
            key = p * width + t
            if back is not None:
                owner = back.get(p)
                if owner is not None and owned_counts[owner] < min_quota:
                    key += homeless_rank
            keys.append(key)
    keys.sort()
    names = list(topic_index)
    result: dict[str, list[int]] = {}
    for key in keys[:cap]:
        p, t = divmod(key % homeless_rank, width)
        result.setdefault(names[t], []).append(p)
    return result  # type: ignore[return-value]


def _return_to_previous(
    topic: str,
    free: list[int],
    back: dict[int, int],
    kept: list[dict[str, list[int]]],
    counts: list[int],
    min_quota: int,
) -> list[int]:
    still_free = []
    for p in free:
        owner = back.get(p)
        if owner is not None and counts[owner] < min_quota:
            _add(kept[owner], topic, [p])
            counts[owner] += 1
        else:
            still_free.append(p)
    return still_free


class _Dealer:
    """Hands out the unassigned sequence (concatenated topic segments) round by round.

    Within one segment each receiving member gets exactly one extended slice, so when no member
    holds the topic yet the slices are stored with C-level `map` calls; only topics some member
    already holds need a per-member merge."""

    def __init__(
        self,
        segments: list[tuple[str, list[int]]],
        result: list[dict],
        held: set[str],
        numbers: list[int],
    ) -> None:
        self.segments = segments
        self.result = result
        self.held = held  # topics some member already has partitions of
        self.numbers = numbers  # the shared 0..n-1 (see `partition_numbers`)
        self.segment = 0
        self.offset = 0
        self._singles: list[tuple[int]] | None = None

    def deal(self, members: list[int], rounds: int) -> None:
        """Each of `members` (in this order) gets one partition per round, `rounds` times."""
        if self._deal_columns(members, rounds):
            return
        width = len(members)
        total = width * rounds
        dealt = 0
        result = self.result
        while dealt < total:
            topic, free = self.segments[self.segment]
            start = self.offset
            take = min(len(free) - start, total - dealt)
            stop = start + take
            receivers = min(width, take)
            shift = dealt % width
            order = members[shift:] + members[:shift] if shift else members
            if take <= width:  # one partition each: one-element lists, no slice objects
                pieces = map(list, zip(free[start:stop]))
            else:
                pieces = map(
                    free.__getitem__,
                    map(slice, range(start, start + receivers), repeat(stop), repeat(width)),
                )
            targets = map(result.__getitem__, order[:receivers])
            if topic in self.held:
                for target, piece in zip(targets, pieces, strict=True):
                    _add(target, topic, piece)
            else:
                deque(map(dict.__setitem__, targets, repeat(topic), pieces), maxlen=0)
                self.held.add(topic)
            dealt += take
            if stop == len(free):
                self.segment += 1
                self.offset = 0
            else:
                self.offset = stop

    def _deal_columns(self, members: list[int], rounds: int) -> bool:
        """`deal` member by member instead of topic by topic, when every topic this call reaches
        is new to every member and no topic gives any member more than one partition (each
        segment dealt here is no longer than the round): the fresh identical-subscription case,
        where the result is one one-partition list per (member, topic), a million at Kafka's
        scale. Position k of the dealt sequence goes to members[k % width], so member j's share
        is the strided slice [j::width] of the concatenated segments: each member's dict is
        then extended in one C-level update, in the same topic order the segment-by-segment
        deal would insert. Each one-partition entry is a shared, immutable 1-tuple rather than a
        new list: at that scale the million small lists (and the collector's later scan of them)
        were most of the assignment's cost, where Kafka's Java side only stores references to
        TopicPartition objects it already has. Strategy results are read-only (see
        `assignors.registry`); `plan` copies them into sorted lists. False (nothing done) when
        the case does not apply."""
        if self.offset:
            return False
        width = len(members)
        need = width * rounds
        reached: list[tuple[str, list[int], int]] = []
        index = self.segment
        while need > 0:
            topic, free = self.segments[index]
            take = min(len(free), need)
            if topic in self.held or take > width:
                return False
            reached.append((topic, free, take))
            need -= take
            index += 1
        partitions = list(chain.from_iterable(free[:take] for _, free, take in reached))
        topics = list(chain.from_iterable(repeat(topic, take) for topic, _, take in reached))
        if self._singles is None:
            self._singles = list(zip(self.numbers))
        single = self._singles.__getitem__
        result = self.result
        first = topics[0::width]
        template = dict.fromkeys(first)
        for j, member in enumerate(members):
            keys = topics[j::width]
            target = result[member]
            if not target and keys == first:  # the usual case: a presized copy, no rehashing
                target = result[member] = template.copy()
            target.update(zip(keys, map(single, partitions[j::width]), strict=True))
        self.held.update(topic for topic, _, _ in reached)
        _, free, take = reached[-1]
        if take == len(free):
            self.segment = index
        else:
            self.segment, self.offset = index - 1, take
        return True


# --------------------------------------------------------------------------- general path


class _General:
    """Mutable state of one general-path computation, member-major (the output's own shape, so
    nothing is transposed): `kept[m]` holds the partitions member m owned before and still has,
    `grants[m]` those it received in this round (moving a grant again costs no stickiness)."""

    def __init__(
        self, group: Group, owned: Owned, previous: Previous, claimed: set[int] | None
    ) -> None:
        self.group = group
        self.member_ids = list(group.members)
        members = list(group.members.values())
        self.subscribers = subscribers_by_topic(group)
        self.previous = previous
        self.counts = [0] * len(members)
        self.kept: list[dict[str, list[int]]] = [{} for _ in members]
        self.grants: list[dict[str, list[int]]] = [{} for _ in members]
        self.origin: dict[tuple[str, int], int] = {}  # moved partition -> its owner before
        self.where: dict[tuple[str, int], int] = {}  # moved partition -> where it is now
        self.offsets = offsets = _offsets(group)
        subscription_sets: dict[tuple[str, ...], frozenset[str]] = {}
        for index, member in enumerate(members):
            mine = owned[index]
            if not mine:
                continue
            subscribed = subscription_sets.get(member.topics)
            if subscribed is None:
                subscribed = subscription_sets[member.topics] = frozenset(member.topics)
            if not mine.keys() <= subscribed:
                dropped = {t: mine[t] for t in mine if t not in subscribed}
                if claimed is not None:
                    _discard(claimed, dropped, offsets)
                mine = {t: mine[t] for t in mine if t in subscribed}
            self.kept[index] = dict(zip(mine.keys(), map(list, mine.values()), strict=True))
            self.counts[index] = sum(map(len, mine.values()))
        if claimed is None:  # conflicting claims: number what is kept now
            claimed = set()
            for mine in self.kept:
                _collect(claimed, mine, offsets)
        self.claimed = claimed  # global numbers of every kept partition

    def _holders(self, topic: str) -> set[int]:
        kept, grants = self.kept, self.grants
        return {m for m in self.subscribers[topic] if topic in kept[m] or topic in grants[m]}

    # -- step 2: greedy water-filling
    def place_unassigned(self) -> None:
        order = sorted(self.subscribers, key=lambda t: (len(self.subscribers[t]), t))
        claimed = self.claimed
        numbers = partition_numbers(self.group.topics[t] for t in order)
        for topic in order:
            count = self.group.topics[topic]
            if claimed:
                free = free_partitions(numbers, count, self.offsets[topic], claimed)
            else:
                free = numbers[:count]
            if free:
                self._water_fill(topic, free)

    def _water_fill(self, topic: str, free: list[int]) -> None:
        """Give `free` (all unassigned partitions of `topic`; called once per topic) to the
        least loaded subscribers."""
        subscribers = self.subscribers[topic]
        counts = self.counts
        if len(subscribers) == 1:
            only = subscribers[0]
            self.grants[only][topic] = free
            counts[only] += len(free)
            return
        width = len(self.member_ids)
        keys = list(
            map(add, map(mul, map(counts.__getitem__, subscribers), repeat(width)), subscribers)
        )
        amount = len(free)
        if amount < len(keys) // 8:  # few partitions: only the amount+1 least loaded matter
            keys = heapq.nsmallest(amount + 1, keys)
        else:
            keys.sort()
        size = len(keys)
        total = sum(map(floordiv, keys, repeat(width)))
        if size * (keys[-1] // width) - total <= amount:
            receivers, lifted = size, total  # everyone receives (the usual case)
        else:
            levels = list(map(floordiv, keys, repeat(width)))
            prefix = list(accumulate(levels))
            # Member j (in load order) receives iff lifting members 0..j-1 to its level costs at
            # most `amount`; that cost never decreases with j: binary search for the first that
            # does not.
            low, high = 1, size
            while low < high:
                middle = (low + high) // 2
                if middle * levels[middle] - prefix[middle - 1] <= amount:
                    low = middle + 1
                else:
                    high = middle
            receivers, lifted = low, prefix[low - 1]
        base, rest = divmod(amount + lifted, receivers)
        if receivers == size and len(keys) == len(subscribers):
            chosen = subscribers  # already in id order
        else:
            chosen = sorted(map(mod, keys[:receivers], repeat(width)))  # id order
        final = [base + 1] * rest + [base] * (receivers - rest)
        shares = list(map(sub, final, map(counts.__getitem__, chosen)))
        ends = list(accumulate(shares))
        pieces = map(
            free.__getitem__,
            map(slice, compress(chain((0,), ends), shares), compress(ends, shares)),
        )
        receiving = map(self.grants.__getitem__, compress(chosen, shares))
        deque(map(dict.__setitem__, receiving, repeat(topic), pieces), maxlen=0)
        deque(map(counts.__setitem__, chosen, final), maxlen=0)

    # -- moving one partition
    def _take(self, topic: str, donor: int, partition: int | None = None) -> int:
        """Remove a partition of `topic` from `donor`: the given one, else a fresh grant first."""
        grants = self.grants[donor]
        mine = grants.get(topic)
        if mine and (partition is None or partition in mine):
            if partition is None:
                partition = mine.pop()
            else:
                mine.remove(partition)
            if not mine:
                del grants[topic]
        else:
            kept = self.kept[donor]
            owned = kept[topic]
            if partition is None:
                partition = owned.pop()
            else:
                owned.remove(partition)
            if not owned:
                del kept[topic]
            self.origin[(topic, partition)] = donor
        self.counts[donor] -= 1
        return partition

    def _give(self, topic: str, receiver: int, partition: int) -> None:
        self.grants[receiver].setdefault(topic, []).append(partition)
        self.counts[receiver] += 1
        if (topic, partition) in self.origin:
            self.where[(topic, partition)] = receiver

    # -- step 3: KIP-341 move-back
    def return_to_previous(self) -> None:
        for topic, back in self.previous.items():
            if topic not in self.subscribers:
                continue
            subscribed = set(self.subscribers[topic])
            holder: dict[int, int] = {}
            for member in self.subscribers[topic]:
                for table in (self.kept[member], self.grants[member]):
                    for p in table.get(topic, ()):
                        holder[p] = member
            for p, home in sorted(back.items()):
                current = holder.get(p)
                if (
                    current is not None
                    and current != home
                    and home in subscribed
                    and self.counts[home] <= self.counts[current] - 2
                ):
                    self._give(topic, home, self._take(topic, current, p))

    # -- step 4: balancing passes
    def balance(self) -> None:
        topics = [t for t, subs in self.subscribers.items() if len(subs) >= 2]
        topics.sort(key=lambda t: (len(self.subscribers[t]), t))
        counts = self.counts
        while True:
            moved = False
            ceiling = max(counts)  # no count rises above it during a pass
            for topic in topics:
                subscribers = self.subscribers[topic]
                floor = min(map(counts.__getitem__, subscribers))
                if ceiling - floor <= 1:
                    continue
                holders = self._holders(topic)
                if not holders or max(map(counts.__getitem__, holders)) - floor <= 1:
                    continue
                self._level_topic(topic, subscribers, holders)
                moved = True
            if not moved:
                return

    def _level_topic(self, topic: str, subscribers: list[int], holders: set[int]) -> None:
        counts = self.counts
        kept, grants = self.kept, self.grants
        donors = [(-counts[m], m) for m in holders]
        takers = [(counts[m], m) for m in subscribers]
        heapq.heapify(donors)
        heapq.heapify(takers)
        granted = {m for m in holders if topic in grants[m]}  # holders of fresh grants of topic
        while donors:
            negative, donor = donors[0]
            if topic not in kept[donor] and topic not in grants[donor]:
                heapq.heappop(donors)
                continue
            if -negative != counts[donor]:
                heapq.heapreplace(donors, (-counts[donor], donor))
                continue
            level, taker = takers[0]
            if level != counts[taker]:
                heapq.heapreplace(takers, (counts[taker], taker))
                continue
            if counts[donor] - level < 2:
                return
            if topic not in grants[donor] and granted:
                # The most loaded holder would give up a partition it owned before; a holder
                # that is loaded enough too and only has to pass on a fresh grant costs nothing.
                other = max(granted, key=lambda m: (counts[m], -m))
                if counts[other] - level >= 2:
                    donor = other
            self._give(topic, taker, self._take(topic, donor))
            if topic not in grants[donor]:
                granted.discard(donor)
            granted.add(taker)
            heapq.heapreplace(takers, (counts[taker], taker))
            # the donor's entry is now stale; it is refreshed (or dropped) when next on top

    # -- step 5: repair (undo a move of an owned partition by passing on a fresh grant instead)
    def repair(self, budget: int = 500) -> None:
        """For each owned partition the balancing moved away (at most `budget` of them, as every
        attempt re-checks the balance of the topics involved): give it back to its owner, and
        let the owner hand one of its fresh grants to the least loaded subscriber of that grant's
        topic instead. Kept only when the result still meets the balance rule; each success saves
        one move."""
        moved = [
            (key, source)
            for key, source in self.origin.items()
            if self.where.get(key, source) != source
        ]
        if not moved or len(moved) > budget:
            return
        counts = self.counts
        for (topic, p), source in sorted(moved):
            now = self.where[(topic, p)]
            for other_topic in sorted(self.grants[source]):
                candidates = [m for m in self.subscribers[other_topic] if m != source]
                if not candidates:
                    continue
                target = min(candidates, key=lambda m: (counts[m], m))
                self._take(topic, now, p)
                self.kept[source].setdefault(topic, []).append(p)
                counts[source] += 1
                self.where[(topic, p)] = source
                q = self._take(other_topic, source)
                self._give(other_topic, target, q)
                if self._balanced_around((source, now, target)):
                    break
                # undo
                self._take(other_topic, target, q)
                self._give(other_topic, source, q)
                self._take(topic, source, p)
                self._give(topic, now, p)
                self.origin[(topic, p)] = source

    def _balanced_around(self, members: tuple[int, ...]) -> bool:
        topics: set[str] = set()
        for m in members:
            topics.update(self.group.members[self.member_ids[m]].topics)
        counts = self.counts
        for topic in topics:
            subscribers = self.subscribers.get(topic, ())
            if len(subscribers) < 2:
                continue
            floor = min(map(counts.__getitem__, subscribers))
            holders = self._holders(topic)
            if holders and max(map(counts.__getitem__, holders)) - floor > 1:
                return False
        return True

    # -- step 6: cycle cancelling
    def cancel_cycles(self) -> None:
        edges: dict[str, dict[int, dict[int, list[int]]]] = {}
        for (topic, p), source in self.origin.items():
            target = self.where.get((topic, p))
            if target is not None and target != source:
                edges.setdefault(topic, {}).setdefault(source, {}).setdefault(target, []).append(p)
        for topic, graph in edges.items():
            while (cycle := _find_cycle(graph)) is not None:
                for source, target in zip(cycle, cycle[1:] + cycle[:1], strict=True):
                    partitions = graph[source][target]
                    p = partitions.pop()
                    if not partitions:
                        del graph[source][target]
                    self._take(topic, target, p)
                    self.kept[source].setdefault(topic, []).append(p)
                    self.counts[source] += 1

    def result(self) -> Assignment:
        results = self.kept
        for index, grants in enumerate(self.grants):
            if not grants:
                continue
            mine = results[index]
            if not mine:
                results[index] = grants
                continue
            for topic, partitions in grants.items():
                kept = mine.get(topic)
                if kept:
                    kept.extend(partitions)
                else:
                    mine[topic] = partitions
        return dict(zip(self.member_ids, results, strict=True))


def subscribers_by_topic(group: Group) -> dict[str, list[int]]:
    """Topic -> indexes (id order) of its subscribers, topics in name order, built per distinct
    subscription rather than per (member, topic): groups usually have few distinct ones."""
    by_subscription: dict[tuple[str, ...], list[int]] = {}
    for index, member in enumerate(group.members.values()):
        by_subscription.setdefault(member.topics, []).append(index)
    parts: dict[str, list[list[int]]] = {}
    for topics, indexes in by_subscription.items():
        for topic in topics:
            parts.setdefault(topic, []).append(indexes)
    return {
        topic: (parts[topic][0] if len(parts[topic]) == 1 else sorted(chain(*parts[topic])))
        for topic in group.topics
        if topic in parts
    }


def _find_cycle(graph: dict[int, dict[int, list[int]]]) -> list[int] | None:
    """A directed cycle (list of nodes) in a small move graph, or None."""
    state: dict[int, int] = {}  # 1 = on the current path, 2 = finished
    for root in list(graph):
        if root in state:
            continue
        path = [root]
        iterators = [iter(list(graph.get(root, {})))]
        state[root] = 1
        while path:
            node = next(iterators[-1], None)
            if node is None:
                state[path.pop()] = 2
                iterators.pop()
                continue
            seen = state.get(node)
            if seen == 1:
                return path[path.index(node) :]
            if seen is None:
                state[node] = 1
                path.append(node)
                iterators.append(iter(list(graph.get(node, {}))))
    return None


def _general(
    group: Group, owned: Owned, previous: Previous, claimed: set[int] | None
) -> Assignment:
    state = _General(group, owned, previous, claimed)
    state.place_unassigned()
    if previous:
        state.return_to_previous()
    state.balance()
    state.repair()
    state.cancel_cycles()
    return state.result()
