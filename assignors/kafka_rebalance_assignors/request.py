"""The typed planning API: callers build a `PlanRequest` and get a `Plan` back.

`plan_request(request)` is what in-process callers (the operator, the pipeline's replay, the
sidecar's fallback) use; `plan(document)` is the plan contract's JSON adapter over it, which the
`kafka-rebalance plan` command uses: it turns the document into a request and plans that. So a
request and its document (`PlanRequest.to_document()`) meet the same validation and the same
planner; a test holds `plan(request.to_document())` equal to `plan_request(request)`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, final

from kafka_rebalance_assignors.model import DEFAULT_STRATEGY, PartitionClaims


@final  # validation tests `type(owned) is OwnedColumns`: its fast path is for this type only
class OwnedColumns(Mapping[str, list[int]]):
    """A member's claims held as columns rather than one list per topic, for callers that
    already hold them so (the operator reads members' ownership into arrays): `topics` (the
    names), `partitions` (every topic's partition numbers, one topic's run after the other:
    an `array` of an integer type code, or a list or tuple of ints) and `starts` (where each
    topic's run starts, `len(topics) + 1` entries from 0 to `len(partitions)`, never
    decreasing). `starts` None: one partition per topic, `partitions[i]` is `topics[i]`'s.

    At Kafka's scale a group's claims are a million one-partition claims; passed as columns,
    validation checks them with a few C-level passes per member and keeps them as columns
    (`model.PartitionClaims`) instead of reading a million one-element lists. Validation
    checks the columns as values (their types, the shape of `starts`, a topic named twice is
    refused with a `PlanInputError` naming the field); stale claims (deleted topics,
    partitions out of range) are dropped and counted exactly as in the mapping form.

    It reads as the mapping topic -> partitions (fresh lists, in the columns' order) it
    stands for, so `PlanRequest.to_document()` writes the plain form, and it compares equal to
    that dict. The columns must not be changed once passed (they are not copied)."""

    __slots__ = ("_mapping", "partitions", "starts", "topics")

    def __init__(
        self,
        topics: Sequence[str],
        partitions: array[int] | Sequence[int],
        starts: array[int] | Sequence[int] | None = None,
    ) -> None:
        self.topics = topics
        self.partitions = partitions
        self.starts = starts
        self._mapping: dict[str, list[int]] | None = None

    def runs(self) -> Iterator[tuple[str, list[int]]]:
        """(topic, its partitions as a fresh list), in the columns' order (well-formed columns:
        validation checks the shape)."""
        partitions, starts = self.partitions, self.starts
        if starts is None:
            pairs = zip(self.topics, partitions, strict=False)
            return ((topic, [partition]) for topic, partition in pairs)
        return (
            (topic, list(partitions[starts[i] : starts[i + 1]]))
            for i, topic in enumerate(self.topics)
        )

    def _materialised(self) -> dict[str, list[int]]:
        if self._mapping is None:
            self._mapping = dict(self.runs())
        return self._mapping

    def __getitem__(self, topic: str) -> list[int]:
        return list(self._materialised()[topic])

    def __iter__(self) -> Iterator[str]:
        return iter(self._materialised())

    def __len__(self) -> int:
        return len(self._materialised())

    def __contains__(self, topic: object) -> bool:
        return topic in self._materialised()

    def items(self) -> ItemsView[str, list[int]]:
        return dict(self.runs()).items()

    def values(self) -> ValuesView[list[int]]:
        return dict(self.runs()).values()

    def __repr__(self) -> str:
        return f"OwnedColumns({self._materialised()!r})"


@dataclass(frozen=True, slots=True)
class MemberRequest:
    """One consumer as a caller knows it: what it subscribes to and what it claims to own (stale
    claims and unknown topics are dropped and counted by the planner, as Kafka does). `owned`
    may be `OwnedColumns`, the same claims held as arrays (the fast form at scale)."""

    topics: Sequence[str]
    weight: float = 1.0
    owned: Mapping[str, Sequence[int]] = field(default_factory=dict)
    generation: int | None = None  # KIP-341: the generation the claims were made in


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """Strategy options; None leaves the planner's default (see `model.Options`)."""

    count_balance: str | None = None  # "strict" | "relaxed"
    max_moves: int | str | None = None  # an integer, or a percentage of all partitions: "25%"
    min_improvement: float | None = None
    load_model: str | None = None  # "count" | "lag" | "rate" | "drain"; None: chosen from data
    target_drain_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """One planning round's input. `lag` and `rate` hold one value per partition, None where it
    was not observed (`load` says what an unknown value counts as); a topic with nothing
    observed is left out. A topic's values may be a float `array` ('d' or 'f'), NaN where not
    observed: a million partitions' loads as columns rather than lists of objects."""

    topics: Mapping[str, int]
    members: Mapping[str, MemberRequest]
    strategy: str = DEFAULT_STRATEGY
    lag: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    rate: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    options: PlanOptions = field(default_factory=PlanOptions)

    def to_document(self) -> dict[str, Any]:
        """The plan-contract document of this request (fields at their default left out)."""
        members: dict[str, Any] = {}
        for member_id, member in self.members.items():
            entry: dict[str, Any] = {"topics": list(member.topics)}
            if member.weight != 1.0:
                entry["weight"] = member.weight
            if member.owned:
                entry["owned"] = {topic: list(parts) for topic, parts in member.owned.items()}
            if member.generation is not None:
                entry["generation"] = member.generation
            members[member_id] = entry
        document: dict[str, Any] = {
            "strategy": self.strategy,
            "topics": dict(self.topics),
            "members": members,
        }
        if self.lag:
            document["lag"] = {topic: _json_values(values) for topic, values in self.lag.items()}
        if self.rate:
            document["rate"] = {topic: _json_values(values) for topic, values in self.rate.items()}
        options = {
            name: getattr(self.options, name)
            for name in PlanOptions.__slots__
            if getattr(self.options, name) is not None
        }
        if options:
            document["options"] = options
        return document


