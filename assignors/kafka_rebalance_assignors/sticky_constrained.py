"""The sticky assignors' path for identical subscriptions: Kafka's KAFKA-9987 constrained
algorithm (see `sticky_core` for the rules and why revoked partitions are dealt last). The
counterpart of Kafka's UniformHomogeneousAssignmentBuilder."""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress, filterfalse, repeat
from operator import add, itemgetter
from typing import Any

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import (
    Assignment,
    FlatAssignment,
    OwnerRun,
    PartitionClaims,
    claim_count,
    global_numbers,
    scatter,
)
from kafka_rebalance_assignors.sticky_ownership import (
    Owned,
    Previous,
    Taken,
    _collect,
    _discard,
    free_partitions,
    no_partitions_taken,
    partition_numbers,
)

_FIRST = itemgetter(0)


def _add(target: dict[str, list[int]], topic: str, piece: list[int]) -> None:
    current = target.get(topic)
    if current is None:
        target[topic] = piece
    # The lists dealt here may also hold a shared 1-tuple from `_Dealer._deal_columns` (typed as
    # lists so the dealer's hot paths stay plain dicts): never mutate one.
    elif isinstance(current, tuple):
        target[topic] = [*current, *piece]
    else:
        current.extend(piece)


def constrained(
    context: PlanContext, owned: Owned, previous: Previous, claimed: Taken | None
) -> Assignment:
    """The KAFKA-9987 path. `claimed`: the flags of all claims when none conflicted (it is
    consumed: partitions not kept are cleared in it)."""
    group = context.group
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
    offsets = context.offsets
    taken = claimed if claimed is not None else no_partitions_taken(len(context.ownership.owners))
    subscribed = topic_index.keys()
    claims = owned  # as resolved, before trimming: what the owner array says each one holds
    touched: set[int] = set()  # members whose holdings differ from their resolved claims
    trimmed: Owned = []
    names_checked: tuple[tuple[str, ...], bool] = ((), True)  # `PartitionClaims.names` shared
    for index, mine in enumerate(owned):
        if type(mine) is PartitionClaims:
            if mine.names is not names_checked[0]:
                names_checked = (mine.names, subscribed >= set(mine.names))
            if names_checked[1]:
                trimmed.append(mine)
                continue
        if mine and not mine.keys() <= subscribed:
            touched.add(index)
            dropped = {t: mine[t] for t in mine if t not in subscribed}
            if claimed is not None:
                _discard(taken, dropped, offsets)
            mine = {t: mine[t] for t in mine if t in subscribed}
        trimmed.append(mine)
    owned = trimmed
    owned_counts = list(map(claim_count, owned))
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
            touched.add(index)
            keep = _keep_first(mine, cap, topic_index, previous, owned_counts, min_quota)
            if claimed is not None:
                _discard(taken, mine, offsets)
                _collect(taken, keep, offsets)
            for topic, partitions in mine.items():
                given_up = set(partitions).difference(keep.get(topic, ()))
                if given_up:
                    revoked.setdefault(topic, []).extend(given_up)
            mine = keep
        counts[index] = min(held, cap)
        if type(mine) is PartitionClaims and counts[index] >= max_quota:
            # Full: never dealt to, so never changed: kept as the read-only columns it is.
            kept.append(mine)  # type: ignore[arg-type]  # read-only, see `FlatAssignment`
            continue
        kept.append(dict(zip(mine.keys(), map(list, mine.values()), strict=True)))
    if claimed is None:
        for kept_now in kept:
            _collect(taken, kept_now, offsets)

    # Unassigned partitions, topic by topic in name order (global numbers: `Group.offsets`): first
    # those nobody owned, then those revoked above. Dealing the revoked ones last makes the plan
    # stable under the cooperative protocol: after round one (target minus transfers) the only
    # unowned partitions are exactly the revoked ones, the fill starts from the same counts, and
    # the memoryless least-loaded rule hands each to the same member again.
    held_topics: set[str] = set()  # topics some member keeps partitions of
    segments: list[tuple[str, list[int]]] = []
    numbers = partition_numbers(group.topics[t] for t in topics)
    any_taken = 1 in taken
    prefixes: dict[int, list[int]] = {}  # count -> numbers[:count], shared (segments are read)
    for topic in topics:
        count = group.topics[topic]
        if any_taken:
            free = free_partitions(numbers, count, offsets[topic], taken)
            if len(free) < count:
                held_topics.add(topic)
        else:
            free = prefixes.get(count) or prefixes.setdefault(count, numbers[:count])
        revoked_here = revoked.get(topic)
        if revoked_here:
            free = list(filterfalse(set(revoked_here).__contains__, free))
            held_topics.add(topic)
        if previous.get(topic) and free:
            free = _return_to_previous(topic, free, previous[topic], kept, counts, min_quota)
            held_topics.add(topic)  # the dealer must merge into this topic from now on
        if free:
            segments.append((topic, free))
    segments.extend((topic, sorted(revoked[topic])) for topic in topics if topic in revoked)

    # Fill: least loaded first, ties by id, in phases of identical rounds.
    remaining = sum(len(free) for _, free in segments)
    # A fresh group (nothing claimed, no conflicts): the dealer also records the owner array,
    # as runs, so the plan need not rebuild it from a million lists.
    fresh = claimed is not None and not any(claims) and not held_topics
    dealer = _Dealer(segments, kept, held_topics, numbers, touched, offsets if fresh else None)
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
    in_name_order = list(group.topics) == sorted(group.topics)
    if dealer.runs is not None and dealer.columns_only and in_name_order:
        return _flat_fresh(context, dealer)
    dealer.flush()
    if (
        claimed is None
        or previous
        or 2 * len(touched) > size  # much changed: `plan` normalises it
        or not in_name_order
    ):
        return dict(zip(member_ids, kept, strict=True))
    return _flat(context, claims, kept, touched, owned_counts)


