"""The planning input, validated once, in the shape every strategy consumes.

The plan contract (docs/architecture.md, "The plan contract") is JSON. Strategies never see raw
JSON: `parse_group` turns it into an immutable `Group`, refusing bad input with a
`PlanInputError` that names the offending field, and silently dropping *stale* facts (ownership of
deleted topics or partitions, subscriptions to unknown topics) while counting them, because Kafka
does the same and an operator replanning after a topic deletion must not fail.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from itertools import accumulate, chain, repeat
from operator import add, itemgetter
from typing import Any, Literal

# member id -> topic -> sorted partition numbers. The one assignment shape used everywhere (a
# strategy's raw result may hold shared tuples instead of lists: see `assignors.registry`).
Assignment = dict[str, dict[str, list[int]]]

DEFAULT_STRATEGY = "lag-aware"
DEFAULT_TARGET_DRAIN_SECONDS = 300.0
# A sanity cap on the partitions of one group (ten times the largest scale this project plans
# for): a typo such as 1e9 partitions must be refused with a message, not run out of memory.
MAX_PARTITIONS = 10_000_000
LoadModel = Literal["count", "lag", "rate", "drain"]
CountBalance = Literal["strict", "relaxed"]


class PlanInputError(ValueError):
    """Bad planning input. The message starts with the field path so a user can fix it."""

    def __init__(self, field_path: str, problem: str) -> None:
        super().__init__(f"{field_path}: {problem}")
        self.field_path = field_path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Member:
    """One consumer. `topics` holds only subscribed topics that exist, sorted by name."""

    member_id: str
    topics: tuple[str, ...]
    weight: float = 1.0
    # Previous ownership as claimed by this member (stale partitions already removed). Claims of
    # several members may conflict; `resolve_ownership` applies the KIP-341 generation rule.
    claimed: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    generation: int | None = None


@dataclass(frozen=True, slots=True)
class Options:
    """Strategy options. Each strategy reads the ones it understands and ignores the rest."""

    count_balance: CountBalance = "relaxed"
    max_moves: int | None = None  # None: unlimited
    min_improvement: float = 0.0
    load_model: LoadModel | None = None  # None: drain if rates are known, else lag, else count
    target_drain_seconds: float = DEFAULT_TARGET_DRAIN_SECONDS


@dataclass(frozen=True, slots=True)
class Group:
    """A validated consumer group: what the strategies plan for."""

    topics: Mapping[str, int]  # topic -> partition count, sorted by name
    members: Mapping[str, Member]  # member id -> member, sorted by id
    lag: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    rate: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # Stale facts dropped while parsing (reported in the plan's stats, never an error).
    stale_ownership_dropped: int = 0
    unknown_subscriptions_ignored: int = 0

    # Computed once on first use (members x topics work that every strategy and the stats need).
    _subscribers: dict[str, list[str]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # The KIP-341 resolution of previous ownership, needed by the strategy and by the plan's
    # moves and stats alike; see `resolve_ownership`.
    _ownership: tuple[Assignment, int] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # The same resolution as one flat array (see `previous_owner_array`).
    _previous_array: list[int] | None = field(default=None, init=False, repr=False, compare=False)
    # (loads, member id -> load over its resolved previous ownership): see `owned_loads`.
    _owned_loads: tuple[object, dict[str, float]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def subscribers(self) -> dict[str, list[str]]:
        """Topic -> member ids subscribed to it, in member order (topics nobody wants omitted).
        A fresh copy: callers may change it."""
        return {topic: list(ids) for topic, ids in self._subscriber_table().items()}

    def subscribed_topics(self) -> KeysView[str]:
        """The topics somebody subscribes to, in topic order: the keys of `subscribers()`
        without copying a member list per topic (at 1,000 members x 100 topics the copies cost
        more than the callers that only ask which topics are wanted)."""
        return self._subscriber_table().keys()

    def _subscriber_table(self) -> dict[str, list[str]]:
        if self._subscribers is None:
            result: dict[str, list[str]] = {topic: [] for topic in self.topics}
            for member in self.members.values():  # members x topics appends, at C speed
                lists = map(result.__getitem__, filter(result.__contains__, member.topics))
                deque(map(list.append, lists, repeat(member.member_id)), maxlen=0)
            ordered = {topic: ids for topic, ids in result.items() if ids}
            object.__setattr__(self, "_subscribers", ordered)  # frozen: a cache, not state
        assert self._subscribers is not None
        return self._subscribers

    def offsets(self) -> dict[str, int]:
        """Topic -> global number of its partition 0, numbering all partitions in topic order:
        the flat index space of `previous_owner_array` and the planners' owner arrays."""
        return dict(zip(self.topics, accumulate(self.topics.values(), initial=0), strict=False))

    def subscriptions_identical(self) -> bool:
        subscriptions = {member.topics for member in self.members.values()}
        return len(subscriptions) <= 1


