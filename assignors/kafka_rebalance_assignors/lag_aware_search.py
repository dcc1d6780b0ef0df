"""The mutable search state behind `lag-aware`: flat partition arrays, lazy heaps, local search.

Partitions are numbered globally (topic offset + partition) so that every hot loop works on flat
lists of ints and floats instead of (topic, partition) tuples. Members are indices into the sorted
member ids. Loads, counts and ownership are kept incrementally; heaps are lazy (each entry carries
the member's version, stale entries are skipped when they surface) because a member's load changes
on every placement and re-heapifying would cost O(members) each time.

Two notions of "class" decide who may receive what:
- relaxed mode: a class is a set of subscribers; topics with the same subscribers share one, so
  with uniform subscriptions there is exactly one class and one heap per distinct weight;
- strict mode: a class is one topic, because counts are constrained per topic (KIP-169's rule).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from itertools import compress, groupby
from operator import ne

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment, FlatAssignment, summed_loads

# Stop improving once the most loaded member is within this fraction of the lower bound: further
# moves buy less balance than they cost in churn.
LB_TOLERANCE = 1e-4
# How many of the least loaded members of each weight (per class) a move or swap may target.
TARGETS_PER_GROUP = 2
# Strict mode scans a topic's subscribers for targets; it keeps this many of the least loaded.
STRICT_TARGETS = 3
# When the move budget is spent, look this far around the ideal partition for a free one.
BUDGET_WINDOW = 16
# Members whose normalised load exceeds the lower bound by more than SHED_TRIGGER shed partitions
# in bulk down to SHED_TARGET above it before the step-by-step descent (see Search._shed).
SHED_TRIGGER = 0.2
SHED_TARGET = 0.01
# Improve/refund rounds: refunding moves can open new improving moves, which are tried again.
MAX_ROUNDS = 4

_EPS = 1e-12

# A heap entry: (load, partition count, member index, the member's version when pushed). An entry
# whose version is behind the member's is stale (loads only grow while placing).
HeapEntry = tuple[float, int, int, int]
Heap = list[HeapEntry]
# An improvement step, sortable: (member, pair maximum after, move cost, 0 move | 1 swap,
# partition, target member, the partition swapped back or -1).
Step = tuple[int, float, int, int, int, int, int]


class Search:
    """One planning round's state. Build, `keep_owned`, `place_free`, then `improve`."""

    def __init__(self, context: PlanContext) -> None:
        group, loads, options = context.group, context.loads, context.options
        self.context = context
        self.strict = options.count_balance == "strict"
        self.max_moves = options.max_moves
        self.ids = list(group.members)
        self.w = [group.members[m].weight for m in self.ids]
        self.topic_names = list(group.topics)
        self.sizes = [group.topics[t] for t in self.topic_names]
        self.offsets: list[int] = []
        self.load: list[float] = []
        self.topic_of: list[int] = []
        self.load_of = loads
        for t, name in enumerate(self.topic_names):
            self.offsets.append(len(self.load))
            self.load.extend(loads[name])
            self.topic_of.extend([t] * self.sizes[t])
        total = len(self.load)

        subscribers = context.subscribers
        self.subs: list[list[int]] = [subscribers.get(name, []) for name in self.topic_names]
        # Previous owner per partition, only when that owner still subscribes (else the partition
        # is free: moving it costs no budget). Built from the group's flat resolution; only a
        # member that claims topics it no longer subscribes to needs a pass over its claims.
        self.group = group
        self.previous_all = context.ownership.owners  # unsubscribed claims included
        self.prev = prev = list(self.previous_all)
        # (member, topic -> partitions) per member with kept claims, for `keep_owned`
        self.claims: list[tuple[int, Mapping[str, Sequence[int]]]] = []
        previous = context.ownership.resolved
        base_of = dict(zip(self.topic_names, self.offsets, strict=True))
        subscription_sets: dict[tuple[str, ...], frozenset[str]] = {}
        for i, owned in enumerate(previous.values()):
            if not owned:
                continue
            topics = group.members[self.ids[i]].topics
            subscribed = subscription_sets.get(topics)
            if subscribed is None:
                subscribed = subscription_sets[topics] = frozenset(topics)
            if not subscribed.issuperset(owned):
                for name in owned.keys() - subscribed:
                    base = base_of[name]
                    for p in owned[name]:
                        prev[base + p] = -1
                owned = {name: ps for name, ps in owned.items() if name in subscribed}
            self.claims.append((i, owned))

        self._build_classes()
        self.owner = [-1] * total
        self.L = [0.0] * len(self.ids)
        self.cnt = [0] * len(self.ids)
        self.ver = [0] * len(self.ids)
        if self.strict:
            self._build_quotas()
        self.lists: list[dict[int, list[tuple[float, int]]]] | None = None
        self.maxheap: list[tuple[float, int, int]] | None = None
        self.budget_left = math.inf if self.max_moves is None else float(self.max_moves)

        loads_subscribed: list[float] = []
        for t, subs in enumerate(self.subs):
            if subs:
                loads_subscribed += self.load[self.offsets[t] : self.offsets[t] + self.sizes[t]]
        weights = [self.w[i] for i in range(len(self.ids)) if group.members[self.ids[i]].topics]
        if loads_subscribed and weights:
            self.lower_bound = max(
                sum(loads_subscribed) / sum(weights), max(loads_subscribed) / max(weights)
            )
        else:
            self.lower_bound = 0.0

    # ------------------------------------------------------------------ set-up

    def _range(self, t: int) -> range:
        return range(self.offsets[t], self.offsets[t] + self.sizes[t])

    def _build_classes(self) -> None:
        self.topic_class = [-1] * len(self.sizes)
        self.class_members: list[list[int]] = []
        keys: dict[object, int] = {}
        for t, subs in enumerate(self.subs):
            if not subs:
                continue
            key: object = t if self.strict else tuple(subs)
            if key not in keys:
                keys[key] = len(self.class_members)
                self.class_members.append(subs)
            self.topic_class[t] = keys[key]
        self.member_classes: list[list[int]] = [[] for _ in self.ids]
        for c, members in enumerate(self.class_members):
            for i in members:
                self.member_classes[i].append(c)

    def _build_heaps(self) -> None:
        """Per class, one lazy min-heap per distinct weight, keyed by (load, count, member)."""
        self.class_heaps: list[list[tuple[float, Heap]]] = []
        self.member_heaps: list[list[Heap]] = [[] for _ in self.ids]
        for members in self.class_members:
            by_weight: dict[float, Heap] = {}
            for i in members:
                heap = by_weight.setdefault(self.w[i], [])
                heap.append((self.L[i], self.cnt[i], i, self.ver[i]))
                self.member_heaps[i].append(heap)
            groups = []
            for weight in sorted(by_weight):
                heapq.heapify(by_weight[weight])
                groups.append((weight, by_weight[weight]))
            self.class_heaps.append(groups)

    def _build_quotas(self) -> None:
        """Strict mode: per topic, each subscriber's count must stay in [floor(q), ceil(q)] of its
        weighted quota q, and exactly `extra[t]` subscribers sit above the floor."""
        self.lo: list[dict[int, int]] = []
        self.hi: list[dict[int, int]] = []
        self.extra: list[int] = []
        self.tcnt: list[dict[int, int]] = []
        self.above: list[int] = []
        for t, subs in enumerate(self.subs):
            lo: dict[int, int] = {}
            hi: dict[int, int] = {}
            if subs:
                exact = {weight: Fraction(weight) for weight in {self.w[i] for i in subs}}
                total = sum(exact[self.w[i]] for i in subs)
                bounds = {}
                for weight, fraction in exact.items():
                    share = self.sizes[t] * fraction / total
                    bounds[weight] = (math.floor(share), math.ceil(share))
                for i in subs:
                    lo[i], hi[i] = bounds[self.w[i]]
            self.lo.append(lo)
            self.hi.append(hi)
            self.extra.append(self.sizes[t] - sum(lo.values()))
            self.tcnt.append(dict.fromkeys(subs, 0))
            self.above.append(0)

    # ------------------------------------------------------------------ primitives

    def _set_owner(self, g: int, i: int) -> None:
        """Assign a currently unowned partition (no heap maintenance)."""
        self.owner[g] = i
        self.L[i] += self.load[g]
        self.cnt[i] += 1
        if self.strict:
            t = self.topic_of[g]
            before = self.tcnt[t][i]
            self.tcnt[t][i] = before + 1
            if before == self.lo[t][i]:
                self.above[t] += 1

    def _touch(self, i: int) -> None:
        self.ver[i] += 1
        entry = (self.L[i], self.cnt[i], i, self.ver[i])
        for heap in self.member_heaps[i]:
            heapq.heappush(heap, entry)
        if self.maxheap is not None:
            heapq.heappush(self.maxheap, (-self.L[i] / self.w[i], i, self.ver[i]))

    def can_receive(self, i: int, t: int) -> bool:
        """Strict mode: may member i take one more partition of topic t?"""
        count = self.tcnt[t][i]
        if count + 1 > self.hi[t][i]:
            return False
        return count + 1 <= self.lo[t][i] or self.above[t] < self.extra[t]

    def can_move(self, src: int, dst: int, t: int) -> bool:
        """Strict mode: may one partition of topic t go from src to dst?"""
        cs, cd = self.tcnt[t][src], self.tcnt[t][dst]
        los, lod = self.lo[t][src], self.lo[t][dst]
        if cs - 1 < los or cd + 1 > self.hi[t][dst]:
            return False
        above = self.above[t] - (cs == los + 1) + (cd == lod)
        return above <= self.extra[t]

    def normalised(self, i: int) -> float:
        return self.L[i] / self.w[i]

    def max_normalised(self) -> float:
        return max((self.L[i] / self.w[i] for i in range(len(self.ids))), default=0.0)

    # ------------------------------------------------------------------ base plan

    def keep_owned(self) -> None:
        """Keep what the previous owners may keep: everything (relaxed) or up to quota (strict,
        lightest first, so the heavy partitions are the ones re-placed by LPT)."""
        if not self.strict:
            self.owner = list(self.prev)
            L, cnt = self.L, self.cnt
            getters = {name: self.load_of[name].__getitem__ for name in self.topic_names}
            # Each claim's load summed per topic list, then in topic order (the float result
            # depends on that order, and the plan's figures must not change with the code):
            # the group's shared figure unless the member lost topics.
            shared = self.context.owned_loads
            resolved = self.context.ownership.resolved
            for i, owned in self.claims:
                member_id = self.ids[i]
                if owned is resolved[member_id]:
                    L[i] += shared[member_id]
                else:
                    L[i] += summed_loads(getters, owned, 0.0)
                cnt[i] += sum(map(len, owned.values()))
        else:
            for t, subs in enumerate(self.subs):
                if not subs:
                    continue
                claims: dict[int, list[int]] = {}
                for g in self._range(t):
                    if self.prev[g] >= 0:
                        claims.setdefault(self.prev[g], []).append(g)
                over = []
                for i, gs in sorted(claims.items()):
                    gs.sort(key=self.load.__getitem__)
                    for g in gs[: self.lo[t][i]]:
                        self._set_owner(g, i)
                    if len(gs) > self.lo[t][i] and self.hi[t][i] > self.lo[t][i]:
                        over.append((-(len(gs) - self.lo[t][i]), i, gs[self.lo[t][i]]))
                for _, i, g in sorted(over)[: self.extra[t]]:
                    self._set_owner(g, i)
        self._build_heaps()

    def place_free(self) -> None:
        """LPT: unowned partitions, heaviest first, each to the eligible member whose normalised
        load after taking it is lowest (ties: lower weighted count, then member order)."""
        owner, topic_of, topic_class, load = self.owner, self.topic_of, self.topic_class, self.load
        # Unowned partitions found at C speed (few of them in a steady round), then filtered.
        unowned = compress(range(len(owner)), map((0).__gt__, owner)) if -1 in owner else ()
        free = [g for g in unowned if topic_class[topic_of[g]] >= 0]
        free.sort(key=load.__getitem__, reverse=True)  # stable: equal loads keep partition order
        if self.strict:
            # Topic by topic, hottest topic first, with heaps built fresh for each topic: a
            # member's load changes with every topic it takes partitions of, and keeping one heap
            # per topic current across all topics would cost a heap update per topic per step.
            by_topic: dict[int, list[int]] = {}
            for g in free:
                by_topic.setdefault(topic_of[g], []).append(g)
            for t in sorted(by_topic, key=lambda t: (-load[by_topic[t][0]], t)):
                groups = self._topic_heaps(t)
                for g in by_topic[t]:
                    i, chosen = self._pick(groups, load[g], t)
                    self._place(g, i, chosen)
            return
        # Relaxed: the hot loop of the planner, inlined (100k partitions in well under a second).
        ver, class_heaps = self.ver, self.class_heaps
        L, cnt = self.L, self.cnt
        heapreplace = heapq.heapreplace
        for g in free:
            groups = class_heaps[topic_class[topic_of[g]]]
            lg = load[g]
            best = math.inf
            target: Heap = groups[0][1]
            for weight, heap in groups:
                head = heap[0]
                while head[3] != ver[head[2]]:  # loads only grow while placing: refresh, sinks
                    m = head[2]
                    heapreplace(heap, (L[m], cnt[m], m, ver[m]))
                    head = heap[0]
                value = (head[0] + lg) / weight
                if value < best:
                    best, target = value, heap
                elif value == best:  # exact tie on load: lower weighted count, then member
                    other = target[0]
                    other_weight = self.w[other[2]]
                    if ((head[1] + 1) / weight, head[2]) < (
                        (other[1] + 1) / other_weight,
                        other[2],
                    ):
                        target = heap
            i = target[0][2]
            owner[g] = i
            L[i] += lg
            cnt[i] += 1
            version = ver[i] + 1
            ver[i] = version
            heapreplace(target, (L[i], cnt[i], i, version))  # other heaps refresh lazily

    def _topic_heaps(self, t: int) -> list[tuple[float, Heap]]:
        by_weight: dict[float, Heap] = {}
        for i in self.subs[t]:
            by_weight.setdefault(self.w[i], []).append((self.L[i], self.cnt[i], i, self.ver[i]))
        for heap in by_weight.values():
            heapq.heapify(heap)
        return sorted(by_weight.items())

    def _place(self, g: int, i: int, chosen: Heap | None) -> None:
        self._set_owner(g, i)
        self.ver[i] += 1
        if chosen is not None:  # i's entry is that heap's head: refresh it in place
            heapq.heapreplace(chosen, (self.L[i], self.cnt[i], i, self.ver[i]))

    def _pick(
        self, groups: list[tuple[float, Heap]], lg: float, t: int, refresh: bool = True
    ) -> tuple[int, Heap | None]:
        """The member (and its heap) whose normalised load after taking lg is lowest. With
        `refresh` (initial placement: one entry per member, loads only grow) a stale head is
        refreshed in place; without it (after `improve` started: every change pushed a fresh
        entry) a stale head is a duplicate and is dropped."""
        best: tuple[float, float, int] | None = None
        chosen = None
        ver = self.ver
        L, cnt = self.L, self.cnt
        for weight, heap in groups:
            while heap:
                load, count, i, v = heap[0]
                if self.strict and not self.can_receive(i, t):
                    heapq.heappop(heap)  # full for the rest of placement
                    continue
                if v != ver[i]:
                    if refresh:
                        heapq.heapreplace(heap, (L[i], cnt[i], i, ver[i]))
                    else:
                        heapq.heappop(heap)
                    continue
                key = ((load + lg) / weight, (count + 1) / weight, i)
                if best is None or key < best:
                    best, chosen = key, heap
                break
        if best is not None:
            return best[2], chosen
        # Strict quotas cannot be met (never expected): fall back to the least loaded subscriber.
        i = min(self.subs[t], key=lambda m: ((self.L[m] + lg) / self.w[m], m))
        return i, None

    # ------------------------------------------------------------------ improvement

    def moved_off_previous(self) -> int:
        prev = self.prev
        return sum(1 for g in self._changed(prev, self.owner) if prev[g] >= 0)

    @staticmethod
    def _changed(before: list[int], after: list[int]) -> Iterable[int]:
        """The partitions whose owner differs, found at C speed (often none at all)."""
        if before == after:
            return ()
        return compress(range(len(after)), map(ne, before, after))

    def improve(self, max_iterations: int | None = None) -> None:
        """Move or swap partitions off the most loaded member while that lowers it, within the
        move budget; then hand back partitions to their previous owners where that keeps the
        objective; repeat while the hand-back opened new room."""
        if self.max_moves is not None:
            self.budget_left = max(0, self.max_moves - self.moved_off_previous())
        # Fresh heaps: placement refreshed entries lazily (loads only grew) and, in strict mode,
        # dropped full members; from here on loads go both ways, so every change pushes an entry.
        self._build_heaps()
        self.maxheap = [(-self.normalised(i), i, self.ver[i]) for i in range(len(self.ids))]
        self.maxheap = [e for e in self.maxheap if self.member_classes[e[1]]]
        heapq.heapify(self.maxheap)
        if not self.strict:
            self._shed()
        limit = max_iterations if max_iterations is not None else 4 * len(self.owner) + 1000
        # End on a descent that found nothing (or the lower bound), never on a hand-back: then
        # replanning this plan with unchanged loads finds nothing to do either.
        for round_ in range(MAX_ROUNDS):
            self._descend(limit)
            if round_ == MAX_ROUNDS - 1 or self._refund() == 0:
                break

    def _shed(self) -> None:
        """Bulk first aid for a grossly unbalanced start (a scale-out from one member to a
        thousand, a member that just joined): members far above the lower bound release their
        largest partitions that fit in their excess, and LPT places what was released. Moving one
        partition per descent step would take a step per partition."""
        trigger = self.lower_bound * (1 + SHED_TRIGGER)
        target = self.lower_bound * (1 + SHED_TARGET)
        over = {i for i in range(len(self.ids)) if self.L[i] / self.w[i] > trigger}
        if not over or self.lower_bound <= 0:
            return
        parts: dict[int, list[int]] = {i: [] for i in over}
        for g, i in enumerate(self.owner):
            if i in over:
                parts[i].append(g)
        released: list[int] = []
        budget = self.budget_left
        for i in sorted(over, key=lambda i: (-self.L[i] / self.w[i], i)):
            excess = self.L[i] - target * self.w[i]
            for g in sorted(parts[i], key=lambda g: (-self.load[g], g)):
                lg = self.load[g]
                if excess <= 0 or lg <= 0:
                    break
                if lg > excess:
                    continue
                cost = int(self.prev[g] == i)
                if cost > budget:
                    continue
                budget -= cost
                excess -= lg
                self.owner[g] = -1
                self.L[i] -= lg
                self.cnt[i] -= 1
                released.append(g)
            self._touch(i)
        released.sort(key=lambda g: (-self.load[g], g))
        for g in released:
            t = self.topic_of[g]
            i, _ = self._pick(self.class_heaps[self.topic_class[t]], self.load[g], t, False)
            self._set_owner(g, i)
            self._touch(i)
        if self.max_moves is not None:
            self.budget_left = max(0, self.max_moves - self.moved_off_previous())

    def _build_lists(self) -> None:
        """Per member, per class: its partitions as a sorted list of (load, global id)."""
        lists: list[dict[int, list[tuple[float, int]]]] = [{} for _ in self.ids]
        load, topic_class, topic_of = self.load, self.topic_class, self.topic_of
        for g, i in enumerate(self.owner):
            if i >= 0:
                c = topic_class[topic_of[g]]
                bucket = lists[i].get(c)
                if bucket is None:
                    bucket = lists[i][c] = []
                bucket.append((load[g], g))
        for by_class in lists:
            for bucket in by_class.values():
                bucket.sort()
        self.lists = lists

    def _top(self) -> int:
        heap, ver = self.maxheap, self.ver
        while heap and heap[0][2] != ver[heap[0][1]]:
            heapq.heappop(heap)
        return heap[0][1] if heap else -1

    def _descend(self, limit: int) -> None:
        stop = self.lower_bound * (1 + LB_TOLERANCE)
        for _ in range(limit):
            m = self._top()
            if m < 0 or self.normalised(m) <= stop:
                return
            step = self._best_step(m)
            if step is None:
                return
            self._apply(step)

    def _targets(self, c: int, m: int, t: int | None) -> list[int]:
        """Least loaded members of class c other than m: the heads of each weight's heap
        (relaxed), or a scan of the topic's subscribers (strict; t given for moves, which must
        respect quotas)."""
        if self.strict:
            members = [
                x for x in self.class_members[c] if x != m and (t is None or self.can_move(m, x, t))
            ]
            return heapq.nsmallest(STRICT_TARGETS, members, key=lambda x: (self.normalised(x), x))
        found: list[int] = []
        ver = self.ver
        for _, heap in self.class_heaps[c]:
            held: list[HeapEntry] = []
            while heap and len(held) < TARGETS_PER_GROUP + 1:
                entry = heapq.heappop(heap)
                if entry[3] != ver[entry[2]]:
                    continue
                held.append(entry)
                if entry[2] != m:
                    found.append(entry[2])
                    if sum(1 for e in held if e[2] != m) >= TARGETS_PER_GROUP:
                        break
            for entry in held:
                heapq.heappush(heap, entry)
        return found

    def _cost(self, g: int, src: int, dst: int) -> int:
        p = self.prev[g]
        return (p == src) - (p == dst)

    def _best_step(self, m: int) -> Step | None:
        """The move (else the swap) that lowers the pair maximum most, as a sortable tuple."""
        if self.lists is None:
            self._build_lists()  # only now: a plan already at the lower bound never needs them
        lists = self.lists
        assert lists is not None
        w, L = self.w, self.L
        wm, lm = w[m], L[m]
        nm = lm / wm
        threshold = nm * (1 - _EPS)
        best: tuple[float, int, int, int, int, int] | None = None
        for c, mine in lists[m].items():
            if not mine:
                continue
            t = self.topic_of[mine[0][1]] if self.strict else None
            for x in self._targets(c, m, t):
                wx, lx = w[x], L[x]
                if lx / wx >= threshold:
                    continue
                ideal = (lm * wx - lx * wm) / (wm + wx)
                k = bisect_left(mine, (ideal, -1))
                window: tuple[int, ...] = (k - 1, k)
                if self.budget_left < 1:
                    window = tuple(range(max(0, k - BUDGET_WINDOW), k + BUDGET_WINDOW))
                for j in window:
                    if not 0 <= j < len(mine):
                        continue
                    lg, g = mine[j]
                    if lg <= 0:
                        continue
                    pair = max((lm - lg) / wm, (lx + lg) / wx)
                    if pair >= threshold:
                        continue
                    cost = self._cost(g, m, x)
                    if cost > self.budget_left:
                        continue
                    candidate = (pair, cost, 0, g, x, -1)
                    if best is None or candidate < best:
                        best = candidate
        if best is not None:
            return (m, *best)
        for c, mine in lists[m].items():
            for x in self._targets(c, m, None):
                theirs = lists[x].get(c)
                if not theirs:
                    continue
                wx, lx = w[x], L[x]
                if lx / wx >= threshold:
                    continue
                ideal = (lm * wx - lx * wm) / (wm + wx)
                for lg, g in mine:
                    if lg <= 0:
                        continue
                    k = bisect_left(theirs, (lg - ideal, -1))
                    for j in (k - 1, k):
                        if not 0 <= j < len(theirs):
                            continue
                        lq, q = theirs[j]
                        delta = lg - lq
                        if delta <= 0:
                            continue
                        pair = max((lm - delta) / wm, (lx + delta) / wx)
                        if pair >= threshold:
                            continue
                        cost = self._cost(g, m, x) + self._cost(q, x, m)
                        if cost > self.budget_left:
                            continue
                        candidate = (pair, cost, 1, g, x, q)
                        if best is None or candidate < best:
                            best = candidate
        return None if best is None else (m, *best)

    def _move(self, g: int, src: int, dst: int) -> None:
        lg = self.load[g]
        self.owner[g] = dst
        self.L[src] -= lg
        self.L[dst] += lg
        self.cnt[src] -= 1
        self.cnt[dst] += 1
        t = self.topic_of[g]
        if self.strict:
            counts, lo = self.tcnt[t], self.lo[t]
            self.above[t] += -(counts[src] == lo[src] + 1) + (counts[dst] == lo[dst])
            counts[src] -= 1
            counts[dst] += 1
        self.budget_left -= self._cost(g, src, dst)
        if self.lists is not None:
            c = self.topic_class[t]
            mine = self.lists[src][c]
            del mine[bisect_left(mine, (lg, g))]
            insort(self.lists[dst].setdefault(c, []), (lg, g))

    def _apply(self, step: Step) -> None:
        m, _pair, _cost, kind, g, x, q = step
        self._move(g, m, x)
        if kind == 1:
            self._move(q, x, m)
        self._touch(m)
        self._touch(x)

    def _refund(self) -> int:
        """Give partitions back to their previous owner when that does not raise the objective:
        the second objective (fewest moves) at no cost to the first."""
        ceiling = self.max_normalised() * (1 + _EPS)
        moved = [g for g in self._changed(self.prev, self.owner) if self.prev[g] >= 0]
        moved.sort(key=lambda g: (self.load[g], g))
        refunded = 0
        for g in moved:
            src, dst = self.owner[g], self.prev[g]
            if (self.L[dst] + self.load[g]) / self.w[dst] > ceiling:
                continue
            if self.strict and not self.can_move(src, dst, self.topic_of[g]):
                continue
            self._move(g, src, dst)
            self._touch(src)
            self._touch(dst)
            refunded += 1
        return refunded

    # ------------------------------------------------------------------ output

    def snapshot(self) -> list[int]:
        return list(self.owner)

    def to_assignment(self, owner: list[int]) -> FlatAssignment:
        """Back to member -> topic -> sorted partitions, in the plan's normal form. A member
        whose partitions are exactly those it owned before (every member, in a steady round)
        gets copies of its resolved previous lists; the others are built from the owner array
        (`_build`). The flat array travels with the result (see `FlatAssignment`)."""
        previous = self.previous_all
        changed: set[int] = set()
        if owner != previous:
            differs = list(map(ne, previous, owner))
            changed.update(compress(previous, differs), compress(owner, differs))
            changed.discard(-1)
        result = FlatAssignment(self.group, owner)
        if len(changed) * 2 > len(self.ids):
            result.update(self._build(owner, None))
            return result
        built = self._build(owner, changed) if changed else {}
        resolved = self.context.ownership.resolved
        for i, (member_id, owned) in enumerate(resolved.items()):
            if i in changed:
                result[member_id] = built[member_id]
            else:
                result[member_id] = dict(zip(owned, map(list, owned.values()), strict=True))
        return result

    def _build(self, owner: list[int], only: set[int] | None) -> Assignment:
        """The lists of every member (`only` None) or of the members in `only`, from the owner
        array. When owners hold long runs of a topic, a stable sort of partition numbers by
        owner groups them at C speed; otherwise one pass."""
        if only is not None:
            result: Assignment = {self.ids[i]: {} for i in sorted(only)}
            per_member = {i: result[self.ids[i]] for i in only}
            names, topic_of, offsets = self.topic_names, self.topic_of, self.offsets
            for g in compress(range(len(owner)), map(only.__contains__, owner)):
                t = topic_of[g]
                bucket = per_member[owner[g]].setdefault(names[t], [])
                bucket.append(g - offsets[t])
            return result
        result = {member_id: {} for member_id in self.ids}
        everyone: list[dict[str, list[int]]] = [result[m] for m in self.ids]
        for t, name in enumerate(self.topic_names):
            base = self.offsets[t]
            owners = owner[base : base + self.sizes[t]]
            if not owners or (owners[0] < 0 and owners.count(-1) == len(owners)):
                continue
            if len(set(owners)) * 8 < len(owners):  # long runs per owner: sort and group
                by_owner = sorted(range(len(owners)), key=owners.__getitem__)
                for i, run in groupby(by_owner, key=owners.__getitem__):
                    if i >= 0:
                        everyone[i][name] = list(run)
                continue
            for p, i in enumerate(owners):  # a few partitions per owner: one pass
                if i >= 0:
                    found = everyone[i].get(name)
                    if found is None:
                        everyone[i][name] = [p]
                    else:
                        found.append(p)
        return result
