"""The planning context: what one plan derives from its input, computed once and handed to the
strategy and to the plan's checks and stats.

Every strategy needs some of the same derived facts (each partition's load, the KIP-341
resolution of previous ownership as an assignment and as a flat owner array, who subscribes to
what), and so do the plan's moves and stats. `prepare` computes them once per plan; nothing is
cached on the input or in a module.
"""

from __future__ import annotations

from collections.abc import KeysView
from dataclasses import dataclass

from kafka_rebalance_assignors.collector import collector_paused
from kafka_rebalance_assignors.load import Loads, partition_loads
from kafka_rebalance_assignors.model import Group, LoadModel, Options, claim_count, summed_loads
from kafka_rebalance_assignors.ownership import Ownership, resolve


@dataclass(frozen=True, slots=True)
class PlanContext:
    """One plan's input and its derived facts. Shared by everything that plans or measures this
    round: treat every field as read-only."""

    group: Group
    options: Options
    load_model: LoadModel
    loads: Loads  # topic -> load per partition under `load_model`
    offsets: dict[str, int]  # `Group.offsets`: the flat numbering of the owner arrays
    subscribers: dict[str, list[int]]  # `Group.subscriber_indexes`
    ownership: Ownership
    # member id -> load over its resolved previous ownership (topics it no longer subscribes to
    # included), summed per topic list, then the lists in topic order from 0 (an int 0 for a
    # member that owned nothing).
    owned_loads: dict[str, float]

    def subscribed_topics(self) -> KeysView[str]:
        """The topics somebody subscribes to, in topic order."""
        return self.subscribers.keys()

    def subscriber_ids(self) -> dict[str, list[str]]:
        """`subscribers` with member ids instead of indexes (a fresh copy)."""
        ids = list(self.group.members)
        return {t: list(map(ids.__getitem__, m)) for t, m in self.subscribers.items()}


def prepare(group: Group, options: Options) -> PlanContext:
    """Derive everything a plan needs from its validated input, once (collector paused: the
    resolution of a million claims builds as many small lists, see `assignors.collector`)."""
    with collector_paused():
        model, loads = partition_loads(group, options)
        ownership = resolve(group)
        return PlanContext(
            group=group,
            options=options,
            load_model=model,
            loads=loads,
            offsets=group.offsets(),
            subscribers=group.subscriber_indexes(),
            ownership=ownership,
            owned_loads=_owned_loads(ownership, loads, model == "count"),
        )


def _owned_loads(ownership: Ownership, loads: Loads, unit: bool) -> dict[str, float]:
    """Each member's load over its resolved previous ownership. `unit`: every load is 1.0 (the
    count model), so each sum is the exact partition count and no load is read."""
    resolved = ownership.resolved
    if unit:
        sizes = map(claim_count, resolved.values())
        return {m: float(n) if n else 0 for m, n in zip(resolved, sizes, strict=True)}
    getters = {topic: values.__getitem__ for topic, values in loads.items()}
    return {m: summed_loads(getters, owned, 0) for m, owned in resolved.items()}