@dataclass(frozen=True, slots=True)
class PlanRequest:
    strategy: str
    group: Group
    options: Options


# --------------------------------------------------------------------------- ownership (KIP-341)


def resolve_ownership(group: Group) -> tuple[Assignment, int]:
    """Previous owner of each partition after the KIP-341 generation rule.

    On conflicting claims the highest generation wins; when the highest generation is claimed by
    more than one member, nobody keeps the partition (it is treated as unowned). A member without
    a generation counts as generation -1, as Kafka's DEFAULT_GENERATION. Returns the resolved
    assignment (every member present, partition lists sorted) and the number of partitions that
    had conflicting claims. Topics nobody else claims (the usual case) take whole lists at once;
    only a topic with overlapping claims is resolved partition by partition.

    Computed once per group and shared by every caller (the strategy, then the plan's moves and
    stats): treat the result as read-only.
    """
    if group._ownership is None:
        object.__setattr__(group, "_ownership", _resolve_ownership(group))  # a cache, not state
    assert group._ownership is not None
    return group._ownership


def previous_owner_array(group: Group) -> list[int]:
    """`resolve_ownership` as one flat array: for every partition in the global numbering of
    `Group.offsets`, the index (in member order) of its resolved previous owner, -1 for none.
    Passes that compare or sum whole assignments work on it at C speed instead of walking one
    short list per (member, topic). Computed once per group; treat it as read-only."""
    resolved, _ = resolve_ownership(group)  # fills the array when claims are disjoint
    if group._previous_array is None:
        owners = [-1] * sum(group.topics.values())
        adders = {topic: offset.__add__ for topic, offset in group.offsets().items()}
        for index, owned in enumerate(resolved.values()):
            if owned:
                numbers = global_numbers(adders, owned)
                deque(map(owners.__setitem__, numbers, repeat(index)), maxlen=0)
        object.__setattr__(group, "_previous_array", owners)  # a cache, not state
    assert group._previous_array is not None
    return group._previous_array


def owned_loads(
    group: Group, loads: Mapping[str, Sequence[float]], unit: bool = False
) -> dict[str, float]:
    """Each member's load over its resolved previous ownership (topics it no longer subscribes
    to included), summed per topic list, then the lists in topic order from 0 (an int: a member
    that owned nothing has load 0). `unit`: every load is 1.0 (the count model), so each sum is
    the exact partition count. Needed by `lag-aware` (its starting loads) and by the plan's
    `max_load_before`; computed once per (group, loads) pair. Treat it as read-only."""
    cached = group._owned_loads
    if cached is not None and cached[0] is loads:
        return cached[1]
    resolved, _ = resolve_ownership(group)
    if unit:  # every load 1.0: each sum is the exact partition count
        sizes = map(sum, map(map, repeat(len), map(dict.values, resolved.values())))
        result = {m: float(n) if n else 0 for m, n in zip(resolved, sizes, strict=True)}
    else:
        getters = {topic: values.__getitem__ for topic, values in loads.items()}
        result = {m: summed_loads(getters, owned, 0) for m, owned in resolved.items()}
    object.__setattr__(group, "_owned_loads", (loads, result))  # a cache, not state
    return result


