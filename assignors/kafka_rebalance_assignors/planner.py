"""One planning round: a typed request -> target assignment, moves and stats (a typed `Plan`).

`plan_request` is the planning path of every caller: it validates the request
(`validation.validate`) and plans it. The `plan` command's JSON document reaches it through
`parsing.plan`, the contract's adapter, so what a user previews is what the operator applies.
`plan_group` prepares the planning context once (see
`assignors.context`), runs the strategy on it, and measures the result against the same context.
Pure: no I/O, deterministic for the same input. Everything here works on flat owner arrays (one
entry per partition of the group, see `Group.offsets`) and C-level maps over each member's lists,
so that it stays linear and cheap at a million partitions.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, compress
from operator import add, itemgetter, lt, ne

from kafka_rebalance_assignors.collector import collector_paused
from kafka_rebalance_assignors.context import PlanContext, prepare
from kafka_rebalance_assignors.load import lower_bound
from kafka_rebalance_assignors.model import (
    Assignment,
    FlatAssignment,
    Group,
    OwnerRun,
    ParsedRequest,
    PlanInputError,
    claim_count,
    global_numbers,
    owner_array,
    scatter,
    summed_loads,
)
from kafka_rebalance_assignors.registry import STRATEGY_MODULES, strategy_function
from kafka_rebalance_assignors.request import (
    MemberSummary,
    Move,
    Plan,
    PlanAssignment,
    PlanRequest,
    PlanStats,
)
from kafka_rebalance_assignors.validation import validate

_OWNED = (-1).__lt__  # an owner index, not -1 for nobody


class PlanInvariantError(RuntimeError):
    """A strategy produced an invalid assignment: a bug, never the user's fault."""


# (the normalised assignment, the flat owner array (None: a fresh group's result given as runs,
# which has no moves), each member's load, its partition count, the positions where the owner
# array differs from the previous one when already found, else None)
Measured = tuple[
    PlanAssignment, list[int] | None, dict[str, float], dict[str, int], list[int] | None
]


def _check_and_measure(context: PlanContext, raw: Assignment, unit: bool = False) -> Measured:
    """One pass over the strategy's result: normalise it (every member present, topics and
    partitions sorted, no empty lists), refuse anything Kafka would refuse (an unknown member, a
    topic the member does not subscribe to, a partition out of range or assigned twice, a
    subscribed partition left unassigned), and build the flat owner array (member index per
    global partition, -1 for none; see `Group.offsets`), each member's load (`unit`: every
    load is 1.0, the count model) and partition count.

    At Kafka's scale the result holds up to a million (member, topic) lists, so each member's
    lists are checked, placed and summed with nested C-level maps rather than a Python step per
    list. Anything suspicious sends the whole check to `_check_slowly`, the list-by-list
    reference, which names the problem exactly as it always has."""
    group, loads = context.group, context.loads
    unknown = sorted(set(raw) - set(group.members))
    if unknown:
        raise PlanInvariantError(f"assignment names unknown member {unknown[0]!r}")
    counts = group.topics
    offsets = context.offsets
    adders = {topic: offset.__add__ for topic, offset in offsets.items()}
    getters = {topic: loads[topic].__getitem__ for topic in counts}
    owners = [-1] * sum(counts.values())
    listed = 0
    assignment: Assignment = {}
    member_load: dict[str, float] = {}
    sizes: dict[str, int] = {}
    subscription_sets: dict[tuple[str, ...], frozenset[str]] = {}
    for index, (member_id, member) in enumerate(group.members.items()):
        owned = raw.get(member_id)
        if not owned:
            assignment[member_id] = {}
            member_load[member_id] = 0.0
            sizes[member_id] = 0
            continue
        names = sorted(owned)
        lists = list(map(sorted, map(owned.__getitem__, names)))
        if not all(lists):
            present = list(map(bool, lists))
            names, lists = list(compress(names, present)), list(compress(lists, present))
        subscribed = subscription_sets.get(member.topics)
        if subscribed is None:
            subscribed = subscription_sets[member.topics] = frozenset(member.topics)
        if lists and not (
            subscribed.issuperset(names)
            and min(map(itemgetter(0), lists)) >= 0
            and all(map(lt, map(itemgetter(-1), lists), map(counts.__getitem__, names)))
        ):
            _check_slowly(context, raw)
            raise PlanInvariantError(f"{member_id}: invalid assignment")  # not reached
        normalised = assignment[member_id] = dict(zip(names, lists, strict=True))
        size = sum(map(len, lists))
        numbers: Iterable[int]
        if size == len(lists):  # one partition per topic: no inner map per list
            numbers = map(add, map(offsets.__getitem__, names), map(itemgetter(0), lists))
        else:
            numbers = global_numbers(adders, normalised)
        scatter(owners, numbers, index)
        listed += size
        sizes[member_id] = size
        # Under the count model every load is 1.0 and every partial sum an exact integer:
        # the summed load is the partition count, whatever the order.
        member_load[member_id] = float(size) if unit else summed_loads(getters, normalised, 0.0)
    unassigned = owners.count(-1)
    if listed != len(owners) - unassigned:  # some partition was listed twice
        _check_slowly(context, raw)
        raise PlanInvariantError("a partition was assigned twice")  # not reached
    if unassigned:
        for topic in context.subscribed_topics():
            start = offsets[topic]
            table = owners[start : start + counts[topic]]
            if -1 in table:
                raise PlanInvariantError(f"{topic}-{table.index(-1)} left unassigned")
    return PlanAssignment(assignment, topics=counts), owners, member_load, sizes, None


