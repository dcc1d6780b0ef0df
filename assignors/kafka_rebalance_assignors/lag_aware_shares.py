"""`lag-aware` with equal partition loads: every member within one partition of its weighted share.

When every subscribed partition weighs the same (the count model, or lags that are all equal),
many assignments reach the same lowest maximum of load / weight, and the search may settle on
one that fills a heavy member to the common level while light members get nothing. Among those
ties the plan should be the proportional one, as `weighted-sticky` guarantees: member m's share is
the sum over its topics t of n_t * w_m / W_t (W_t the summed weight of t's subscribers), and its
partition count should be the share's floor or ceiling.

With equal loads the share bound comes first: a plan whose largest load / weight is lowest but
which leaves a light member with nothing while a heavy one holds more than the ceiling of its
share is not what weights promise when nothing distinguishes one partition from another (and it
drains no faster in practice: lag is unknown or the same everywhere). So the bound may raise
that maximum, never past what the bound itself implies (a taker ends at most at the ceiling of
its share).

`repair_shares` moves partitions from members above the ceiling of their share (or above their
share when someone is below the floor) to members below it. When giver and taker have no topic in
common, the partition travels along a chain of subscribers (each passes one on and receives one,
so only the two ends change count). It prefers, at every link, a partition going back to its
previous owner, then one its holder did not own before, and pays for taking one off its previous
owner out of `budget` (the moves still allowed), so a settled group, whose counts are already
within one, is never touched.

Guaranteed with equal loads: every member ends within one of its share whenever the budget allows
a chain to each violation (always on a fresh group). Not attempted with unequal loads: there the
objective, not the count, decides.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class ShareProblem:
    """The static facts of one plan, in the search's flat numbering (relaxed mode's classes:
    topics with the same subscribers form one class)."""

    topic_of: Sequence[int]  # global partition -> topic index
    subscribers: Sequence[Sequence[int]]  # topic index -> member indexes
    weights: Sequence[float]  # member index -> weight
    previous: Sequence[int]  # global partition -> previous owner (-1 none)
    class_members: Sequence[Sequence[int]]  # class -> its subscribers
    class_sizes: Sequence[int]  # class -> partitions of its topics


def shares(problem: ShareProblem) -> list[Fraction]:
    """Each member's exact weighted share: the sum over its classes of N_c * w / W_c (all the
    topics of a class have the same subscribers, so the same summed weight W_c)."""
    exact = [Fraction(w) for w in problem.weights]
    result = [Fraction(0)] * len(exact)
    for members, size in zip(problem.class_members, problem.class_sizes, strict=True):
        if not members or not size:
            continue
        per_weight = Fraction(size) / sum(exact[i] for i in members)
        for i in members:
            result[i] += exact[i] * per_weight
    return result


def repair_shares(problem: ShareProblem, owner: list[int], budget: float) -> list[int]:
    """`owner`, or a repaired copy with counts moved within one of each member's share where
    the budget allows."""
    members = len(problem.weights)
    share = shares(problem)
    floor = [math.floor(s) for s in share]
    ceil = [math.ceil(s) for s in share]
    tally = Counter(owner)
    count = [tally.get(i, 0) for i in range(members)]
    if all(floor[i] <= count[i] <= ceil[i] for i in range(members)):
        return owner  # the usual case: nothing to build
    owner = list(owner)
    held: list[dict[int, list[int]]] = [{} for _ in range(members)]  # member -> topic -> parts
    for g, i in enumerate(owner):
        if i >= 0:
            held[i].setdefault(problem.topic_of[g], []).append(g)
    for _ in range(len(owner) + 1):  # each round moves one unit of excess
        over = [i for i in range(members) if count[i] > ceil[i]]
        under = [i for i in range(members) if count[i] < floor[i]]
        if over:
            givers = over
            takers = [j for j in range(members) if count[j] < share[j]]
        elif under:
            givers = [i for i in range(members) if count[i] > share[i]]
            takers = under
        else:
            break
        chain = _chain(problem, held, givers, set(takers), budget)
        if chain is None:
            break
        for g, src, dst in chain:
            t = problem.topic_of[g]
            held[src][t].remove(g)
            held[dst].setdefault(t, []).append(g)
            owner[g] = dst
            budget -= (problem.previous[g] == src) - (problem.previous[g] == dst)
        count[chain[0][1]] -= 1
        count[chain[-1][2]] += 1
    return owner


def _chain(
    problem: ShareProblem,
    held: list[dict[int, list[int]]],
    givers: list[int],
    takers: set[int],
    budget: float,
) -> list[tuple[int, int, int]] | None:
    """The shortest chain of (partition, from, to) links from a giver to a taker that the budget
    pays for (breadth first over "holds a partition of a topic the next member subscribes to")."""
    if not takers:
        return None
    came: dict[int, tuple[int, int, int] | None] = dict.fromkeys(givers)
    queue = deque(givers)
    while queue:
        a = queue.popleft()
        spent = _spent(came, a, problem)
        for t, parts in held[a].items():
            if not parts:
                continue
            for b in problem.subscribers[t]:
                if b in came:
                    continue
                g = _pick(parts, a, b, problem.previous)
                cost = (problem.previous[g] == a) - (problem.previous[g] == b)
                if spent + cost > budget:
                    continue
                came[b] = (g, a, b)
                if b in takers:
                    return _path(came, b)
                queue.append(b)
    return None


def _pick(parts: list[int], src: int, dst: int, previous: Sequence[int]) -> int:
    """The partition of `parts` that is cheapest to move from src to dst: one going home first,
    then one src did not own before, then any; lowest number among equals."""
    return min(parts, key=lambda g: (previous[g] != dst, previous[g] == src, g))


def _spent(came: dict[int, tuple[int, int, int] | None], member: int, problem: ShareProblem) -> int:
    return sum(
        (problem.previous[g] == src) - (problem.previous[g] == dst)
        for g, src, dst in _path(came, member)
    )


def _path(came: dict[int, tuple[int, int, int] | None], end: int) -> list[tuple[int, int, int]]:
    links = []
    step = came[end]
    while step is not None:
        links.append(step)
        step = came[step[1]]
    return links[::-1]
