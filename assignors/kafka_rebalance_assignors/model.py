"""The planning types: the validated input every strategy consumes, and the shapes of results.

Strategies never see raw JSON: `validation` turns a typed `request.PlanRequest` (which `parsing`
builds from a plan-contract document) into an immutable `Group`, refusing bad input with a
`PlanInputError` that names the offending field. These types hold no caches: what one plan
derives from them is prepared once in `context.PlanContext`.
"""

from __future__ import annotations

from array import array
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field
from functools import reduce
from itertools import accumulate, chain
from operator import add, sub
from typing import Literal, NamedTuple, final

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


@final  # tested by `type(x) is PartitionClaims`: an ABC's isinstance is slow in hot loops
class PartitionClaims(Mapping[str, tuple[int, ...]]):
    """A member's claims of one partition in each of several topics, held as columns: `names`
    (the topics, ascending) and `numbers`, one `array('i')` (or a view of one) of the claims'
    global partition numbers (topic t's partition p is `offsets[t] + p`, the numbering of
    `Group.offsets`), in the same order and so ascending too. At Kafka's scale a group's
    claims are a million such one-partition claims; as columns they cost two arrays per
    member instead of a tuple and a dict entry per claim, and the owner array is filled from
    `numbers` without reading one Python object per claim.

    It reads as the mapping topic -> (partition,) it stands for (a dict built on first use
    of the values; `len` and iteration read the names only). Immutable: `numbers` and `names`
    must not be changed. Built by `validation` for a member whose claims are all clean and one
    per topic, and by the constrained sticky path for a fresh member's dealt share (given its
    partitions, `numbers` None: derived on first use); `offsets` is the group's
    `Group.offsets` (shared, read-only). One of `numbers` and `partitions` must be given."""

    __slots__ = ("_mapping", "_numbers", "_partitions", "names", "offsets")

    def __init__(
        self,
        names: tuple[str, ...],
        numbers: Sequence[int] | None,
        offsets: Mapping[str, int],
        partitions: Sequence[int] | None = None,
    ) -> None:
        if numbers is None and partitions is None:
            raise ValueError("PartitionClaims needs its global numbers or its partitions")
        self.names = names
        self._numbers = numbers
        self.offsets = offsets
        # each claim's partition number when the caller has them at hand (else derived)
        self._partitions = partitions
        self._mapping: dict[str, tuple[int, ...]] | None = None

    @property
    def numbers(self) -> Sequence[int]:
        """The claims' global partition numbers (an `array('i')`, or a view of one: built
        from the partitions on first use when not given)."""
        numbers = self._numbers
        if numbers is None:
            bases = map(self.offsets.__getitem__, self.names)
            numbers = self._numbers = array("i", map(add, bases, self._partitions or ()))
        return numbers

    def partitions(self) -> Iterable[int]:
        """Each claim's partition number (not global), in topic order."""
        if self._partitions is not None:
            return self._partitions
        return map(sub, self.numbers, map(self.offsets.__getitem__, self.names))

    def as_lists(self) -> dict[str, list[int]]:
        """topic -> [partition]: fresh lists, the plan's assignment shape."""
        # a comprehension builds each 1-list directly (no 1-tuple first): the fastest way
        # measured to build a million of them
        pairs = zip(self.names, self.partitions(), strict=True)
        return {name: [partition] for name, partition in pairs}

    def _materialised(self) -> dict[str, tuple[int, ...]]:
        mapping = self._mapping
        if mapping is None:
            mapping = self._mapping = dict(zip(self.names, zip(self.partitions()), strict=True))
        return mapping

    def __getitem__(self, topic: str) -> tuple[int, ...]:
        return self._materialised()[topic]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, topic: object) -> bool:
        return topic in self._materialised()

    def keys(self) -> KeysView[str]:
        return self._materialised().keys()

    def values(self) -> ValuesView[tuple[int, ...]]:
        return self._materialised().values()

    def items(self) -> ItemsView[str, tuple[int, ...]]:
        return self._materialised().items()

    def __repr__(self) -> str:
        return f"PartitionClaims({self._materialised()!r})"


