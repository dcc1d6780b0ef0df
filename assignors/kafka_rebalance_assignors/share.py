"""Share-group planning (KIP-932): which members consume which partitions, several per partition
where the load needs them. Pure: no I/O, deterministic for the same input.

In a share group the records of one partition are handed out to every member assigned to it, so
a partition can have several members and a member several partitions. The planner models a
member's capacity (its weight) as spread evenly over the partitions it holds, so a partition is
served by `served(p) = sum(capacity(m) / len(partitions(m)) for m on p)`, and its pressure is
`load(p) / served(p)` with `load(p) = rate(p) + backlog(p) / drain_seconds` (records per second
it must get through to drain its backlog within the drain time). The plan minimises the peak
pressure, then the sum of squared pressures (so an idle member still joins a busy partition when
that relieves it without lowering the peak).

Invariants of every plan:
- every partition of a topic some member subscribes to has at least one member, and only members
  subscribed to its topic;
- sticky: a (member, partition) pair of the current assignment stays unless dropping it lowers
  the objective (it is needed) or it is invalid (topic unsubscribed, partition gone);
- moves: adding or dropping one (member, partition) pair is one move; covering a partition that
  has no member and dropping invalid pairs are forced and free, every other move counts against
  `max_moves`;
- every accepted step strictly lowers (peak, sum of squares), so planning ends.

The figures (`peak_before`, `peak_after`) let a caller apply minImprovement and hysteresis.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_assignors.model import PlanInputError

TopicPartition = tuple[str, int]

DEFAULT_DRAIN_SECONDS = 300.0
_EPSILON = 1e-9
# A partition with no load still deserves a share of the members: with no rate and no backlog
# anywhere every partition counts the same, so the plan balances members by count.
_IDLE_LOAD = 1e-6


@dataclass(frozen=True, slots=True)
class PartitionLoad:
    """What one share-partition asks of the group: records per second arriving, records waiting."""

    rate: float = 0.0
    backlog: float = 0.0


@dataclass(frozen=True, slots=True)
class ShareMemberInput:
    """One share member: the topics it subscribes to and its capacity weight (> 0)."""

    member_id: str
    topics: frozenset[str]
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class ShareRequest:
    """A share group to plan. `partitions` holds every partition of every topic the group may
    read (per topic, numbered 0..n-1); `current` is member -> partitions it holds now (several
    members may hold one partition); `max_moves` None means no budget."""

    partitions: Mapping[TopicPartition, PartitionLoad]
    members: Mapping[str, ShareMemberInput]
    current: Mapping[str, frozenset[TopicPartition]] = field(default_factory=dict)
    drain_seconds: float = DEFAULT_DRAIN_SECONDS
    max_moves: int | None = None


@dataclass(frozen=True, slots=True)
class SharePlan:
    """The planned assignment and the figures a caller decides with.

    `assignment`: member -> topic -> sorted partitions (every member present, maybe empty).
    `peak_before`: the current assignment's peak pressure, None when it leaves a partition
    without a member (or has none at all); `peak_after` the plan's (None only when no partition
    is to be read). `moves`: pairs added or dropped in all; `budgeted_moves` those counted
    against the budget; `budget_exhausted`: planning stopped at the budget, not at the optimum."""

    assignment: Mapping[str, Mapping[str, tuple[int, ...]]]
    members_per_partition: Mapping[TopicPartition, int]
    loads: Mapping[TopicPartition, float]
    peak_before: float | None
    peak_after: float | None
    moves: int
    budgeted_moves: int
    budget_exhausted: bool

    def improvement(self) -> float:
        """Relative drop of the peak pressure, 1.0 when the current assignment leaves a partition
        unread, 0.0 when there is nothing to compare."""
        if self.peak_after is None:
            return 0.0
        if self.peak_before is None:
            return 1.0
        if self.peak_before <= 0:
            return 0.0
        return (self.peak_before - self.peak_after) / self.peak_before

    def to_document(self) -> dict[str, Any]:
        """The JSON form `kafka-rebalance plan` prints (sorted, deterministic)."""
        per_topic: dict[str, list[int]] = {}
        for (topic, partition), count in sorted(self.members_per_partition.items()):
            per_topic.setdefault(topic, [])
            while len(per_topic[topic]) < partition:
                per_topic[topic].append(0)
            per_topic[topic].append(count)
        return {
            "groupType": "share",
            "assignment": {
                member: {topic: list(parts) for topic, parts in sorted(topics.items())}
                for member, topics in sorted(self.assignment.items())
            },
            "members_per_partition": per_topic,
            "stats": {
                "peak_load_per_capacity_before": _rounded(self.peak_before),
                "peak_load_per_capacity_after": _rounded(self.peak_after),
                "improvement": round(self.improvement(), 6),
                "moves": self.moves,
                "budgeted_moves": self.budgeted_moves,
                "budget_exhausted": self.budget_exhausted,
            },
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def partition_load(load: PartitionLoad, drain_seconds: float) -> float:
    """Records per second a partition needs: its rate plus its backlog over the drain time."""
    return load.rate + load.backlog / drain_seconds


class _State:
    """A working assignment with each partition's served capacity and pressure, kept current in
    place: a step changes one member, so only that member's partitions are recomputed."""

    def __init__(
        self,
        loads: Mapping[TopicPartition, float],
        weights: Mapping[str, float],
        holdings: dict[str, set[TopicPartition]],
    ) -> None:
        self.loads = loads
        self.weights = weights
        self.holdings = holdings
        self.holders: dict[TopicPartition, set[str]] = {tp: set() for tp in loads}
        for member, parts in holdings.items():
            for tp in parts:
                self.holders[tp].add(member)
        self.served: dict[TopicPartition, float] = {}
        self.pressures: dict[TopicPartition, float] = {}
        self.squares = 0.0  # the sum of squared pressures, kept with them
        for tp in loads:
            self._refresh(tp)

    def share(self, member: str, parts: set[TopicPartition] | None = None) -> float:
        """The capacity `member` gives each partition it holds (or would hold: `parts`)."""
        held = self.holdings[member] if parts is None else parts
        return self.weights[member] / len(held) if held else 0.0

    def _refresh(self, tp: TopicPartition) -> None:
        served = sum(self.share(m) for m in self.holders[tp])
        self.served[tp] = served
        self.squares -= self.pressures.get(tp, 0.0) ** 2
        self.pressures[tp] = math.inf if served <= 0 else self.loads[tp] / served
        self.squares += self.pressures[tp] ** 2

    def exact_squares(self) -> float:
        """The sum of squared pressures summed afresh (drops the running sum's rounding)."""
        self.squares = sum(v * v for v in self.pressures.values())
        return self.squares

    def apply(self, member: str, parts: set[TopicPartition]) -> None:
        """`member` holds `parts` from now on."""
        affected = self.holdings[member] | parts
        for tp in self.holdings[member] - parts:
            self.holders[tp].discard(member)
        for tp in parts - self.holdings[member]:
            self.holders[tp].add(member)
        self.holdings[member] = set(parts)
        for tp in affected:
            self._refresh(tp)