class FlatAssignment(dict[str, dict[str, list[int]]]):
    """An `Assignment` already in the plan's normal form (every member present in group order,
    topics in topic order, partitions ascending, no empty lists), built by a planner together
    with its flat owner array: `owners[g]` is the index (in member order) of the owner of
    global partition g (see `Group.offsets`), -1 for none. The plan then checks the array at C
    speed instead of re-walking a list per (member, topic). Any other code may use it as the
    plain dict it is."""

    __slots__ = ("group", "owners")

    def __init__(self, group: Group, owners: list[int]) -> None:
        super().__init__()
        self.group = group
        self.owners = owners


def global_numbers(
    adders: Mapping[str, Callable[[int], int]], owned: Mapping[str, Sequence[int]]
) -> Iterator[int]:
    """The global numbers of a topic -> partitions mapping, given each topic's `offset.__add__`:
    nested C-level maps, no Python step per (topic, partition list)."""
    return chain.from_iterable(map(map, map(adders.__getitem__, owned), owned.values()))


def summed_loads(
    getters: Mapping[str, Callable[[int], float]],
    owned: Mapping[str, Sequence[int]],
    start: float,
) -> float:
    """start + the load of each topic's partitions, given each topic's `loads.__getitem__`:
    summed per topic list, then the list sums in order (the order fixes the float result, and
    the plan's figures must not change with the code that computes them), all at C speed."""
    return reduce(add, map(sum, map(map, map(getters.__getitem__, owned), owned.values())), start)


_CLAIM_PARTITIONS = itemgetter(2)  # (generation, member id, partitions) -> partitions


def _resolve_ownership(group: Group) -> tuple[Assignment, int]:
    disjoint = _resolve_disjoint(group)
    if disjoint is not None:
        resolved, owners = disjoint
        object.__setattr__(group, "_previous_array", owners)  # see previous_owner_array
        return resolved, 0
    claims: dict[str, list[tuple[int, str, tuple[int, ...]]]] = {}
    for member in group.members.values():
        generation = -1 if member.generation is None else member.generation
        for topic, partitions in member.claimed.items():
            if partitions:
                claims.setdefault(topic, []).append((generation, member.member_id, partitions))
    resolved: Assignment = {member_id: {} for member_id in group.members}
    conflicts = 0
    for topic in group.topics:
        topic_claims = claims.get(topic)
        if not topic_claims:
            continue
        if len(topic_claims) == 1 or sum(map(len, map(_CLAIM_PARTITIONS, topic_claims))) == len(
            set().union(*map(_CLAIM_PARTITIONS, topic_claims))
        ):
            for _, member_id, partitions in topic_claims:
                resolved[member_id][topic] = (
                    [partitions[0]] if len(partitions) == 1 else sorted(partitions)
                )
            continue
        owners, topic_conflicts = _resolve_topic(group.topics[topic], topic_claims)
        conflicts += topic_conflicts
        for partition, owner in enumerate(owners):
            if owner is not None:
                resolved[owner].setdefault(topic, []).append(partition)
    return resolved, conflicts