def claim_count(claims: Mapping[str, Sequence[int]]) -> int:
    """How many partitions a topic -> partitions mapping holds (no pass over `PartitionClaims`)."""
    if type(claims) is PartitionClaims:
        return len(claims.names)  # one partition per name
    return sum(map(len, claims.values()))


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
    # several members may conflict; `ownership.resolve` applies the KIP-341 generation rule.
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
    """A validated consumer group: what the strategies plan for. Immutable and cache-free: what
    is derived from it for one plan (loads, resolved ownership, subscribers) is computed once by
    `context.prepare` and handed to the strategy."""

    topics: Mapping[str, int]  # topic -> partition count, sorted by name
    members: Mapping[str, Member]  # member id -> member, sorted by id
    # topic -> value per partition; None: not reported (see `load`, "unknown is not zero")
    lag: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    rate: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    # ("lag" | "rate", topic) for every array holding a None: the others need no scan for gaps.
    gaps: frozenset[tuple[str, str]] = field(default=frozenset(), repr=False)
    # Stale facts dropped while parsing (reported in the plan's stats, never an error).
    stale_ownership_dropped: int = 0
    unknown_subscriptions_ignored: int = 0

    def subscriber_indexes(self) -> dict[str, list[int]]:
        """Topic -> indexes (member order, which is id order) of its subscribers, topics in name
        order, topics nobody wants omitted: the one subscriber table. Built per distinct
        subscription rather than per (member, topic): groups usually have few distinct ones.
        Members are grouped by their tuple object first (validation gives members with the
        same subscription list one tuple): a tuple's hash is not cached, and hashing a
        thousand names per member is most of this at scale."""
        by_object: dict[int, tuple[tuple[str, ...], list[int]]] = {}
        for index, member in enumerate(self.members.values()):
            entry = by_object.get(id(member.topics))
            if entry is None:
                entry = by_object[id(member.topics)] = (member.topics, [])
            entry[1].append(index)
        groups: dict[tuple[str, ...], list[list[int]]] = {}
        for subscription, indexes in by_object.values():
            groups.setdefault(subscription, []).append(indexes)
        by_subscription = {  # equal tuples of different objects: merged in member order
            subscription: lists[0] if len(lists) == 1 else sorted(chain(*lists))
            for subscription, lists in groups.items()
        }
        parts: dict[str, list[list[int]]] = {}
        for topics, indexes in by_subscription.items():
            for topic in topics:
                parts.setdefault(topic, []).append(indexes)
        return {
            topic: (parts[topic][0] if len(parts[topic]) == 1 else sorted(chain(*parts[topic])))
            for topic in self.topics
            if topic in parts
        }

    def subscribers(self) -> dict[str, list[str]]:
        """`subscriber_indexes` with member ids instead of indexes."""
        ids = list(self.members)
        return {
            topic: list(map(ids.__getitem__, indexes))
            for topic, indexes in self.subscriber_indexes().items()
        }

    def subscribed_topics(self) -> KeysView[str]:
        """The topics somebody subscribes to, in topic order."""
        return self.subscriber_indexes().keys()

    def offsets(self) -> dict[str, int]:
        """Topic -> global number of its partition 0, numbering all partitions in topic order:
        the flat index space of the planners' owner arrays (see `ownership.Ownership.owners`)."""
        return dict(zip(self.topics, accumulate(self.topics.values(), initial=0), strict=False))

    def subscriptions_identical(self) -> bool:
        """Whether every member subscribes to the same topics (compared by object first:
        members usually share one tuple)."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return True
        topics = first.topics
        return all(m.topics is topics or m.topics == topics for m in members)


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """A validated planning input: what `plan_group` runs (`validation.validate` builds it from a
    typed `request.PlanRequest`)."""

    strategy: str
    group: Group
    options: Options


class OwnerRun(NamedTuple):
    """A run of an owner array: the `length` consecutive global partitions from `start` (see
    `Group.offsets`) owned in turn by the member indexes of `members`, from position `shift`
    on: partition `start + k` by `members[(shift + k) % len(members)]`. A dealer hands a
    member list out round by round, so a fresh group's million owners are a few hundred runs
    over one list: checked per run and per distinct list instead of per partition."""

    start: int
    length: int
    members: list[int]
    shift: int


def owner_array(runs: Iterable[OwnerRun], total: int) -> list[int]:
    """The flat owner array (`total` entries, -1 where no run reaches) the runs stand for
    (well-formed runs: within range, no two overlapping)."""
    owners = [-1] * total
    for start, length, members, shift in runs:
        width = len(members)
        ring = members[shift:] + members[:shift] if shift else members
        owners[start : start + length] = (ring * -(-length // width))[:length]
    return owners


class FlatAssignment(dict[str, dict[str, list[int]]]):
    """An `Assignment` already in the plan's normal form (every member present in group order,
    topics in topic order, partitions ascending, no empty lists), built by a planner together
    with its flat owner array: `owners[g]` is the index (in member order) of the owner of
    global partition g (see `Group.offsets`), -1 for none; or, instead of the array, its
    `runs` (`OwnerRun`s in ascending order of start, no two overlapping; partitions no run
    reaches have no owner), `owners` then None. The plan then checks the array at C speed (the
    runs per run) instead of re-walking a list per (member, topic). `shared`: the partition
    lists are read-only sequences (shared 1-tuples, see `assignors.registry`), still in normal
    form, that the plan copies into fresh lists. A member that kept exactly its claims, or a
    fresh member's dealt share, may be entered as its read-only `PartitionClaims` (normal form
    too), whose lists the plan builds. Any other code may use it as the plain (read-only) dict
    it is."""

    __slots__ = ("group", "owners", "runs", "shared")

    def __init__(
        self,
        group: Group,
        owners: list[int] | None,
        shared: bool = False,
        runs: list[OwnerRun] | None = None,
    ) -> None:
        super().__init__()
        if (owners is None) == (runs is None):
            raise ValueError("FlatAssignment needs its owner array or its runs, not both")
        self.group = group
        self.owners = owners
        self.runs = runs
        self.shared = shared


def scatter(owners: list[int], numbers: Iterable[int], index: int) -> None:
    """`owners[g] = index` for every global number g of `numbers`: the owner arrays' one
    store. A plain loop, on purpose: CPython (3.11+) specialises a list store at an int index,
    which measured about 3x as fast as the C-level `deque(map(owners.__setitem__, ...))` it
    replaces (a million stores: 12 against 34 ms), whose every store is a method call."""
    for number in numbers:
        owners[number] = index


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