def _better(new: tuple[float, float], old: tuple[float, float]) -> bool:
    """Strictly lower peak, or the same peak and a strictly lower sum of squares."""
    if new[0] < old[0] * (1 - _EPSILON) - _EPSILON:
        return True
    if new[0] > old[0] * (1 + _EPSILON) + _EPSILON:
        return False
    return new[1] < old[1] * (1 - _EPSILON) - _EPSILON


def plan_share(request: ShareRequest) -> SharePlan:
    """Plan a share group (see the module docstring for the invariants)."""
    if request.drain_seconds <= 0 or not math.isfinite(request.drain_seconds):
        raise PlanInputError("options.drain_seconds", "must be a positive number of seconds")
    members = dict(sorted(request.members.items()))
    subscribed_topics = {topic for m in members.values() for topic in m.topics}
    wanted = sorted(tp for tp in request.partitions if tp[0] in subscribed_topics)
    raw = {tp: partition_load(request.partitions[tp], request.drain_seconds) for tp in wanted}
    loads = {tp: max(value, _IDLE_LOAD) for tp, value in raw.items()}
    weights = {member_id: m.weight for member_id, m in members.items()}

    holdings: dict[str, set[TopicPartition]] = {}
    before_pairs: set[tuple[str, TopicPartition]] = set()
    for member_id, member in members.items():
        valid = {
            tp
            for tp in request.current.get(member_id, frozenset())
            if tp in loads and tp[0] in member.topics
        }
        holdings[member_id] = valid
        before_pairs.update((member_id, tp) for tp in valid)
    state = _State(loads, weights, holdings)
    pressures = state.pressures
    peak_before = (
        max(pressures.values())
        if pressures and all(math.isfinite(v) for v in pressures.values())
        else None
    )
    if not any(request.current.values()):
        peak_before = None

    # Forced: every wanted partition gets a member, the least pressed subscribed one.
    for tp in sorted(wanted, key=lambda tp: (-loads[tp], tp)):
        if state.holders[tp]:
            continue
        candidates = [m for m in members if tp[0] in members[m].topics]
        chosen = min(
            candidates, key=lambda m: (_member_pressure(state, m), len(state.holdings[m]), m)
        )
        state.apply(chosen, state.holdings[chosen] | {tp})
    forced_pairs = {(m, tp) for m, parts in state.holdings.items() for tp in parts} - before_pairs
    state.exact_squares()  # (unread partitions counted as infinite until now)

    budget = request.max_moves
    budgeted = 0
    steps = 0
    exhausted = False
    while wanted:
        if budget is not None and budgeted >= budget:
            exhausted = _best_step(state, members, None) is not None
            break
        step = _best_step(state, members, None if budget is None else budget - budgeted)
        if step is None:
            # (a step costing more than the budget left may still exist)
            exhausted = budget is not None and _best_step(state, members, None) is not None
            break
        member_id, parts, cost = step
        state.apply(member_id, parts)
        budgeted += cost
        steps += 1
        if steps % 64 == 0:
            state.exact_squares()

    after_pairs = {(m, tp) for m, parts in state.holdings.items() for tp in parts}
    assignment: dict[str, dict[str, tuple[int, ...]]] = {}
    for member_id in members:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(state.holdings[member_id]):
            topics.setdefault(topic, []).append(partition)
        assignment[member_id] = {topic: tuple(parts) for topic, parts in topics.items()}
    invalid = {
        (m, tp)
        for m, parts in request.current.items()
        for tp in parts
        if m not in members or tp not in loads or tp[0] not in members[m].topics
    }
    return SharePlan(
        assignment=assignment,
        members_per_partition={tp: len(state.holders[tp]) for tp in wanted},
        loads=raw,
        peak_before=peak_before,
        peak_after=max(state.pressures.values()) if state.pressures else None,
        moves=len(after_pairs ^ before_pairs) + len(invalid),
        budgeted_moves=len((after_pairs ^ before_pairs) - forced_pairs),
        budget_exhausted=exhausted,
    )