def _flat_fresh(context: PlanContext, dealer: _Dealer) -> FlatAssignment:
    """The result of a fresh group dealt entirely in columns (see `_Dealer._deal_columns`),
    with the owner runs the dealer recorded: each member dealt anything holds its share as
    read-only `PartitionClaims` columns (one partition per topic, topics in topic order: the
    plan's normal form, whose lists are built when a caller reads them), the others their
    empty dict (`FlatAssignment.shared`: the plan copies what it reads into fresh lists)."""
    runs = dealer.runs
    assert runs is not None  # the caller's condition
    # (`_place` records each dealt position once; the plan checks that the runs leave no gap
    # and do not overlap, as it checks every strategy's result.)
    result = FlatAssignment(context.group, None, shared=True, runs=runs)
    result.update(zip(context.group.members, dealer.shares(context.offsets), strict=True))
    return result


def _flat(
    context: PlanContext,
    claims: Owned,
    kept: list[dict[str, list[int]]],
    touched: set[int],
    held: list[int],
) -> FlatAssignment:
    """The result in the plan's normal form with its flat owner array (see `FlatAssignment`),
    when no claim conflicted, the group's topics are in name order and either at most half the
    members were touched (a group close to its previous assignment: the steady state) or
    nobody claimed anything (a fresh group). Untouched members hold exactly their resolved
    claims (topic order, ascending, copied into fresh lists, or the read-only `PartitionClaims`
    columns they were validated as, whose lists the plan builds), so the owner array starts as the
    resolved one and only the touched members' partitions are rewritten: cleared from what
    they claimed, set from what they now hold, which they are given in normal form. In steady
    state that is a handful of members out of thousands; in a fresh group it is everyone, each
    usually holding one partition per topic, which is placed without a map per list."""
    group = context.group
    offsets = context.offsets
    adders = {topic: offset.__add__ for topic, offset in offsets.items()}
    owners = list(context.ownership.owners)
    for index in touched:
        claim = claims[index]
        if type(claim) is PartitionClaims:
            scatter(owners, claim.numbers, -1)
        elif claim:
            scatter(owners, global_numbers(adders, claim), -1)
    listed = sum(held[index] for index in range(len(kept)) if index not in touched)
    for index in sorted(touched):
        mine = kept[index]
        names = sorted(compress(mine, mine.values()))  # topics in order, empty lists left out
        lists = list(map(sorted, map(mine.__getitem__, names)))  # fresh lists, even of tuples
        normal = kept[index] = dict(zip(names, lists, strict=True))
        size = sum(map(len, lists))
        numbers: Iterable[int]
        if size == len(lists):  # one partition per topic: no inner map per list
            numbers = map(add, map(offsets.__getitem__, names), map(_FIRST, lists))
        else:
            numbers = global_numbers(adders, normal)
        scatter(owners, numbers, index)
        listed += size
    if listed != len(owners) - owners.count(-1):
        raise AssertionError("constrained fill: a partition is listed twice")
    result = FlatAssignment(group, owners)
    result.update(zip(group.members, kept, strict=True))
    return result


