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
"""

from __future__ import annotations

from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.lag_aware_search import Search
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
        return search.to_assignment(search.owner)
    return search.to_assignment(base_owner)