def _member_pressure(state: _State, member: str) -> float:
    """Load a member carries per unit of its capacity (each partition's load split by holders)."""
    total = 0.0
    for tp in state.holdings[member]:
        total += state.loads[tp] / max(1, len(state.holders[tp]))
    return total / state.weights[member]


def _best_step(
    state: _State, members: Mapping[str, ShareMemberInput], budget_left: int | None
) -> tuple[str, set[TopicPartition], int] | None:
    """The best single step that relieves the most pressed partition, or None when no step
    lowers (peak, sum of squares). The hottest partition of each topic is tried, hottest first,
    until one has such a step (a topic's hot partition may have no member left to give it: one
    subscriber, or all of them on it already; another topic may still gain)."""
    pressures = state.pressures
    reach = 2 + max((len(held) for held in state.holdings.values()), default=0)
    # the highest pressures: the peak outside a step's partitions is among the first `reach`
    top = heapq.nlargest(reach, pressures.items(), key=lambda item: (item[1], item[0]))
    objective = (top[0][1], state.squares)
    first = top[0][0]
    step = _best_step_for(state, members, first, top, objective, budget_left)
    if step is not None:
        return step
    hottest: dict[str, TopicPartition] = {}
    for tp, value in pressures.items():
        known = hottest.get(tp[0])
        if tp[0] != first[0] and (known is None or (value, tp) > (pressures[known], known)):
            hottest[tp[0]] = tp
    for hot in sorted(hottest.values(), key=lambda tp: (-pressures[tp], tp)):
        step = _best_step_for(state, members, hot, top, objective, budget_left)
        if step is not None:
            return step
    return None


