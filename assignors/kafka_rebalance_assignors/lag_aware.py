"""`lag-aware`: the product's planner. Weighted, sticky, load-balancing under a move budget.

Objective (docs/architecture.md, "The lag-aware objective"): minimise the most loaded member's
normalised load max_i(sum of l_p on i) / w_i, then the number of partitions moved.

1. Keep the resolved previous ownership wherever it is still legal (the owner still subscribes;
   in strict mode, up to the owner's weighted quota for the topic).
2. Place the free partitions (never owned, owner gone or unsubscribed, shed by strict quotas) by
   LPT: heaviest first, each to the eligible member with the least normalised load after taking
   it. This is the *base* plan: the current ownership, completed.
3. Improve: repeatedly take the most loaded member and apply the single move, else the swap with
   a least loaded eligible member, that lowers the pair's maximum the most; a move costs budget
   only when it takes a partition off its previous owner. Stop at the lower bound (within
   LB_TOLERANCE), when no step helps, or when the budget is spent. Then hand partitions back to
   their previous owners wherever that does not raise the maximum, and repeat.
4. Hysteresis: if the improved plan does not beat the base plan by at least `min_improvement`
   (a fraction of the base objective), return the base plan: only free partitions move.
5. Equal loads (the count model, or lags all alike): every member is brought within one
   partition of its weighted share (`lag_aware_shares`, which says why that comes first there),
   with the move budget left; when hysteresis kept the base plan (`min_improvement` > 0), with
   no budget: again only free partitions move.
"""

from __future__ import annotations

import math

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.lag_aware_search import Search
from kafka_rebalance_assignors.lag_aware_shares import ShareProblem, repair_shares
from kafka_rebalance_assignors.model import Assignment


def assign(context: PlanContext) -> Assignment:
    options = context.options
    search = Search(context)
    search.keep_owned()
    search.place_free()
    base_owner = search.snapshot()
    base = search.max_normalised()
    search.improve()
    best = search.max_normalised()
    if best < base and base - best >= options.min_improvement * base:
        chosen, budget = search.owner, search.budget_left
    elif options.min_improvement > 0:
        chosen, budget = base_owner, 0.0  # hysteresis: only free partitions move
    else:
        chosen = base_owner
        budget = math.inf if options.max_moves is None else float(options.max_moves)
    if not search.strict and _equal_loads(search):
        class_sizes = [0] * len(search.class_members)
        for t, c in enumerate(search.topic_class):
            if c >= 0:
                class_sizes[c] += search.sizes[t]
        problem = ShareProblem(
            search.topic_of, search.subs, search.w, search.prev, search.class_members, class_sizes
        )
        chosen = repair_shares(problem, chosen, budget)
    return search.to_assignment(chosen)


def _equal_loads(search: Search) -> bool:
    """Every subscribed partition weighs the same (then counts decide among equal plans)."""
    seen: set[float] = set()
    for t, subs in enumerate(search.subs):
        if subs and search.sizes[t]:
            start = search.offsets[t]
            seen.update(search.load[start : start + search.sizes[t]])
            if len(seen) > 1:
                return False
    return True
