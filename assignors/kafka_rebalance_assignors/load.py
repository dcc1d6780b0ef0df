"""Per-partition load under the lag-aware objective's load models, and its lower bound.

Unknown is not zero, and this module is the one place that says what it counts as: a partition
whose lag or rate was not reported (a null in its topic's array) gets the mean of its topic's
reported values; a topic with nothing reported (absent from the map) gets the mean over every
partition of the topics that have values, so a missing metric neither attracts nor repels
partitions. The topic is the grain first because partitions of one topic share a producer and a
consumer code path, so their lags are alike; across topics they need not be. With nothing known
at all every partition weighs 1 and planning degrades to weighted count balance.

Pure: no caches. `context.prepare` computes the loads of a plan once and hands them around.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from typing import cast

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


def _filled(
    group: Group, reported: Mapping[str, tuple[float | None, ...]], name: str
) -> Loads | None:
    """Reported values per topic, unknown partitions filled (see the module docstring); None
    when nothing at all is known."""
    topics: dict[str, list[float]] = {}
    for topic, values in reported.items():
        if (name, topic) not in group.gaps:
            # A topic without a gap has every value known (`Group.gaps` records the others).
            topics[topic] = cast("list[float]", list(values))
            continue
        known = [value for value in values if value is not None]
        if known:
            mean = sum(known) / len(known)
            topics[topic] = [mean if value is None else value for value in values]
    known = [value for values in topics.values() for value in values]
    if not known:
        return None
    mean = sum(known) / len(known)
    return {
        topic: topics[topic] if topic in topics else [mean] * count
        for topic, count in group.topics.items()
    }


def partition_loads(group: Group, options: Options) -> tuple[LoadModel, Loads]:
    """The load model in force and each partition's load under it (see the module docstring)."""
    model = choose_load_model(group, options)
    lag = _filled(group, group.lag, "lag")
    rate = _filled(group, group.rate, "rate")
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
    # one list per distinct partition count, shared by its topics (loads are read-only)
    ones = {count: [1.0] * count for count in set(group.topics.values())}
    return "count", {topic: ones[count] for topic, count in group.topics.items()}


def member_loads(assignment: Assignment, loads: Loads) -> dict[str, float]:
    return {
        member: sum(
            sum(map(loads[topic].__getitem__, partitions)) for topic, partitions in owned.items()
        )
        for member, owned in assignment.items()
    }


def lower_bound(
    group: Group, loads: Loads, subscribed: Iterable[str] | None = None, unit: bool = False
) -> float:
    """LB = max(sum l / sum w, max_p l_p / max_i w_i) over subscribed partitions (`subscribed`:
    the group's subscribed topics when already known) and subscribing members: no assignment can
    place its most loaded member below it. `unit`: every load is 1.0 (the count model), so the
    sum is the exact partition count and the largest load 1.0, and no load is read."""
    subscribed = list(group.subscribed_topics() if subscribed is None else subscribed)
    weights = [m.weight for m in group.members.values() if m.topics]
    if not weights or not subscribed:
        return 0.0
    per_topic = list(map(loads.__getitem__, subscribed))
    if not any(per_topic):
        return 0.0
    if unit:  # summing n ones in floating point is exact: the same float as the loop below
        return max(float(sum(map(len, per_topic))) / sum(weights), 1.0 / max(weights))
    # summed in partition order, as one sequence (the order fixes the float result)
    total = sum(chain.from_iterable(per_topic))
    return max(total / sum(weights), max(map(max, filter(None, per_topic))) / max(weights))


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