def _measure_flat(context: PlanContext, raw: FlatAssignment) -> Measured | None:
    """`_check_and_measure` for a result that came with its flat owner array or its runs (see
    `FlatAssignment`): the array is checked at C speed (every subscribed partition has an owner,
    every owner subscribes to the topic), the runs run by run (`_runs_unassigned`), the lists
    are taken as built, and a member holding exactly what it owned before gets its load from
    `owned_loads` (the same sums in the same order). None when the result does not belong to
    this group or the group's topics are not in name order (then the lists' topic order is not
    the plan's); a result that fails the check goes through `_check_and_measure`, which names
    the problem."""
    group, loads = context.group, context.loads
    if raw.group is not group or list(group.topics) != sorted(group.topics):
        return None
    ownership = context.ownership
    previous = ownership.owners
    owned_before = any(ownership.resolved.values())
    owners = raw.owners
    if owners is None and raw.runs is not None:
        if not owned_before:  # no moves to find: the runs are checked, no array is built
            return _measure_runs(context, raw, raw.runs)
        owners = owner_array(raw.runs, len(previous))
    if owners is None or len(owners) != len(previous):
        return None
    subscribers = context.subscribers
    offsets = context.offsets
    everyone = len(group.members)
    differing: list[int] | None = None
    if owned_before:
        # `previous` is the resolution's array (each entry -1 or a member's index): the
        # target's entries need checking only where they differ from it, and its gaps are
        # the previous ones less those filled plus those opened.
        differing = differing_positions(previous, owners) if owners != previous else []
        distinct = set(map(owners.__getitem__, differing))
        filled = list(map(previous.__getitem__, differing)).count(-1)
        unassigned = ownership.unowned - filled + list(map(owners.__getitem__, differing)).count(-1)
    else:
        # The owners' distinct values in one C-level pass (a few thousand among a million
        # entries), and without a -1 among them there is no gap to find.
        distinct = set(owners)
        unassigned = owners.count(-1) if -1 in distinct else 0
    if distinct and (min(distinct) < -1 or max(distinct) >= everyone):
        return _check_and_measure(context, dict(raw))  # not a member's index
    gaps = unassigned > 0
    for topic, count in group.topics.items():
        start = offsets[topic]
        wanted = subscribers.get(topic, ())
        if len(wanted) == everyone and everyone:  # every member may hold it: only gaps to find
            if gaps and -1 in owners[start : start + count]:
                return _check_and_measure(context, dict(raw))
            continue
        held = set(owners[start : start + count])
        allowed = set(wanted) or {-1}
        if not held <= allowed:  # a gap, a stranger, or a topic nobody wants handed out
            return _check_and_measure(context, dict(raw))
    changed: set[int] | range = set()
    if not owned_before:  # nobody owned anything: all are new
        changed = range(len(group.members))
    elif differing:
        changed = set(map(previous.__getitem__, differing))
        changed.update(distinct)
    before = context.owned_loads
    resolved = ownership.resolved
    sizes: dict[str, int]
    assigned = len(owners) - unassigned
    if raw.shared and sum(map(len, raw.values())) == assigned:
        # One 1-tuple per topic (as many topics as partitions assigned, and no list is empty):
        # a member's partition count is its number of topics.
        sizes = dict(zip(raw, map(len, raw.values()), strict=True))
    else:
        # A member whose partitions all kept their owner holds exactly what it owned before.
        sizes = {
            member_id: claim_count(raw[member_id] if i in changed else resolved[member_id])
            for i, member_id in enumerate(group.members)
        }
    getters = {topic: values.__getitem__ for topic, values in loads.items()}
    # Under the count model every load is 1.0 and every partial sum an exact integer: the
    # summed load is the partition count, whatever the order.
    unit = context.load_model == "count"
    member_load = {
        member_id: (float(sizes[member_id]) if unit else summed_loads(getters, raw[member_id], 0.0))
        if i in changed
        else float(before[member_id])
        for i, member_id in enumerate(group.members)
    }
    # The entries as the strategy built them (`PlanAssignment` builds a member's lists when a
    # caller reads it): a plain dict, so the plan does not keep the strategy's owner array.
    assignment = PlanAssignment(dict(raw), shared=raw.shared, topics=group.topics)
    return assignment, owners, member_load, sizes, differing