def _best_step_for(
    state: _State,
    members: Mapping[str, ShareMemberInput],
    hot: TopicPartition,
    top: list[tuple[TopicPartition, float]],
    objective: tuple[float, float],
    budget_left: int | None,
) -> tuple[str, set[TopicPartition], int] | None:
    """The best step that relieves `hot` (h), or None. Steps, each for a member m subscribed to
    h's topic: add h to m (1 move); move m from a partition q that keeps another member to h
    (2 moves); for m already on h, drop a partition q that keeps another member (1 move),
    giving h more of m. `top`: the highest pressures, at least 2 more than any member holds.

    Each step is scored from the served capacities without building it: only m's share
    (weight / partitions held) changes, so only m's partitions and h change pressure."""
    pressures, served, loads = state.pressures, state.served, state.loads
    subscribed = [m for m in members if hot[0] in members[m].topics]

    def pressure(tp: TopicPartition, capacity: float) -> float:
        return math.inf if capacity <= 1e-12 else loads[tp] / capacity

    best: tuple[tuple[float, float], str, TopicPartition | None, int] | None = None
    for member_id in subscribed:
        held = state.holdings[member_id]
        weight, k = state.weights[member_id], len(held)
        share = weight / k if k else 0.0
        # (changed pressures, partitions left out of the outside peak, dropped q or None, cost)
        options: list[
            tuple[
                list[tuple[TopicPartition, float]], set[TopicPartition], TopicPartition | None, int
            ]
        ] = []
        if hot in held:
            if k >= 2:
                wider = weight / (k - 1)
                for q in sorted(held - {hot}):
                    if len(state.holders[q]) < 2:
                        continue
                    changed = [(r, pressure(r, served[r] - share + wider)) for r in held if r != q]
                    changed.append((q, pressure(q, served[q] - share)))
                    options.append((changed, held, q, 1))
        else:
            narrower = weight / (k + 1)
            changed = [(r, pressure(r, served[r] - share + narrower)) for r in held]
            changed.append((hot, pressure(hot, served[hot] + narrower)))
            options.append((changed, held | {hot}, None, 1))
            for q in sorted(held):
                if len(state.holders[q]) < 2:
                    continue
                changed = [
                    (q, pressure(q, served[q] - share)),
                    (hot, pressure(hot, served[hot] + share)),
                ]
                options.append((changed, {q, hot}, q, 2))
        for changed, affected, dropped, cost in options:
            if budget_left is not None and cost > budget_left:
                continue
            peak = next((v for tp, v in top if tp not in affected), 0.0)
            squares = objective[1]
            for tp, value in changed:
                peak = max(peak, value)
                squares += value * value - pressures[tp] ** 2
            candidate = (peak, squares)
            if _better(candidate, objective) and (best is None or _better(candidate, best[0])):
                best = (candidate, member_id, dropped, cost)
    if best is None:
        return None
    _, member_id, dropped, cost = best
    parts = set(state.holdings[member_id])
    if dropped is not None:
        parts.discard(dropped)
    if cost == 2 or hot not in parts:
        parts.add(hot)
    return member_id, parts, cost