def _json_values(values: Sequence[float | None]) -> list[float | None]:
    """A lag or rate array as the document's list: a float `array`'s NaN (not reported) as
    None, JSON's null."""
    if type(values) is array and values.typecode in "fd":
        return [None if value != value else value for value in values]
    return list(values)


def group_request(
    *,
    strategy: str,
    topics: Mapping[str, int],
    members: Iterable[str],
    owned: Mapping[str, Mapping[str, Sequence[int]]],
    lag: Mapping[tuple[str, int], float | None],
    rate: Mapping[tuple[str, int], float | None],
    weights: Mapping[str, float] | None = None,
    generations: Mapping[str, int] | None = None,
    options: PlanOptions | None = None,
) -> PlanRequest:
    """The request for a group whose members all subscribe to every topic: the operator's
    policy and the pipeline's replay of it. Ownership per member (its KIP-341 generation in
    `generations`), weights (1.0 when absent), and lag and rate per (topic, partition): a
    partition missing from the map, or None, was not observed; a negative rate counts as 0."""
    subscribed = sorted(topics)
    requested: dict[str, MemberRequest] = {}
    for member_id in sorted(members):
        requested[member_id] = MemberRequest(
            topics=subscribed,
            weight=1.0 if weights is None else weights[member_id],
            owned=owned.get(member_id, {}),
            generation=None if generations is None else generations.get(member_id),
        )
    return PlanRequest(
        topics=dict(sorted(topics.items())),
        members=requested,
        strategy=strategy,
        lag=_observed(lag, subscribed, topics, clamp=False),
        rate=_observed(rate, subscribed, topics, clamp=True),
        options=options or PlanOptions(),
    )


def _observed(
    values: Mapping[tuple[str, int], float | None],
    subscribed: list[str],
    topics: Mapping[str, int],
    clamp: bool,
) -> dict[str, list[float | None]]:
    """topic -> value per partition (None: not observed), topics with nothing observed left
    out. `clamp`: negative values count as 0 (a rate from offsets that went backwards)."""
    arrays: dict[str, list[float | None]] = {}
    for topic in subscribed:
        array = [values.get((topic, p)) for p in range(topics[topic])]
        if any(value is not None for value in array):
            arrays[topic] = [max(0.0, v) if clamp and v is not None else v for v in array]
    return arrays