def _measure_runs(
    context: PlanContext, raw: FlatAssignment, runs: Sequence[OwnerRun]
) -> Measured | None:
    """`_measure_flat` for a group that owned nothing, whose result came as owner runs: every
    member is new (no moves, no previous load), each member's load from its entry."""
    unassigned = _runs_unassigned(context, runs)
    if unassigned is None:  # not well formed: the general check names the problem
        return _check_and_measure(context, dict(raw), context.load_model == "count")
    group = context.group
    assigned = sum(group.topics.values()) - unassigned
    sizes: dict[str, int]
    if raw.shared and sum(map(len, raw.values())) == assigned:
        # One 1-tuple per topic (as many topics as partitions assigned, and no list is empty):
        # a member's partition count is its number of topics.
        sizes = dict(zip(raw, map(len, raw.values()), strict=True))
    else:
        sizes = {member_id: claim_count(raw[member_id]) for member_id in group.members}
    member_load: dict[str, float]
    if context.load_model == "count":
        # every load is 1.0 and every partial sum an exact integer: the partition count
        member_load = {member_id: float(size) for member_id, size in sizes.items()}
    else:
        getters = {topic: values.__getitem__ for topic, values in context.loads.items()}
        member_load = {m: summed_loads(getters, raw[m], 0.0) for m in group.members}
    assignment = PlanAssignment(dict(raw), shared=raw.shared, topics=group.topics)
    return assignment, None, member_load, sizes, None


