"""Weighted sticky assignment: each member's partitions proportional to its weight, per topic
AND in total, keeping what members own wherever those two bounds allow.

Shares. A topic t with n_t partitions is shared by its subscribers S_t in proportion to their
weights: member m's share of t is s(m, t) = n_t * w_m / (sum of w over S_t), and 0 when m does
not subscribe to t. Its total share is T(m) = sum over t of s(m, t). Weights are turned into
exact integers first (every float is a binary fraction), so shares are exact rationals and equal
shares tie exactly.

Invariant (what `assign` guarantees for every group):
  1. per topic:  count(m, t) is floor(s(m, t)) or ceil(s(m, t))   (strictly within one);
  2. per member: count(m)    is floor(T(m))    or ceil(T(m))        (strictly within one);
  3. only subscribers of a topic receive it (every pool is per topic: no cross-topic leak);
  4. a member keeps min(owned(m, t), count(m, t)) of the partitions of t it owns: nothing moves
     except what the quotas count(m, t) force off an owner, and partitions whose owner left or
     unsubscribed.
Both 1 and 2 together are always satisfiable: the real matrix s(m, t) has integer column sums
(n_t), so by the integrality of flows (matrix rounding, Bacharach 1966) there is an integer
matrix rounding every entry and every row sum up or down while keeping the column sums.

Algorithm. floor(s(m, t)) is everyone's base; each topic then has
e_t = n_t - sum of floors "extra seats", each worth one partition, to hand to distinct
subscribers with a fractional share; member m must end with between floor(R_m) and ceil(R_m)
extra seats, R_m = T(m) - its base. That is a bipartite degree-constrained problem (a flow with
lower bounds), solved in three steps:
  a. greedy, in two passes over the topics: first each topic's seats go to members that own
     more than their base of it (a seat there saves a move), then the remaining seats to the
     members with the lowest weighted running total (seats taken + 1) / R_m, never beyond
     ceil(R_m). With identical subscriptions and equal weights this alone is exact: the
     remainders rotate over the members, as in `sticky`.
  b. repair, by augmenting paths (one breadth-first search per shortfall): a topic left short
     of seats gets one through a chain starting at a member below ceil(R_m), which takes a seat
     whose holder takes another, ..., the last taking one in the short topic; a member left
     below floor(R_m) takes a seat along a chain ending at a member above its floor. Flow
     theory guarantees such a chain whenever a bound is not met yet, so a+b always meet
     invariants 1 and 2.
  c. stickiness: for each owner that would keep a partition with one more seat in a topic, a
     best-first search for a chain of hand-overs (it joins, a holder leaves and joins elsewhere,
     ...) that closes back at it or ends at a member above its floor, keeps every bound, and
     saves at least one move overall; applied while one is found.
Then each topic is filled: a member keeps its owned partitions up to its quota, and the
partitions nobody kept go, lowest number first, to the members below quota, in member order.

Cost: linear in (members x topics) where weights differ; topics with equal-weight subscribers
share per-subscriber-set structures, so identical subscriptions cost per topic, not per pair.

What is guaranteed about moves: invariant 4 (a member only loses partitions it holds beyond its
quota, and never gains in a topic where it lost), and no move at all when every partition is
owned and the ownership already meets invariants 1 and 2 (pass a then seats exactly the owners;
so a plan fed back moves nothing). Beyond that the number of moves is a heuristic minimum, not a
proven one: it equals the brute-force minimum on every small group the property tests generate.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from itertools import chain

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment


def integer_weights(weights: Sequence[float]) -> list[int]:
    """The weights scaled to integers with the same ratios (exact: a float is a binary fraction).
    Shares computed from them are exact rationals, so three equal weights tie exactly instead of
    by rounding noise."""
    exact = [Fraction(w) for w in weights]
    scale = math.lcm(*(f.denominator for f in exact)) if exact else 1
    return [int(f * scale) for f in exact]


class _TopicSeats:
    """One topic's apportionment: each subscriber's base (floor of its share), which
    subscribers may take an extra seat (a fractional share), and which hold one."""

    __slots__ = (
        "_candidate_set",
        "base",
        "candidates",
        "extra",
        "gainers",
        "klass",
        "name",
        "owned",
        "seats",
        "subscribers",
    )

    def __init__(
        self,
        name: str,
        subscribers: list[int],
        base: dict[int, int] | int,
        candidates: list[int],
        extra: int,
        owned: dict[int, int],
        candidate_set: frozenset[int] | None = None,
        klass: tuple[int, ...] | None = None,
    ) -> None:
        self.name = name
        self.subscribers = subscribers
        self.base = base  # an int when every subscriber has the same base (equal weights)
        self.candidates = candidates
        self.extra = extra  # e_t: how many seats the topic hands out
        self.owned = owned  # member -> partitions of this topic it owns (owners only)
        self.seats: set[int] = set()
        self._candidate_set = candidate_set  # shared by topics with the same subscribers
        self.klass = klass  # equal-weight topics: the subscriber set, shared with like topics
        # Members for whom a seat saves a move: they own more of the topic than their base.
        if isinstance(base, int):
            self.gainers = frozenset(m for m, n in owned.items() if n > base)
        else:
            self.gainers = frozenset(m for m, n in owned.items() if n > base[m])

    def may_sit(self, member: int) -> bool:
        """The member's share of the topic has a fractional part: it may hold an extra seat."""
        if self._candidate_set is None:
            self._candidate_set = frozenset(self.candidates)
        return member in self._candidate_set

    def base_of(self, member: int) -> int:
        base = self.base
        return base if isinstance(base, int) else base[member]

    def gains(self, member: int) -> bool:
        """A seat saves a move: the member owns more of the topic than its base."""
        return member in self.gainers


