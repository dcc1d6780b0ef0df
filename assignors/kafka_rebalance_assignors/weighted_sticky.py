"""Weighted sticky assignment: per topic, partition counts proportional to member weights.

Per topic, each subscriber's quota is its weighted share of the topic's partitions, rounded by
largest remainder (computed in exact fractions, so equal shares tie exactly and the tie-break is
deterministic: remainder, then how many of the topic's partitions the member already owns, then
member id). A member keeps the partitions it owned up to its quota; the excess and the unowned
partitions fill the members below quota. Only subscribers of a topic ever receive it: the
cross-topic leak of the weighted prototype (research notes, section 4.2) cannot happen because
every pool is per topic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from kafka_rebalance_assignors.model import Assignment, Group, Options, resolve_ownership


def weighted_quotas(
    partitions: int,
    subscribers: Sequence[str],
    weights: Mapping[str, float],
    owned_counts: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Largest-remainder apportionment of `partitions` among `subscribers` by weight.

    Exact arithmetic matters: with float shares, three equal weights give remainders that differ
    in the last bit, and which member gets the extra partition would depend on rounding noise.
    """
    owned_counts = owned_counts or {}
    exact = {m: Fraction(weights[m]) for m in subscribers}
    total = sum(exact.values())
    shares = {m: partitions * exact[m] / total for m in subscribers}
    quotas = {m: int(shares[m]) for m in subscribers}  # floor: shares are >= 0
    left = partitions - sum(quotas.values())
    ranked = sorted(
        subscribers, key=lambda m: (-(shares[m] - quotas[m]), -owned_counts.get(m, 0), m)
    )
    for member_id in ranked[:left]:
        quotas[member_id] += 1
    return quotas


def assign(group: Group, options: Options) -> Assignment:
    del options  # counts only: loads, budgets and hysteresis belong to lag-aware
    previous, _ = resolve_ownership(group)
    weights = {member_id: member.weight for member_id, member in group.members.items()}
    assignment: Assignment = {member_id: {} for member_id in group.members}
    for topic, subscribers in group.subscribers().items():
        owned = {m: previous[m].get(topic, []) for m in subscribers}
        quotas = weighted_quotas(
            group.topics[topic], subscribers, weights, {m: len(p) for m, p in owned.items()}
        )
        taken = [False] * group.topics[topic]
        kept: dict[str, list[int]] = {}
        for member_id in subscribers:
            keep = owned[member_id][: quotas[member_id]]  # resolved ownership is sorted
            kept[member_id] = keep
            for partition in keep:
                taken[partition] = True
        pool = iter([p for p, is_taken in enumerate(taken) if not is_taken])
        for member_id in subscribers:
            partitions = kept[member_id]
            missing = quotas[member_id] - len(partitions)
            if missing > 0:
                partitions = partitions + [next(pool) for _ in range(missing)]
            if partitions:
                assignment[member_id][topic] = partitions
    return assignment