def _runs_unassigned(context: PlanContext, runs: Sequence[OwnerRun]) -> int | None:
    """How many partitions of the group the owner runs leave without an owner, when the runs
    are well formed for it: ascending and not overlapping, each within one topic, every owner
    an index of a member subscribing to that topic (each distinct member list checked once),
    and every subscribed partition reached. None otherwise. A few hundred runs for a million
    partitions: no pass over the partitions."""
    group = context.group
    counts = group.topics
    names = list(counts)
    starts = list(context.offsets.values())
    subscribers = context.subscribers
    everyone = len(group.members)
    # id of a member list -> (the list, its distinct values, whether all are member indexes)
    distinct: dict[int, tuple[list[int], set[int], bool]] = {}
    allowed: dict[str, set[int]] = {}
    covered = end = 0
    for start, length, members, shift in runs:
        width = len(members)
        if start < end or length <= 0 or not 0 <= shift < width:
            return None
        t = bisect_right(starts, start) - 1  # empty topics share a start: the last is it
        if t < 0 or start + length > starts[t] + counts[names[t]]:
            return None  # before the first topic or past the end of its own
        topic = names[t]
        wanted = subscribers.get(topic)
        if not wanted:
            return None  # a topic nobody subscribes to handed out
        seen = distinct.get(id(members))
        if seen is None:  # (the list is kept with its set: its id stays its own)
            values = set(members)
            indexes = min(values) >= 0 and max(values) < everyone
            seen = distinct[id(members)] = (members, values, indexes)
        _, values, indexes = seen
        if not indexes:
            return None  # not a member's index
        if len(wanted) != everyone:  # (else every member may hold it: any member's index)
            permitted = allowed.get(topic)
            if permitted is None:
                permitted = allowed[topic] = set(wanted)
            if not values <= permitted:
                return None
        covered += length
        end = start + length
    if covered != sum(counts[topic] for topic in subscribers):
        return None  # a subscribed partition left without an owner
    return sum(counts.values()) - covered


def _check_slowly(context: PlanContext, raw: Assignment) -> None:
    """The list-by-list check `_check_and_measure` falls back to on a bad result: it raises
    PlanInvariantError naming the first problem (member by member, topic by topic in sorted
    order; then duplicates and gaps topic by topic)."""
    group = context.group
    owners: dict[str, list[str | None]] = {topic: [None] * n for topic, n in group.topics.items()}
    listed = dict.fromkeys(group.topics, 0)
    for member_id, member in group.members.items():
        owned = raw.get(member_id) or {}
        subscribed = set(member.topics)
        for topic in sorted(owned):
            partitions = owned[topic]
            if not partitions:
                continue
            if topic not in subscribed:
                raise PlanInvariantError(f"{member_id} got topic {topic} it does not subscribe to")
            table = owners[topic]
            if len(partitions) == 1:
                (partition,) = partitions
                if not 0 <= partition < len(table):
                    raise PlanInvariantError(
                        f"{member_id} got {topic}-{partition}: no such partition"
                    )
            partitions = sorted(partitions)
            if partitions[0] < 0 or partitions[-1] >= len(table):
                raise PlanInvariantError(
                    f"{member_id} got a partition of {topic} that does not exist"
                )
            for partition in partitions:
                table[partition] = member_id
            listed[topic] += len(partitions)
    subscribed_topics = context.subscribed_topics()
    for topic, table in owners.items():
        missing = table.count(None)
        if listed[topic] != len(table) - missing:
            raise PlanInvariantError(f"a partition of {topic} was assigned twice")
        if missing and topic in subscribed_topics:
            raise PlanInvariantError(f"{topic}-{table.index(None)} left unassigned")


_BLOCK = 64  # entries compared at once by `differing_positions` (64: fastest measured at 1M)


def differing_positions(previous: list[int], target: list[int]) -> list[int]:
    """The ascending positions where two owner arrays of the same length differ. A steady-state
    plan changes few owners among a million: blocks of `_BLOCK` entries are compared whole (a
    C-level list comparison, identity first), and only a block that differs is compared entry
    by entry."""
    total = len(target)
    if len(previous) != total:
        raise ValueError("owner arrays of different lengths")
    bounds = list(map(slice, range(0, total, _BLOCK), range(_BLOCK, total + _BLOCK, _BLOCK)))
    blocks = compress(
        bounds, map(ne, map(previous.__getitem__, bounds), map(target.__getitem__, bounds))
    )
    positions: list[int] = []
    for block in blocks:
        start = block.start
        positions.extend(
            compress(range(start, start + _BLOCK), map(ne, previous[block], target[block]))
        )
    return positions