class _SeatPlan:
    """The extra seats of every topic and each member's bounds on how many it holds."""

    def __init__(self, context: PlanContext) -> None:
        group = context.group
        previous = context.ownership.resolved
        self.member_ids = list(group.members)
        index = {m: i for i, m in enumerate(self.member_ids)}
        units = integer_weights([member.weight for member in group.members.values()])
        uniform = len(set(units)) <= 1
        size = len(self.member_ids)
        # Each member's remainder mass sum_t rest(m, t) / S_t, kept exactly as integer numerators
        # per denominator S_t (members with identical subscriptions share one accumulator).
        by_class: dict[tuple[int, ...], dict[int, int]] = {}
        by_member: list[dict[int, int]] = [{} for _ in range(size)]
        # Topics where a member may take a seat: per subscriber set for equal-weight topics
        # (shared, so identical subscriptions cost one list, not one per member), per member
        # for the others.
        self._class_topics: dict[tuple[int, ...], list[int]] = {}
        class_sets: dict[tuple[int, ...], frozenset[int]] = {}
        self._own_topics: list[list[int]] = [[] for _ in range(size)]
        owners: dict[str, dict[int, int]] = {}
        for member_id, member_owned in previous.items():
            i = index[member_id]
            for topic, partitions in member_owned.items():
                if partitions:
                    owners.setdefault(topic, {})[i] = len(partitions)
        self.topics: list[_TopicSeats] = []
        keys: dict[int, tuple[int, ...]] = {}  # id(subscriber list) -> its class key
        # The context's subscriber lists are shared between topics with the same subscribers.
        for topic, subscribers in context.subscribers.items():
            count = group.topics[topic]
            key = keys.get(id(subscribers))
            if key is None:
                key = keys[id(subscribers)] = tuple(subscribers)
            shared = class_sets.get(key)
            if shared is None:
                shared = class_sets[key] = frozenset(subscribers)
            owned = owners.get(topic, {})
            if owned:  # owners that no longer subscribe lose the topic whatever the quotas
                owned = {i: n for i, n in owned.items() if i in shared}
            topic_units = None if uniform else [units[i] for i in subscribers]
            if topic_units is None or len(set(topic_units)) == 1:
                k = len(subscribers)
                rest = count % k
                if rest:
                    accumulator = by_class.setdefault(key, {})
                    accumulator[k] = accumulator.get(k, 0) + rest
                    self._class_topics.setdefault(key, []).append(len(self.topics))
                seats = _TopicSeats(
                    topic,
                    subscribers,
                    count // k,
                    subscribers if rest else [],
                    rest,
                    owned,
                    shared,
                    key,
                )
            else:
                assert topic_units is not None
                total = sum(topic_units)
                base: dict[int, int] = {}
                candidates = []
                for i, u in zip(subscribers, topic_units, strict=True):
                    floor, rest = divmod(count * u, total)
                    base[i] = floor
                    if rest:
                        candidates.append(i)
                        self._own_topics[i].append(len(self.topics))
                        mass = by_member[i]
                        mass[total] = mass.get(total, 0) + rest
                extra = count - sum(base.values())
                seats = _TopicSeats(topic, subscribers, base, candidates, extra, owned)
            self.topics.append(seats)
        remainder = [Fraction(0)] * size
        for members, masses in by_class.items():
            class_mass = sum((Fraction(n, d) for d, n in masses.items()), Fraction(0))
            for i in members:
                remainder[i] += class_mass
        for i, masses in enumerate(by_member):
            if masses:
                remainder[i] += sum((Fraction(n, d) for d, n in masses.items()), Fraction(0))
        self.low = [math.floor(r) for r in remainder]
        self.high = [math.ceil(r) for r in remainder]
        self.inverse = [1.0 / float(r) if r else math.inf for r in remainder]
        self.held = [0] * size
        self.holding: list[set[int]] = [set() for _ in range(size)]  # member -> topic numbers
        # Topics with a seat whose holder gains nothing from it (few, after the greedy), and
        # each member's topics where a seat would save a move: all an improving chain can use
        # while it has saved only one move (see `_improving_chain`).
        self.idle: dict[int, set[int]] = {}  # topic number -> holders gaining nothing
        self.gaining_topics: list[list[int]] = [[] for _ in range(size)]
        for number, seats in enumerate(self.topics):
            for m in seats.gainers:
                if seats.may_sit(m):
                    self.gaining_topics[m].append(number)
        self._member_classes: list[list[list[int]]] | None = None

    # ----------------------------------------------------------------- seat moves

    def _take(self, member: int, number: int) -> None:
        topic = self.topics[number]
        topic.seats.add(member)
        self.holding[member].add(number)
        if member not in topic.gainers:
            self.idle.setdefault(number, set()).add(member)

    def _drop(self, member: int, number: int) -> None:
        topic = self.topics[number]
        topic.seats.remove(member)
        self.holding[member].discard(number)
        if member not in topic.gainers:
            idle = self.idle[number]
            idle.remove(member)
            if not idle:
                del self.idle[number]

    # ----------------------------------------------------------------- a: greedy

    def greedy(self) -> list[int]:
        """Hand out each topic's seats; returns the topic numbers left short (all members full).
        Two passes: first the seats that save a move (to owners holding more than their base),
        over all topics, so that no member's ceiling is spent on seats that save nothing before
        its owners' seats are placed; then the rest, by lowest weighted running total."""
        held, high, inverse = self.held, self.high, self.inverse
        for number, topic in enumerate(self.topics):
            if not topic.owned or not topic.extra:
                continue
            keen = [
                m for m in topic.owned if topic.gains(m) and held[m] < high[m] and topic.may_sit(m)
            ]
            if len(keen) > topic.extra:
                keen.sort(key=lambda m: ((held[m] + 1) * inverse[m], m))
            for m in keen[: topic.extra]:
                held[m] += 1
                self._take(m, number)
        short = []
        queues: dict[tuple[int, ...], list[tuple[float, int]]] = {}
        for number, topic in enumerate(self.topics):
            wanted = topic.extra - len(topic.seats)
            if wanted <= 0:
                continue
            seats = topic.seats
            if topic.klass is not None:
                queue = queues.get(topic.klass)
                if queue is None:
                    queue = queues[topic.klass] = [
                        ((held[m] + 1) * inverse[m], m) for m in topic.klass
                    ]
                    heapq.heapify(queue)
                chosen = _lowest(queue, wanted, seats, held, high, inverse)
            else:
                rest = [m for m in topic.candidates if held[m] < high[m] and m not in seats]
                chosen = heapq.nsmallest(wanted, rest, key=lambda m: (held[m] + 1) * inverse[m])
            for m in chosen:
                held[m] += 1
                self._take(m, number)
            if len(chosen) < wanted:
                short.append(number)
        return short

    # ----------------------------------------------------------------- b: repair

    def candidate_topics(self, member: int) -> Iterator[int]:
        """The topics in which `member` may hold a seat, in no particular order."""
        if self._member_classes is None:
            table: list[list[list[int]]] = [[] for _ in self.member_ids]
            for key, numbers in self._class_topics.items():
                for m in key:
                    table[m].append(numbers)
            self._member_classes = table
        return chain(*self._member_classes[member], self._own_topics[member])

    def fill_short_topic(self, number: int) -> None:
        """One more seat for topic `number`, which every candidate not yet in it holds its
        ceiling of: a member below its ceiling takes a seat from a holder, who takes one from
        another, ... ending with a member taking a seat in `number`. Searched backwards from the
        members below their ceiling (few, at this stage); such a chain exists while the topic is
        short (see the module docstring)."""
        topics, held, high = self.topics, self.held, self.high
        target = topics[number]
        parent: dict[int, tuple[int, int] | None] = {}  # member -> (topic it leaves, who joins)
        queue: deque[int] = deque()
        for m, (count, ceiling) in enumerate(zip(held, high, strict=True)):
            if count < ceiling:
                parent[m] = None
                queue.append(m)
        seen_topics = {number}
        while queue:
            m = queue.popleft()
            if m not in target.seats and target.may_sit(m):
                self._take(m, number)
                while (link := parent[m]) is not None:
                    left, joiner = link
                    self._drop(m, left)
                    self._take(joiner, left)
                    m = joiner
                held[m] += 1
                return
            for other in sorted(self.candidate_topics(m)):
                there = topics[other]
                if other in seen_topics or m in there.seats:
                    continue
                seen_topics.add(other)
                for holder in sorted(there.seats):
                    if holder not in parent:
                        parent[holder] = (other, m)
                        queue.append(holder)
        raise AssertionError(f"weighted-sticky: no seat chain for topic {target.name}")

    def raise_member(self, member: int) -> None:
        """One more seat for `member` (below its floor): it takes a seat in a topic it may sit
        in, whose holder takes another, ... ending at a member above its floor."""
        topics, held, low = self.topics, self.held, self.low
        parent: dict[int, tuple[int, int]] = {}  # evicted member -> (topic, member joining it)
        seen_topics: set[int] = set()
        queue: deque[int] = deque([member])
        visited = {member}
        while queue:
            m = queue.popleft()
            for number in sorted(self.candidate_topics(m)):
                topic = topics[number]
                if number in seen_topics or m in topic.seats:
                    continue
                seen_topics.add(number)
                # evict a holder that gains nothing from its seat first
                for holder in sorted(topic.seats, key=lambda h: (topic.gains(h), h)):
                    if holder in visited:
                        continue
                    visited.add(holder)
                    parent[holder] = (number, m)
                    if held[holder] > low[holder]:
                        held[holder] -= 1
                        held[member] += 1
                        evicted = holder
                        while True:
                            joined, joiner = parent[evicted]
                            self._drop(evicted, joined)
                            self._take(joiner, joined)
                            if joiner == member:
                                return
                            evicted = joiner
                    queue.append(holder)
        raise AssertionError(f"weighted-sticky: no seat chain for {self.member_ids[member]}")

    # ----------------------------------------------------------------- c: stickiness

    def improve(self) -> None:
        """Give seats to owners that would keep a partition with them, while a chain of seat
        hand-overs that keeps every bound and saves at least one move exists (each success saves
        one or more, so this ends)."""
        changed = True
        while changed:
            changed = False
            for number, topic in enumerate(self.topics):
                if not topic.owned or not topic.extra:
                    continue
                for m in sorted(topic.owned):
                    if m not in topic.seats and topic.gains(m) and topic.may_sit(m):
                        changed |= self._improving_chain(m, number)

    def _improving_chain(self, member: int, number: int) -> bool:
        """`member` joins topic `number` (saving a move), evicting a holder, who joins another
        topic, evicting a holder there, ... until the chain closes back at `member` (it leaves a
        seat) or ends at a member above its floor while `member` is below its ceiling. Searched
        best first on the moves saved so far, never letting that fall below one, each member
        visited once. Applies the first chain found; False when there is none."""
        topics, held, low, high = self.topics, self.held, self.low, self.high
        parent: dict[int, tuple[int, int]] = {}  # evicted member -> (topic, member joining it)
        visited = {member}
        heap: list[tuple[int, int, int, int, int]] = []  # (-saved, order, evicted, topic, joiner)
        order = 0

        def evictions(joiner: int, joined: int, saved: int) -> tuple[int, int] | None:
            nonlocal order
            topic = topics[joined]
            # with one move saved, evicting a holder that gains from its seat would spend it
            holders = topic.seats if saved >= 2 else self.idle.get(joined, ())
            for holder in sorted(holders):
                left = saved - topic.gains(holder)
                if left < 1:
                    continue
                if holder == member:
                    return joined, joiner  # the chain closes
                if holder not in visited:
                    order += 1
                    heapq.heappush(heap, (-left, order, holder, joined, joiner))
            return None

        closing = evictions(member, number, 1)
        while closing is None and heap:
            negative, _, evicted, joined, joiner = heapq.heappop(heap)
            if evicted in visited:
                continue
            visited.add(evicted)
            parent[evicted] = (joined, joiner)
            if held[evicted] > low[evicted] and held[member] < high[member]:
                held[evicted] -= 1
                held[member] += 1
                self._hand_over(evicted, parent, member)
                return True
            if -negative >= 2:
                reachable: Iterable[int] = self.candidate_topics(evicted)
            else:  # with one move saved, only a gaining seat or an idle holder keeps it >= 1
                reachable = chain(self.gaining_topics[evicted], self.idle)
            for other in sorted(set(reachable)):
                if evicted not in topics[other].seats and topics[other].may_sit(evicted):
                    gain = topics[other].gains(evicted)
                    closing = evictions(evicted, other, -negative + gain)
                    if closing is not None:
                        break
        if closing is None:
            return False
        parent[member] = closing
        self._hand_over(member, parent, member)
        return True

    def _hand_over(self, evicted: int, parent: dict[int, tuple[int, int]], first: int) -> None:
        """Apply a chain: walking back from the last evicted member, each leaves the topic its
        successor joins, up to `first`, the member that started it."""
        while True:
            joined, joiner = parent[evicted]
            self._drop(evicted, joined)
            self._take(joiner, joined)
            if joiner == first:
                return
            evicted = joiner

    # ----------------------------------------------------------------- all of it

    def solve(self) -> None:
        for number in self.greedy():
            while len(self.topics[number].seats) < self.topics[number].extra:
                self.fill_short_topic(number)
        for member, (held, low) in enumerate(zip(self.held, self.low, strict=True)):
            for _ in range(low - held):
                self.raise_member(member)
        self.improve()