def _resolve_disjoint(group: Group) -> tuple[Assignment, list[int]] | None:
    """The usual case at scale, recognised member by member at C speed: every claim is a
    non-empty list of an existing topic, each member's claims are in topic order, and no
    partition is claimed twice anywhere (each member's global numbers are written into one flat
    array, and as many entries must end up set as were written). Then nothing needs resolving
    and each member keeps its claims, sorted; the flat array is `previous_owner_array`'s. None
    otherwise: the topic-by-topic resolution handles every other case (and gives the same
    result when this one applies)."""
    position = {topic: i for i, topic in enumerate(group.topics)}
    adders = {topic: offset.__add__ for topic, offset in group.offsets().items()}
    total = sum(group.topics.values())
    owners = [-1] * total
    written = 0
    resolved: Assignment = {}
    for index, (member_id, member) in enumerate(group.members.items()):
        claimed = member.claimed
        if not claimed:
            resolved[member_id] = {}
            continue
        if not position.keys() >= claimed.keys() or not all(claimed.values()):
            return None
        order = list(map(position.__getitem__, claimed))
        if len(order) > 1 and order != sorted(order):
            return None
        numbers = list(global_numbers(adders, claimed))
        if min(numbers) < 0 or max(numbers) >= total:
            return None
        deque(map(owners.__setitem__, numbers, repeat(index)), maxlen=0)
        written += len(numbers)
        resolved[member_id] = dict(zip(claimed, map(sorted, claimed.values()), strict=True))
    if total - owners.count(-1) != written:
        return None  # some partition was claimed twice
    return resolved, owners


def _resolve_topic(
    count: int, topic_claims: list[tuple[int, str, tuple[int, ...]]]
) -> tuple[list[str | None], int]:
    """Owner per partition of one topic with overlapping claims, and how many partitions had
    more than one claimant."""
    generations = [-2] * count  # -2: unclaimed (below DEFAULT_GENERATION)
    owners: list[str | None] = [None] * count
    contested: set[int] = set()
    for generation, member_id, partitions in topic_claims:
        for partition in partitions:
            current = generations[partition]
            if current == -2:
                generations[partition] = generation
                owners[partition] = member_id
                continue
            contested.add(partition)
            if generation > current:
                generations[partition] = generation
                owners[partition] = member_id
            elif generation == current:
                owners[partition] = None  # a tie at the top: nobody keeps it
    return owners, len(contested)