def compute_moves(
    context: PlanContext,
    previous: list[int],
    target: list[int],
    differing: list[int] | None = None,
) -> list[Move]:
    """The plan's moves between two flat owner arrays of its group (see `_moves`; `differing`:
    `differing_positions(previous, target)` when the caller has it already)."""
    ids: list[str | None] = [*context.group.members, None]  # index -1: nobody
    names, starts = list(context.group.topics), list(context.offsets.values())
    return _moves(ids, names, starts, previous, target, differing)


def moves_between(
    topics: Mapping[str, int],
    before: Mapping[str, Mapping[str, Sequence[int]]],
    after: Mapping[str, Mapping[str, Sequence[int]]],
) -> list[Move]:
    """The moves from one assignment of `topics` to another, counted as a plan counts them (a
    plan kept on offer is compared with the current ownership the way a new plan would be).
    Partitions outside `topics` are ignored, as the planner drops stale claims."""
    members = sorted(set(before) | set(after))
    index = {member_id: i for i, member_id in enumerate(members)}
    ids: list[str | None] = [*members, None]  # index -1: nobody
    names = sorted(topics)
    starts = list(accumulate((topics[t] for t in names), initial=0))[:-1]
    offsets = dict(zip(names, starts, strict=True))
    arrays = []
    for assignment in (before, after):
        owners = [-1] * sum(topics.values())
        for member_id, owned in assignment.items():
            for topic, partitions in owned.items():
                count = topics.get(topic)
                if count is not None:
                    for partition in partitions:
                        if 0 <= partition < count:
                            owners[offsets[topic] + partition] = index[member_id]
        arrays.append(owners)
    return _moves(ids, names, starts, arrays[0], arrays[1])


def _moves(
    ids: list[str | None],
    names: list[str],
    starts: list[int],
    previous: list[int],
    target: list[int],
    differing: list[int] | None = None,
) -> list[Move]:
    """Partitions that change owner: what a cooperative protocol would revoke and re-grant.
    Partitions nobody owned before are grants, not moves; a partition of a topic nobody
    subscribes to any more moves to None. Both arrays are flat (topic `names[t]` starts at
    `starts[t]`; owners are indexes into `ids`, whose last entry is None); the differences are
    found at C speed (or given: `differing`), only the moves themselves are visited."""
    if differing is None:
        if previous == target or previous.count(-1) == len(previous):  # nothing owned
            return []
        differing = differing_positions(previous, target)
    moved = compress(differing, map(_OWNED, map(previous.__getitem__, differing)))
    moves = []
    for number in moved:
        old = previous[number]
        t = bisect_right(starts, number) - 1  # empty topics share a start: the last is it
        moves.append(Move(names[t], number - starts[t], ids[old], ids[target[number]]))  # type: ignore[arg-type]
    return moves


def plan_group(request: ParsedRequest) -> Plan:
    """Run a validated request's strategy and measure the result (collector paused: see
    `assignors.collector`)."""
    with collector_paused():
        return _plan_group(request)


