"""The sticky assignors' path for differing subscriptions (see `sticky_core` for its six steps
and the invariants it shares with Kafka's GeneralAssignmentBuilder). The counterpart of Kafka's
UniformHeterogeneousAssignmentBuilder."""

from __future__ import annotations

import heapq
from collections import deque
from itertools import accumulate, chain, compress, repeat
from operator import add, floordiv, mod, mul, sub

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment
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


def general(
    context: PlanContext, owned: Owned, previous: Previous, claimed: Taken | None
) -> Assignment:
    state = _General(context, owned, previous, claimed)
    state.place_unassigned()
    if previous:
        state.return_to_previous()
    state.balance()
    state.repair()
    state.cancel_cycles()
    return state.result()


class _General:
    """Mutable state of one general-path computation, member-major (the output's own shape, so
    nothing is transposed): `kept[m]` holds the partitions member m owned before and still has,
    `grants[m]` those it received in this round (moving a grant again costs no stickiness)."""

    def __init__(
        self, context: PlanContext, owned: Owned, previous: Previous, claimed: Taken | None
    ) -> None:
        group = context.group
        self.group = group
        self.member_ids = list(group.members)
        members = list(group.members.values())
        self.subscribers = context.subscribers
        self.previous = previous
        self.counts = [0] * len(members)
        self.kept: list[dict[str, list[int]]] = [{} for _ in members]
        self.grants: list[dict[str, list[int]]] = [{} for _ in members]
        self.origin: dict[tuple[str, int], int] = {}  # moved partition -> its owner before
        self.where: dict[tuple[str, int], int] = {}  # moved partition -> where it is now
        self.offsets = offsets = context.offsets
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
            claimed = no_partitions_taken(len(context.ownership.owners))
            for kept_now in self.kept:
                _collect(claimed, kept_now, offsets)
        self.claimed = claimed  # flags of every kept partition

    def _holders(self, topic: str) -> set[int]:
        kept, grants = self.kept, self.grants
        return {m for m in self.subscribers[topic] if topic in kept[m] or topic in grants[m]}

    # -- step 2: greedy water-filling
    def place_unassigned(self) -> None:
        order = sorted(self.subscribers, key=lambda t: (len(self.subscribers[t]), t))
        claimed = self.claimed
        numbers = partition_numbers(self.group.topics[t] for t in order)
        any_claimed = 1 in claimed
        for topic in order:
            count = self.group.topics[topic]
            if any_claimed:
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