# --------------------------------------------------------------------------- parsing

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_TOP_LEVEL_FIELDS = {"strategy", "topics", "members", "lag", "rate", "options"}
_INT_ONLY = {int}
_LIST_ONLY = {list}
_MEMBER_FIELDS = {"topics", "weight", "owned", "generation"}
_OPTION_FIELDS = {
    "count_balance",
    "max_moves",
    "min_improvement",
    "load_model",
    "target_drain_seconds",
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _require_object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PlanInputError(path, f"must be a JSON object, got {type(value).__name__}")
    return value


def _refuse_unknown(obj: Mapping[str, Any], allowed: set[str], path: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        where = f"{path}." if path else ""
        raise PlanInputError(
            f"{where}{unknown[0]}", f"unknown field (expected one of {', '.join(sorted(allowed))})"
        )


def _parse_topics(raw: Any) -> dict[str, int]:
    topics = _require_object(raw, "topics")
    parsed: dict[str, int] = {}
    for name in sorted(topics):
        count = topics[name]
        if not _is_int(count) or count < 0:
            raise PlanInputError(
                f"topics.{name}", f"partition count must be an integer >= 0, got {count!r}"
            )
        parsed[name] = count
    total = sum(parsed.values())
    if total > MAX_PARTITIONS:
        raise PlanInputError("topics", f"{total} partitions in all, more than {MAX_PARTITIONS}")
    return parsed


def _parse_member(member_id: str, raw: Any, topics: Mapping[str, int]) -> tuple[Member, int, int]:
    path = f"members.{member_id}"
    spec = _require_object(raw, path)
    _refuse_unknown(spec, _MEMBER_FIELDS, path)
    subscription = spec.get("topics")
    if not isinstance(subscription, list) or not all(map(isinstance, subscription, repeat(str))):
        raise PlanInputError(f"{path}.topics", "must be a list of topic names")
    subscribed = set(subscription)  # set operations: C speed for 1,000 members x 100 topics
    known = tuple(sorted(subscribed.intersection(topics)))
    unknown_subscriptions = len(subscribed.difference(topics))

    weight = spec.get("weight", 1.0)
    if not _is_number(weight) or not math.isfinite(weight) or weight <= 0:
        raise PlanInputError(f"{path}.weight", f"must be a finite number > 0, got {weight!r}")

    generation = spec.get("generation")
    if generation is not None and not _is_int(generation):
        raise PlanInputError(f"{path}.generation", f"must be an integer, got {generation!r}")

    owned_raw = _require_object(spec.get("owned", {}), f"{path}.owned")
    claimed = _claims_at_once(owned_raw, topics)
    if claimed is not None:
        return (
            Member(member_id, known, float(weight), claimed, generation),
            0,
            unknown_subscriptions,
        )
    claimed = {}
    stale = 0
    for topic in sorted(owned_raw):
        partitions = owned_raw[topic]
        if type(partitions) is list and partitions:
            # The usual shape at scale (a member owns a few partitions of each of many topics):
            # whole-list checks, the per-partition path below only for stale or odd claims.
            count = topics.get(topic)
            if count is not None:
                if len(partitions) == 1:
                    if type(partitions[0]) is int and 0 <= partitions[0] < count:
                        claimed[topic] = (partitions[0],)
                        continue
                elif set(map(type, partitions)) == _INT_ONLY:
                    valid = sorted(set(partitions))
                    if valid[0] >= 0 and valid[-1] < count:
                        claimed[topic] = tuple(valid)
                        continue
        if not isinstance(partitions, list) or not set(map(type, partitions)) <= {int}:
            raise PlanInputError(f"{path}.owned.{topic}", "must be a list of partition numbers")
        count = topics.get(topic)
        if count is None:
            stale += len(partitions)  # the topic was deleted
            continue
        distinct = set(partitions)  # a repeated claim is redundant, not stale
        if distinct and (min(distinct) < 0 or max(distinct) >= count):
            valid = sorted(p for p in distinct if 0 <= p < count)
        else:
            valid = sorted(distinct)
        stale += len(distinct) - len(valid)
        if valid:
            claimed[topic] = tuple(valid)
    member = Member(member_id, known, float(weight), claimed, generation)
    return member, stale, unknown_subscriptions


def _claims_at_once(
    owned: Mapping[str, Any], topics: Mapping[str, int]
) -> dict[str, tuple[int, ...]] | None:
    """A member's claims when every one is clean (a non-empty list of ints, all of an existing
    topic and in range): the usual case, checked list by list at C speed. None otherwise, and
    the caller's topic-by-topic path names the problem or drops the stale part."""
    names = sorted(owned)
    lists = list(map(owned.__getitem__, names))
    if not set(map(type, lists)) <= _LIST_ONLY or not all(lists):
        return None
    if not set(map(type, chain.from_iterable(lists))) <= _INT_ONLY:
        return None
    counts = list(map(topics.get, names))
    if None in counts:
        return None
    valid = list(map(sorted, map(set, lists)))
    if valid and (
        min(map(itemgetter(0), valid)) < 0
        or not all(map(int.__lt__, map(itemgetter(-1), valid), counts))
    ):
        return None
    return dict(zip(names, map(tuple, valid), strict=True))


def _check_loads(values: list[Any], path: str) -> None:
    """Every value a finite number >= 0. A vectorised check first (these arrays reach a million
    entries), the per-value scan only to name the offender."""
    if (
        values
        and set(map(type, values)) <= {int, float}
        and min(values) >= 0
        and math.isfinite(sum(values))
    ):
        return
    for index, value in enumerate(values):
        if not _is_number(value) or not math.isfinite(value) or value < 0:
            raise PlanInputError(f"{path}[{index}]", f"must be a finite number >= 0, got {value!r}")


def _parse_loads(raw: Any, name: str, topics: Mapping[str, int]) -> dict[str, tuple[float, ...]]:
    loads = _require_object(raw, name)
    parsed: dict[str, tuple[float, ...]] = {}
    for topic in sorted(loads):
        values = loads[topic]
        path = f"{name}.{topic}"
        if not isinstance(values, list):
            raise PlanInputError(path, "must be a list with one number per partition")
        if topic not in topics:
            continue  # a stale fact about a deleted topic
        if len(values) != topics[topic]:
            raise PlanInputError(
                path, f"has {len(values)} values but topic {topic} has {topics[topic]} partitions"
            )
        _check_loads(values, path)
        parsed[topic] = tuple(map(float, values))
    return parsed


def parse_max_moves(raw: Any, total_partitions: int, path: str = "options.max_moves") -> int | None:
    """A move budget: an integer >= 0, a percentage string like "25%" of all partitions, or null."""
    if raw is None:
        return None
    if _is_int(raw) and raw >= 0:
        return raw
    if isinstance(raw, str) and (match := _PERCENT.match(raw)):
        percent = float(match.group(1))
        if percent <= 100:
            return math.ceil(total_partitions * percent / 100)
    raise PlanInputError(path, f"must be an integer >= 0 or a percentage like '25%', got {raw!r}")


def _parse_options(raw: Any, total_partitions: int) -> Options:
    options = _require_object(raw, "options")
    _refuse_unknown(options, _OPTION_FIELDS, "options")
    count_balance = options.get("count_balance", "relaxed")
    if count_balance not in ("strict", "relaxed"):
        raise PlanInputError(
            "options.count_balance", f"must be 'strict' or 'relaxed', got {count_balance!r}"
        )
    min_improvement = options.get("min_improvement", 0.0)
    if not _is_number(min_improvement) or not 0 <= min_improvement < 1:
        raise PlanInputError(
            "options.min_improvement", f"must be a number in [0, 1), got {min_improvement!r}"
        )
    load_model = options.get("load_model")
    if load_model is not None and load_model not in ("count", "lag", "rate", "drain"):
        raise PlanInputError(
            "options.load_model", f"must be one of count, lag, rate, drain, got {load_model!r}"
        )
    drain = options.get("target_drain_seconds", DEFAULT_TARGET_DRAIN_SECONDS)
    if not _is_number(drain) or not math.isfinite(drain) or drain <= 0:
        raise PlanInputError(
            "options.target_drain_seconds", f"must be a finite number > 0, got {drain!r}"
        )
    return Options(
        count_balance=count_balance,
        max_moves=parse_max_moves(options.get("max_moves"), total_partitions),
        min_improvement=float(min_improvement),
        load_model=load_model,
        target_drain_seconds=float(drain),
    )


def parse_request(raw: Any, strategy_override: str | None = None) -> PlanRequest:
    """Validate one plan-contract document. Raises PlanInputError naming the bad field."""
    document = _require_object(raw, "input")
    _refuse_unknown(document, _TOP_LEVEL_FIELDS, "")
    strategy = strategy_override or document.get("strategy", DEFAULT_STRATEGY)
    if not isinstance(strategy, str):
        raise PlanInputError("strategy", f"must be a strategy name, got {strategy!r}")
    if "topics" not in document:
        raise PlanInputError("topics", "is required (topic -> partition count)")
    if "members" not in document:
        raise PlanInputError("members", "is required (member id -> subscription)")
    topics = _parse_topics(document["topics"])
    members_raw = _require_object(document["members"], "members")
    members: dict[str, Member] = {}
    stale = unknown = 0
    for member_id in sorted(members_raw):
        member, member_stale, member_unknown = _parse_member(
            member_id, members_raw[member_id], topics
        )
        members[member_id] = member
        stale += member_stale
        unknown += member_unknown
    group = Group(
        topics=topics,
        members=members,
        lag=_parse_loads(document.get("lag", {}), "lag", topics),
        rate=_parse_loads(document.get("rate", {}), "rate", topics),
        stale_ownership_dropped=stale,
        unknown_subscriptions_ignored=unknown,
    )
    options = _parse_options(document.get("options", {}), sum(topics.values()))
    return PlanRequest(strategy=strategy, group=group, options=options)