def _keep_first(
    mine: Mapping[str, Sequence[int]],
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
        # member index -> topic -> partitions dealt: lists, or shared 1-tuples (`_deal_columns`).
        result: list[dict[str, Any]],
        held: set[str],
        numbers: list[int],
        touched: set[int],
        offsets: dict[str, int] | None = None,
    ) -> None:
        # The owner array as runs (see `model.OwnerRun`), recorded by column deals while every
        # deal is one, when `offsets` (`Group.offsets`) is given: a fresh group.
        self.runs: list[OwnerRun] | None = None if offsets is None else []
        self.offsets: dict[str, int] = offsets or {}
        self.columns_only = True  # every deal so far went through `_deal_columns`
        self.segments = segments
        self.touched = touched  # members dealt anything
        self.result = result
        self.held = held  # topics some member already has partitions of
        self.numbers = numbers  # the shared 0..n-1 (see `partition_numbers`)
        self.segment = 0
        self.offset = 0
        self._singles: list[tuple[int]] | None = None
        # While the owner runs are recorded (a fresh group): member index -> its dealt shares as
        # (topics, partitions) column pairs, in deal order; no dict is built for them unless a
        # deal that is not a column deal follows (`flush`).
        self.chunks: dict[int, list[tuple[Sequence[str], Sequence[int]]]] = {}

    def deal(self, members: list[int], rounds: int) -> None:
        """Each of `members` (in this order) gets one partition per round, `rounds` times."""
        if self._deal_columns(members, rounds):
            return
        self.columns_only = False
        self.flush()
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
            self.touched.update(order[:receivers])
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

    def _place(self, members: list[int], reached: list[tuple[str, list[int], int]]) -> None:
        """Record a column deal in the owner runs: position k of the dealt sequence went to
        `members[k % width]`, so each segment's owners are the members repeated from some
        shift. A segment of consecutive partitions (a fresh topic's are all of them) is one
        run, any other one run per partition."""
        runs, offsets = self.runs, self.offsets
        if runs is None:
            return
        width = len(members)
        position = 0
        for topic, free, take in reached:
            base = offsets[topic]
            shift = position % width
            if free[take - 1] - free[0] == take - 1:  # ascending and distinct: consecutive
                runs.append(OwnerRun(base + free[0], take, members, shift))
            else:
                for k, partition in enumerate(free[:take]):
                    runs.append(OwnerRun(base + partition, 1, members, (shift + k) % width))
            position += take

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
        self.touched.update(members)
        if self.runs is not None:
            # A fresh group: the shares stay columns, the owner runs record who got what,
            # and `shares` makes the result of them.
            self._record(members, reached)
            self._place(members, reached)
        else:
            partitions = list(chain.from_iterable(free[:take] for _, free, take in reached))
            topics = list(chain.from_iterable(repeat(topic, take) for topic, _, take in reached))
            self._update(members, topics, partitions)
        self.held.update(topic for topic, _, _ in reached)
        _, free, take = reached[-1]
        if take == len(free):
            self.segment = index
        else:
            self.segment, self.offset = index - 1, take
        return True

    def _record(self, members: list[int], reached: list[tuple[str, list[int], int]]) -> None:
        """Record a column deal's shares in `chunks`: `members[j]` gets position k of the dealt
        sequence for every k = j mod width, two strided slices. When every topic reached
        deals exactly one partition to each member (as many free partitions as members: a
        topic with as many partitions as consumers), each member gets every topic reached:
        one tuple of names for all, and when every such topic deals its partitions 0 to
        width - 1, `members[j]` gets partition j of each, so no sequence is built at all."""
        width = len(members)
        chunks = self.chunks
        if all(take == width for _, _, take in reached):
            names = tuple(topic for topic, _, _ in reached)
            if all(free[0] == 0 and free[width - 1] == width - 1 for _, free, _ in reached):
                # ascending and distinct (`free_partitions`), so exactly 0 .. width - 1
                # an int array per member (memory filled in C, nothing for the collector)
                count = len(names)
                for j, member in enumerate(members):
                    chunks.setdefault(member, []).append((names, array("i", (j,)) * count))
                return
            partitions = list(chain.from_iterable(free[:take] for _, free, take in reached))
            for j, member in enumerate(members):
                chunks.setdefault(member, []).append((names, partitions[j::width]))
            return
        partitions = list(chain.from_iterable(free[:take] for _, free, take in reached))
        topics = list(chain.from_iterable(repeat(topic, take) for topic, _, take in reached))
        for j, member in enumerate(members):
            chunks.setdefault(member, []).append((topics[j::width], partitions[j::width]))

    def _update(self, members: list[int], topics: Sequence[str], partitions: Sequence[int]) -> None:
        """Extend each member's dict by its strided share of a column deal (`topics[j::width]`,
        `partitions[j::width]` for `members[j]`), each partition as a shared 1-tuple."""
        if self._singles is None:
            self._singles = list(zip(self.numbers))
        single = self._singles.__getitem__
        result = self.result
        width = len(members)
        first = topics[0::width]
        template = dict.fromkeys(first)
        for j, member in enumerate(members):
            keys = topics[j::width]
            target = result[member]
            if not target and keys == first:  # the usual case: a presized copy, no rehashing
                target = result[member] = template.copy()
            target.update(zip(keys, map(single, partitions[j::width]), strict=True))

    def flush(self) -> None:
        """Write the column shares recorded so far into the members' dicts (in deal order, as
        a dict deal would have), for a result that is not made of the columns."""
        chunks, self.chunks = self.chunks, {}
        for member, pieces in chunks.items():
            for keys, parts in pieces:
                self._update([member], keys, parts)

    def shares(self, offsets: dict[str, int]) -> list[Any]:
        """Each member's result in a group dealt only in columns: its share as `PartitionClaims`
        (topics ascending, one partition each: a column deal never gives a member two
        partitions of a topic, nor a topic twice), or its dict when it was dealt nothing.
        Members dealt the same topics share one tuple of names."""
        shares: list[Any] = list(self.result)
        names: tuple[str, ...] = ()
        for member, pieces in self.chunks.items():
            if shares[member]:  # not fresh after all: keep the dict form
                self.flush()
                return list(self.result)
            if len(pieces) == 1:
                keys, parts = pieces[0]
            else:
                keys = tuple(chain.from_iterable(piece[0] for piece in pieces))
                parts = list(chain.from_iterable(piece[1] for piece in pieces))
            if keys is not names:
                tupled = keys if type(keys) is tuple else tuple(keys)
                if tupled != names:  # equal names (the usual case): one tuple for all
                    names = tupled
            shares[member] = PartitionClaims(names, None, offsets, parts)
        return shares