def _plan_group(request: ParsedRequest) -> Plan:
    """Prepare the context, run the request's strategy on it, check and measure the result."""
    group = request.group
    assign = strategy_function(request.strategy)
    context = prepare(group, request.options)
    raw = assign(context)
    model, loads = context.load_model, context.loads
    measured = _measure_flat(context, raw) if isinstance(raw, FlatAssignment) else None
    if measured is None:
        measured = _check_and_measure(context, raw, model == "count")
    assignment, target, per_member, sizes, differing = measured
    previous = context.ownership.owners
    moves = [] if target is None else compute_moves(context, previous, target, differing)
    subscriptions = {m: set(member.topics) for m, member in group.members.items()} if moves else {}
    budgeted = sum(1 for move in moves if move.topic in subscriptions[move.from_member])
    # Every subscribed partition is assigned (checked above): the grants are exactly the
    # subscribed partitions that had no previous owner.
    offsets = context.offsets
    subscribed = context.subscribed_topics()
    if len(subscribed) == len(group.topics):  # every topic subscribed: all unowned ones
        granted = context.ownership.unowned
    else:
        granted = sum(
            previous[offsets[topic] : offsets[topic] + group.topics[topic]].count(-1)
            for topic in subscribed
        )
    bound = lower_bound(group, loads, subscribed, model == "count")
    members = _summaries(group, sizes, per_member)
    owned_load = context.owned_loads
    achieved = max(
        (per_member[m] / member.weight for m, member in group.members.items()), default=0.0
    )
    before = max(
        (owned_load[m] / member.weight for m, member in group.members.items()), default=0.0
    )
    counts = [entry.partitions for entry in members.values()]
    stats = PlanStats(
        strategy=request.strategy,
        members=len(group.members),
        topics=len(group.topics),
        partitions=sum(group.topics.values()),
        assigned=sum(counts),
        unassigned=sum(group.topics[t] for t in subscribed) - sum(counts),
        moves=len(moves),
        budgeted_moves=budgeted,
        granted_unowned=granted,
        count_spread=(max(counts) - min(counts)) if counts else 0,
        load_model=model,
        max_load=round(achieved, 6),
        lower_bound=round(bound, 6),
        max_load_ratio=round(achieved / bound, 6) if bound > 0 else 1.0,
        max_load_before=round(before, 6),
        max_load_ratio_before=round(before / bound, 6) if bound > 0 else 1.0,
        conflicting_claims=context.ownership.conflicts,
        stale_ownership_dropped=group.stale_ownership_dropped,
        unknown_subscriptions_ignored=group.unknown_subscriptions_ignored,
    )
    return Plan(assignment=assignment, members=members, moves=tuple(moves), stats=stats)


def _summaries(
    group: Group, sizes: Mapping[str, int], loads: Mapping[str, float]
) -> dict[str, MemberSummary]:
    """Each member's summary (its load and normalised load rounded to 6 places). Members with
    the same weight, partition count and load (most of a count-balanced group) share one
    summary object (they are immutable): at thousands of members, building and rounding each
    one was a step per member."""
    made: dict[tuple[float, int, float, type], MemberSummary] = {}
    summaries: dict[str, MemberSummary] = {}
    for member_id, member in group.members.items():
        load = loads[member_id]
        # (a zero is not shared: 0.0 and -0.0 are equal keys but round differently)
        key = (member.weight, sizes[member_id], load, type(load))
        summary = made.get(key) if load else None
        if summary is None:
            summary = MemberSummary(
                weight=member.weight,
                partitions=sizes[member_id],
                load=round(load, 6),
                normalised_load=round(load / member.weight, 6),
            )
            if load:
                made[key] = summary
        summaries[member_id] = summary
    return summaries


def plan_request(request: PlanRequest) -> Plan:
    """Validate and plan a typed request: the planning path of every caller (`parsing.plan` is
    the JSON adapter over it). Raises PlanInputError on bad input, naming the field."""
    with collector_paused():
        parsed = validate(request)
        if parsed.strategy not in STRATEGY_MODULES:
            raise PlanInputError(
                "strategy",
                f"unknown strategy {parsed.strategy!r} (one of {', '.join(STRATEGY_MODULES)})",
            )
        result = plan_group(parsed)
        # Freed by reference counting while the collector is still paused: the collection that
        # follows re-enabling it then scans only the plan, not the parsed group as well.
        del parsed
    return result