@dataclass(frozen=True, slots=True)
class Move:
    """A partition that changes owner (`to_member` None: nobody subscribes to its topic now)."""

    topic: str
    partition: int
    from_member: str
    to_member: str | None


@dataclass(frozen=True, slots=True)
class MemberSummary:
    weight: float
    partitions: int
    load: float
    normalised_load: float


@dataclass(frozen=True, slots=True)
class PlanStats:
    """The plan's figures (docs/planning.md, "The plan contract", describes each)."""

    strategy: str
    members: int
    topics: int
    partitions: int
    assigned: int
    unassigned: int
    moves: int
    budgeted_moves: int
    granted_unowned: int
    count_spread: int
    load_model: str
    max_load: float
    lower_bound: float
    max_load_ratio: float
    max_load_before: float
    max_load_ratio_before: float
    conflicting_claims: int
    stale_ownership_dropped: int
    unknown_subscriptions_ignored: int


@dataclass(frozen=True, slots=True)
class PlanColumns:
    """A plan's target assignment as columns: `owners[g]` is the index in `members` of the
    member assigned global partition g, -1 for a partition nobody is assigned (its topic has no
    subscriber). Partitions are numbered topic after topic in `topics` order (ascending
    names): topic `topics[t]` holds numbers `starts[t]` to `starts[t + 1] - 1`, its partition
    p being `starts[t] + p`. `members` is the group's member ids, ascending. The same
    assignment as `Plan.assignment`, in one array of a million entries instead of a million
    lists: what a caller that writes its own format reads. Read-only."""

    topics: tuple[str, ...]
    starts: array[int]  # len(topics) + 1 entries, from 0 to len(owners)
    members: tuple[str, ...]
    owners: array[int]

    def owner(self, topic: str, partition: int) -> str | None:
        """The member assigned `partition` of `topic` (None: nobody); KeyError for a topic or
        partition the plan does not have."""
        index = bisect_left(self.topics, topic)
        if index == len(self.topics) or self.topics[index] != topic:
            raise KeyError(topic)
        start, end = self.starts[index], self.starts[index + 1]
        if not 0 <= partition < end - start:
            raise KeyError((topic, partition))
        owner = self.owners[start + partition]
        return None if owner < 0 else self.members[owner]