def _lowest(
    queue: list[tuple[float, int]],
    wanted: int,
    seated: set[int],
    held: list[int],
    high: list[int],
    inverse: list[float],
) -> list[int]:
    """Up to `wanted` members of one subscriber set with the lowest weighted running total
    (held + 1) / R (ties: lower index), below their ceiling and not in `seated`, from that
    set's heap. Entries go stale only upwards (held only grows here), so a stale entry is pushed
    back with its current key, and a member at its ceiling leaves the heap for good."""
    chosen: list[int] = []
    skipped: list[tuple[float, int]] = []
    while queue and len(chosen) < wanted:
        key, m = heapq.heappop(queue)
        if held[m] >= high[m]:
            continue
        current = (held[m] + 1) * inverse[m]
        if current != key:
            heapq.heappush(queue, (current, m))
        elif m in seated:
            skipped.append((key, m))
        else:
            chosen.append(m)
    for entry in skipped:
        heapq.heappush(queue, entry)
    for m in chosen:  # back with the key they will have once seated
        heapq.heappush(queue, ((held[m] + 2) * inverse[m], m))
    return chosen


def assign(context: PlanContext) -> Assignment:
    # counts only: loads, budgets and hysteresis belong to lag-aware
    group = context.group
    previous = context.ownership.resolved
    seats = _SeatPlan(context)
    seats.solve()
    member_ids = seats.member_ids
    assignment: Assignment = {member_id: {} for member_id in member_ids}
    for topic in seats.topics:
        name = topic.name
        count = group.topics[name]
        quotas: dict[int, int] = {}
        if isinstance(topic.base, int) and topic.base == 0:
            receivers: Sequence[int] = sorted(topic.seats)
        else:
            receivers = topic.subscribers
        for m in receivers:
            quotas[m] = topic.base_of(m) + (m in topic.seats)
        taken = [False] * count
        lists: dict[int, list[int]] = {}
        for m in topic.owned:
            quota = quotas.get(m, 0)
            if quota:
                keep = list(previous[member_ids[m]][name][:quota])  # resolved: ascending
                lists[m] = keep
                for partition in keep:
                    taken[partition] = True
        pool = iter([p for p, is_taken in enumerate(taken) if not is_taken])
        for m in receivers:
            partitions = lists.get(m, [])
            missing = quotas[m] - len(partitions)
            if missing > 0:
                partitions = partitions + [next(pool) for _ in range(missing)]
            if partitions:
                assignment[member_ids[m]][name] = partitions
    return assignment
