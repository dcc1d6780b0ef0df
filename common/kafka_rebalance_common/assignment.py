"""The assignment vocabulary: who consumes which partitions, from the planner to the sidecar.

One group's assignment is an `Assignment`: member id -> topic -> that member's partitions of the
topic, ascending, read-only. One member's share is a `MemberPartitions` (topic -> ascending
partitions). The operator passes these between its phases, the ConfigMap documents carry a
`MemberPartitions` per member, and `kafka-rebalance kubectl cgp` and the plan table read them.

The JSON shapes (the ConfigMap document, the plan record, `status.proposal`, the command's
output) are encoded and decoded only in `kafka_rebalance_common.wire` and at the command's
output: everything between them holds these types, not dicts of lists.

The names: a member id is a pod name (`group.instance.id`) for consumer groups, a streams or
share member id for those kinds; a topic is a topic name, or a subtopology id in a streams plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

MemberId = str
Topic = str  # a topic name (in a streams plan: a subtopology id)
Partition = int
PartitionKey = tuple[Topic, Partition]  # as kafka-python's TopicPartition orders them
MemberPartitions = Mapping[Topic, Sequence[Partition]]  # one member: topic -> ascending
# the plain, mutable dict of lists: the JSON value at the edges, and what a function fills in
# before it hands the result on as an `Assignment`
WireAssignment = dict[MemberId, dict[Topic, list[Partition]]]


class Assignment(Mapping[MemberId, MemberPartitions]):
    """member id -> topic -> ascending partitions; immutable.

    Invariant: every member of the plan is present (one without partitions maps to an empty
    mapping: an empty member is a decision too), each topic's partitions ascending and unique.
    The constructor takes that on trust and keeps what it is given without copying (a plan of a
    million partitions is not copied between phases): pass only mappings nobody changes later
    (the planner's `PlanAssignment`, a codec's output, a dict built for it). `normalised` builds
    one from anything.

    It compares equal to any mapping with the same members whose topics hold equal partitions
    (lists, tuples and read-only sequences alike), so tests and callers may compare it with a
    plain dict of lists.
    """

    __slots__ = ("_members", "_owners")

    def __init__(self, members: Mapping[MemberId, MemberPartitions] | None = None) -> None:
        self._members: Mapping[MemberId, MemberPartitions] = {} if members is None else members
        self._owners: dict[PartitionKey, MemberId] | None = None

    @classmethod
    def of(cls, members: Mapping[MemberId, MemberPartitions] | Assignment) -> Assignment:
        """`members` itself when it already is one (they are immutable), else one over it."""
        return members if isinstance(members, Assignment) else cls(members)

    @classmethod
    def normalised(cls, raw: Mapping[MemberId, Mapping[Topic, Iterable[Partition]]]) -> Assignment:
        """Members and topics in order, partitions ascending and unique; topics without
        partitions dropped, members without partitions kept."""
        built: WireAssignment = {}
        for member in sorted(raw):
            topics = raw[member]
            built[member] = {}
            for topic in sorted(topics):
                parts = sorted(set(topics[topic]))
                if parts:
                    built[member][topic] = parts
        return cls(built)

    # -- the mapping ----------------------------------------------------------------------

    def __getitem__(self, member: MemberId) -> MemberPartitions:
        return self._members[member]

    def __iter__(self) -> Iterator[MemberId]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        if other is self or (isinstance(other, Assignment) and other._members is self._members):
            return True
        if len(other) != len(self):
            return False
        for member, topics in self._members.items():
            theirs = other.get(member)
            if not isinstance(theirs, Mapping) or len(theirs) != len(topics):
                return False
            for topic, parts in topics.items():
                if topic not in theirs or list(theirs[topic]) != list(parts):
                    return False
        return True

    __hash__ = None  # type: ignore[assignment]  # like a dict

    def __repr__(self) -> str:
        return f"Assignment({self.to_dict()!r})"

    # -- what the operator, the command and the sidecar ask of it -------------------------

    def members(self) -> list[MemberId]:
        """The members, in the order the plan holds them."""
        return list(self._members)

    def partitions_of(self, member: MemberId) -> MemberPartitions:
        """`member`'s topics and partitions; empty for a member the plan does not name."""
        return self._members.get(member) or {}

    def owners(self) -> dict[PartitionKey, MemberId]:
        """(topic, partition) -> the member that has it, built once. A partition under several
        members (only share plans do that) maps to the last of them in member order."""
        if self._owners is None:
            self._owners = {
                (topic, p): member
                for member, topics in self._members.items()
                for topic, parts in topics.items()
                for p in parts
            }
        return self._owners

    def owner_of(self, topic: Topic, partition: Partition) -> MemberId | None:
        """The member that has the partition (see `owners`), None when nobody does."""
        return self.owners().get((topic, partition))

    def moves_to(self, after: Assignment) -> dict[PartitionKey, tuple[MemberId, MemberId]]:
        """The partitions owned in both assignments by different members: key -> (owner here,
        owner in `after`). Partitions granted from nobody, or given up to nobody, are not
        moves."""
        before = self.owners()
        return {
            key: (before[key], owner)
            for key, owner in after.owners().items()
            if key in before and before[key] != owner
        }

    def with_empty(self, members: Iterable[MemberId]) -> Assignment:
        """This assignment plus an empty entry for each of `members` it does not name yet."""
        return Assignment({**{m: {} for m in members}, **self._members})

    def partition_count(self) -> int:
        """How many (member, partition) pairs it holds."""
        return sum(len(parts) for topics in self._members.values() for parts in topics.values())

    def to_dict(self) -> WireAssignment:
        """A new plain dict of lists with the same content: the JSON value the wire codecs and
        the command's output write (`wire.encode_assignment`, `wire.plan_record`)."""
        return {
            member: {topic: list(parts) for topic, parts in topics.items()}
            for member, topics in self._members.items()
        }
