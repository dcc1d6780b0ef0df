"""Per-partition load under the lag-aware objective's load models, and its lower bound.

Unknown is not zero: a partition whose lag or rate was not reported gets the mean of the known
values of that quantity, so a missing metric neither attracts nor repels partitions. With nothing
known at all every partition weighs 1 and planning degrades to weighted count balance.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain

from kafka_rebalance_assignors.model import Assignment, Group, LoadModel, Options

Loads = dict[str, list[float]]  # topic -> load per partition


def choose_load_model(group: Group, options: Options) -> LoadModel:
    """The explicit model, else drain when rates are known, else lag when lags are, else count."""
    if options.load_model is not None:
        return options.load_model
    if group.rate:
        return "drain"
    if group.lag:
        return "lag"
    return "count"


def _filled(group: Group, reported: Mapping[str, tuple[float, ...]]) -> Loads | None:
    """Reported values per topic, unknown partitions set to the mean of known ones."""
    known = [value for values in reported.values() for value in values]
    if not known:
        return None
    mean = sum(known) / len(known)
    return {
        topic: list(reported[topic]) if topic in reported else [mean] * count
        for topic, count in group.topics.items()
    }


# The strategy and the plan's stats both need the loads of the same (group, options); at a million
# partitions computing them costs as much as a simple strategy. One entry, matched by identity
# (the cache holds both objects, so their ids cannot be reused while the entry lives). Callers
# must treat the returned lists as read-only.
_last: tuple[Group, Options, tuple[LoadModel, Loads]] | None = None


def partition_loads(group: Group, options: Options) -> tuple[LoadModel, Loads]:
    """The load model in force and each partition's load under it (see the module docstring)."""
    global _last
    last = _last  # one read: another thread may replace the entry meanwhile
    if last is not None and last[0] is group and last[1] is options:
        return last[2]
    result = _compute_loads(group, options)
    _last = (group, options, result)
    return result


def _compute_loads(group: Group, options: Options) -> tuple[LoadModel, Loads]:
    model = choose_load_model(group, options)
    lag = _filled(group, group.lag)
    rate = _filled(group, group.rate)
    if model == "lag" and lag is not None:
        return model, lag
    if model == "rate" and rate is not None:
        return model, rate
    if model == "drain" and (lag is not None or rate is not None):
        seconds = options.target_drain_seconds
        loads: Loads = {}
        for topic, count in group.topics.items():
            rates = rate[topic] if rate is not None else [0.0] * count
            lags = lag[topic] if lag is not None else [0.0] * count
            loads[topic] = [r + g / seconds for r, g in zip(rates, lags, strict=True)]
        return model, loads
    return "count", {topic: [1.0] * count for topic, count in group.topics.items()}


def member_loads(assignment: Assignment, loads: Loads) -> dict[str, float]:
    return {
        member: sum(
            sum(map(loads[topic].__getitem__, partitions)) for topic, partitions in owned.items()
        )
        for member, owned in assignment.items()
    }


def lower_bound(group: Group, loads: Loads) -> float:
    """LB = max(sum l / sum w, max_p l_p / max_i w_i) over subscribed partitions and subscribing
    members: no assignment can place its most loaded member below it."""
    subscribed = group.subscribed_topics()
    weights = [m.weight for m in group.members.values() if m.topics]
    if not weights or not subscribed:
        return 0.0
    partition_loads_ = list(chain.from_iterable(map(loads.__getitem__, subscribed)))
    if not partition_loads_:
        return 0.0
    return max(sum(partition_loads_) / sum(weights), max(partition_loads_) / max(weights))


def max_normalised_load(group: Group, assignment: Assignment, loads: Loads) -> float:
    per_member = member_loads(assignment, loads)
    return max(
        (per_member.get(m.member_id, 0.0) / m.weight for m in group.members.values()), default=0.0
    )


def max_load_ratio(group: Group, assignment: Assignment, loads: Loads) -> float:
    """Achieved max normalised load over the lower bound (1.0 is optimal; 1.0 when there is no
    load at all)."""
    bound = lower_bound(group, loads)
    if bound <= 0:
        return 1.0
    return max_normalised_load(group, assignment, loads) / bound