def _number(value: Any, field_path: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PlanInputError(field_path, f"{value!r} is not a finite number")
    if value < 0 or (positive and value == 0):
        raise PlanInputError(field_path, f"{value!r} must be {'> 0' if positive else '>= 0'}")
    return float(value)


def _object(value: Any, field_path: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise PlanInputError(field_path, "must be a JSON object")
    return value


def _per_partition(
    document: Mapping[str, Any], name: str, topics: Mapping[str, int]
) -> dict[TopicPartition, float]:
    values: dict[TopicPartition, float] = {}
    for topic, row in _object(document.get(name, {}), name).items():
        if topic not in topics:
            raise PlanInputError(f"{name}.{topic}", "names a topic absent from topics")
        if not isinstance(row, list) or len(row) != topics[topic]:
            raise PlanInputError(f"{name}.{topic}", f"must be a list of {topics[topic]} numbers")
        for partition, value in enumerate(row):
            values[(topic, partition)] = _number(value, f"{name}.{topic}[{partition}]")
    return values


def parse_share_request(document: Any) -> ShareRequest:
    """The request a share plan document states (docs/share-groups.md, "Previewing a plan").
    Raises PlanInputError naming the field on bad input."""
    document = _object(document, "input")
    if document.get("groupType") != "share":
        raise PlanInputError("groupType", 'a share plan document says "groupType": "share"')
    topics: dict[str, int] = {}
    for topic, count in _object(document.get("topics"), "topics").items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise PlanInputError(f"topics.{topic}", f"{count!r} is not a partition count >= 0")
        topics[topic] = count
    rates = _per_partition(document, "rate", topics)
    backlogs = _per_partition(document, "backlog", topics)
    partitions = {
        (topic, p): PartitionLoad(rates.get((topic, p), 0.0), backlogs.get((topic, p), 0.0))
        for topic, count in topics.items()
        for p in range(count)
    }
    members: dict[str, ShareMemberInput] = {}
    current: dict[str, frozenset[TopicPartition]] = {}
    for member_id, spec in _object(document.get("members"), "members").items():
        where = f"members.{member_id}"
        spec = _object(spec, where)
        subscribed = spec.get("topics")
        if not isinstance(subscribed, list) or not all(isinstance(t, str) for t in subscribed):
            raise PlanInputError(f"{where}.topics", "must be a list of topic names")
        weight = _number(spec.get("weight", 1.0), f"{where}.weight", positive=True)
        members[member_id] = ShareMemberInput(member_id, frozenset(subscribed), weight)
        held: set[TopicPartition] = set()
        for topic, parts in _object(spec.get("owned", {}), f"{where}.owned").items():
            if not isinstance(parts, list):
                raise PlanInputError(f"{where}.owned.{topic}", "must be a list of partitions")
            for p in parts:
                if isinstance(p, bool) or not isinstance(p, int) or p < 0:
                    raise PlanInputError(f"{where}.owned.{topic}", f"{p!r} is not a partition")
                held.add((topic, p))  # stale ones (gone topic or partition) are dropped by the plan
        current[member_id] = frozenset(held)
    options = _object(document.get("options", {}), "options")
    drain = _number(
        options.get("drain_seconds", DEFAULT_DRAIN_SECONDS), "options.drain_seconds", positive=True
    )
    max_moves = options.get("max_moves")
    if max_moves is not None and (
        isinstance(max_moves, bool) or not isinstance(max_moves, int) or max_moves < 0
    ):
        raise PlanInputError("options.max_moves", f"{max_moves!r} is not a whole number >= 0")
    return ShareRequest(partitions, members, current, drain, max_moves)


def plan_share_document(document: Any) -> dict[str, Any]:
    """`parse_share_request` then `plan_share`, as the plan command's JSON."""
    return plan_share(parse_share_request(document)).to_document()