class PlanAssignment(Mapping[str, dict[str, list[int]]]):
    """A plan's target assignment, member id -> topic -> ascending partitions, built member by
    member on first access. At Kafka's scale a plan holds a million (member, topic) lists that
    the planner itself never needs: it keeps each member's entry as the strategy returned it
    (fresh lists, read-only 1-tuples shared between members, or the member's claims as
    `PartitionClaims` columns) and a caller that reads a member gets that member's own dict of
    fresh lists, built once and then kept (so repeated reads return the same objects, as a
    dict's would). A caller that needs only counts, moves or stats (`Plan.members`,
    `Plan.moves`, `Plan.stats`) builds none of them.

    Invariants: every member of the group is present, in member order; topics are in topic
    order with no empty list; the entries are never changed (the shared ones belong to the
    strategy's read-only tables). It compares equal to the plain dict it stands for."""

    __slots__ = ("_built", "_columns", "_entries", "_shared", "_topics")

    def __init__(
        self,
        entries: Mapping[str, Mapping[str, Sequence[int]]],
        shared: bool = False,
        topics: Mapping[str, int] | None = None,
    ) -> None:
        # `shared`: the entries' partition sequences are read-only (shared 1-tuples), copied
        # into fresh lists on access; otherwise an entry of lists is the plan's own already.
        # `topics`: the group's topic -> partition count, in name order (the numbering of
        # `columns`). The plan keeps no owner array: a list of a million entries held by
        # every plan would cost each later garbage collection a pass over it.
        self._entries = entries
        self._shared = shared
        self._built: dict[str, dict[str, list[int]]] = {}
        self._topics = topics
        self._columns: PlanColumns | None = None

    def columns(self) -> PlanColumns:
        """The assignment as columns (see `PlanColumns`), built on the first call from the
        members' entries (a member that kept its claims, or a fresh member's dealt share,
        from its array of global numbers) over the group's topics; for an assignment built by
        hand, over the topics it names, each up to its highest partition."""
        if self._columns is None:
            topics = self._topics
            if topics is None:  # built by hand
                counts: dict[str, int] = {}
                for member_id in self:
                    for topic, partitions in self[member_id].items():
                        counts[topic] = max(counts.get(topic, 0), max(partitions) + 1)
                topics = dict(sorted(counts.items()))
            starts = array("q", accumulate(topics.values(), initial=0))
            owners = self._owner_array(dict(zip(topics, starts, strict=False)), starts[-1])
            self._columns = PlanColumns(tuple(topics), starts, tuple(self._entries), owners)
        return self._columns

    def _owner_array(self, offsets: Mapping[str, int], total: int) -> array[int]:
        """The flat owner array over `offsets` (topic -> its partition 0's global number)."""
        owners = [-1] * total
        same: dict[int, bool] = {}  # id of a `PartitionClaims.offsets` -> numbered as here
        for index, entry in enumerate(self._entries.values()):
            numbers: Iterable[int]
            if isinstance(entry, PartitionClaims) and same.setdefault(
                id(entry.offsets), entry.offsets == offsets
            ):
                numbers = entry.numbers
            else:
                numbers = (offsets[t] + p for t, ps in entry.items() for p in ps)
            for number in numbers:  # a plain loop: CPython specialises the list store
                owners[number] = index
        return array("i", owners)

    def __getitem__(self, member_id: str) -> dict[str, list[int]]:
        built = self._built.get(member_id)
        if built is not None:
            return built
        entry = self._entries[member_id]
        if type(entry) is PartitionClaims:
            lists = entry.as_lists()
        elif self._shared:
            lists = {topic: list(partitions) for topic, partitions in entry.items()}
        else:
            lists = entry  # type: ignore[assignment]  # the plan's own fresh lists
        self._built[member_id] = lists
        return lists

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._entries

    def topics(self, member_id: str) -> list[str]:
        """The topics `member_id` is assigned partitions of, in topic order (no lists built)."""
        return list(self._entries[member_id])

    def materialised(self) -> dict[str, dict[str, list[int]]]:
        """The whole assignment as a plain dict (every member's lists built)."""
        return {member_id: self[member_id] for member_id in self._entries}

    def __repr__(self) -> str:
        return f"PlanAssignment({self.materialised()!r})"


@dataclass(frozen=True, slots=True)
class Plan:
    """A planning round's result: the target assignment (every member present, topics and
    partitions sorted; a `PlanAssignment` from the planner, built on access), the moves from
    the resolved previous ownership, and the figures. `to_document()` is plain JSON data."""

    assignment: Mapping[str, dict[str, list[int]]]
    members: dict[str, MemberSummary]
    moves: tuple[Move, ...]
    stats: PlanStats

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Plan:
        """The typed form of a plan-contract result (what `plan` returns)."""
        return cls(
            assignment=document["assignment"],
            members={m: MemberSummary(**entry) for m, entry in document["members"].items()},
            moves=tuple(
                Move(move["topic"], move["partition"], move["from"], move["to"])
                for move in document["moves"]
            ),
            stats=PlanStats(**document["stats"]),
        )

    def to_document(self) -> dict[str, Any]:
        """The plan-contract result (the `plan` command's output)."""
        assignment = self.assignment
        return {
            "assignment": assignment.materialised()
            if isinstance(assignment, PlanAssignment)
            else assignment,
            "members": {
                m: {name: getattr(entry, name) for name in MemberSummary.__slots__}
                for m, entry in self.members.items()
            },
            "moves": [
                {"topic": move.topic, "partition": move.partition}
                | {"from": move.from_member, "to": move.to_member}
                for move in self.moves
            ],
            "stats": {name: getattr(self.stats, name) for name in PlanStats.__slots__},
        }
