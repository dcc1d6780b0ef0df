"""Validation: a typed `PlanRequest` into the `ParsedRequest` every strategy plans for.

The one set of rules for planning input, whoever built it: in-process callers build the request
themselves, the `plan` command's JSON document is turned into one by `parsing` (which checks only
the document's shape: objects, unknown fields). Bad input is refused with a `PlanInputError`
that names the offending field as a path of the plan contract (docs/planning.md), so a caller and
a user of the command read the same message. *Stale* facts (ownership of deleted topics or
partitions, subscriptions to unknown topics) are dropped and counted, never refused, because
Kafka does the same and an operator replanning after a topic deletion must not fail. A lag or
rate value may be None: not reported (see `load`, "unknown is not zero").

The request's fields are checked as values, not trusted from their annotations: a JSON document
puts whatever it holds there. Sequences may be lists or tuples. Checks are whole-list and C-level
first (lists reach a million entries at Kafka's scale), with a per-value scan only to name the
offender or to drop a stale part.
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from collections.abc import Mapping
from itertools import accumulate, chain, repeat
from operator import itemgetter
from typing import Any, TypeGuard

from kafka_rebalance_assignors import numeric
from kafka_rebalance_assignors.model import (
    DEFAULT_TARGET_DRAIN_SECONDS,
    MAX_PARTITIONS,
    Group,
    Member,
    Options,
    ParsedRequest,
    PartitionClaims,
    PlanInputError,
)
from kafka_rebalance_assignors.request import MemberRequest, OwnedColumns, PlanOptions, PlanRequest

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_INT_ONLY = {int}
_SEQUENCE_TYPES = {list, tuple}
_NUMBER_TYPES = {int, float}
_ONE = {1}
_INT_CODES = frozenset("bBhHiIlLqQ")  # `array` type codes of integers
_WIDTH = array("i").itemsize  # bytes per lane of `_lanes`
_ORDER = sys.byteorder  # the arrays' byte order
assert _WIDTH >= 4, "array('i') holds the global partition numbers (up to MAX_PARTITIONS)"
_FIRST = itemgetter(0)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, list | tuple)


def require_object(value: Any, path: str) -> Mapping[str, Any]:
    """`value` when it is a mapping, else the contract's error for `path`."""
    if not isinstance(value, Mapping):
        raise PlanInputError(path, f"must be a JSON object, got {type(value).__name__}")
    return value


def _topics(raw: Any) -> dict[str, int]:
    topics = require_object(raw, "topics")
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


class _Shared:
    """What members of one request share, so that a million-claim group costs no object per
    claim and no re-check per member: the group's partition numbering (`offsets`, as
    `Group.offsets` numbers it: topics in name order), the last claimed topic names (members
    owning one partition of the same topics share one tuple of them, see
    `PartitionClaims`), and the last subscription list checked, with its result, reused while
    members pass the very same list object (the operator and `group_request` give every
    member one list)."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self.offsets = dict(zip(topics, accumulate(topics.values(), initial=0), strict=False))
        self.names: tuple[str, ...] = ()
        self.lanes = 0  # the names' partition 0, as global numbers, as `_lanes`
        self.counts: list[int] = []  # the names' partition counts
        self.bound = 0  # the smallest of `counts`
        self.subscription: object = None
        self.subscribed: tuple[tuple[str, ...], int] = ((), 0)
        self.columns: tuple[str, ...] | None = None  # the last `OwnedColumns.topics` checked
        self.ascending = False  # whether `columns` are ascending
        self.steps: array[int] = array("i", [0])  # `starts` of one partition per topic
        self.defer = True  # `_columns` may leave clean-looking columns to `_settle`
        self.pending: dict[str, _Pending] = {}  # member id -> its columns left to `_settle`


class _Pending:
    """A member's `OwnedColumns` of one partition per topic, topics ascending, partitions an
    `array('i')`: left for `_settle` to check with every other such member at once. `names`
    is the request's one tuple for equal topic lists (`_Shared.columns`); `known`, the
    member's checked subscription (set by `_member`)."""

    __slots__ = ("known", "names", "partitions")

    def __init__(self, names: tuple[str, ...], partitions: array[int]) -> None:
        self.names = names
        self.partitions = partitions
        self.known: tuple[str, ...] = ()


# What `_member` returns for a member left to `_settle`: `validate` replaces it.
_PLACEHOLDER = Member("", ())


_TOP = _WIDTH - 1 if _ORDER == "little" else 0  # the byte of a lane holding its sign bit
_LOW_HALF = bytes(range(0x80))  # bytes without the top bit


def _settle(
    pending: list[_Pending], topics: Mapping[str, int], offsets: dict[str, int]
) -> list[PartitionClaims | None]:
    """The claims of every pending member as `PartitionClaims`, or None for a member whose
    claims are not all clean (a deleted topic, a partition out of range: the member's own
    path then drops and counts them). The members claiming the same topics are checked
    together, as one block of C ints, a row per member: every partition >= 0 and below its
    topic's count, and the global numbers one addition of the topics' bases per row, in
    numpy's passes when it is installed (`numeric.claim_numbers`), else by lane arithmetic
    on one integer (`_lane_numbers`). A few C-level passes over all claims, nothing per
    claim."""
    settled: list[PartitionClaims | None] = [None] * len(pending)
    runs: dict[int, list[int]] = {}
    for index, entry in enumerate(pending):
        runs.setdefault(id(entry.names), []).append(index)
    for indexes in runs.values():
        names = pending[indexes[0]].names
        if not all(map(topics.__contains__, names)):  # a deleted topic: stale
            continue
        joined = b"".join([pending[i].partitions for i in indexes])  # (arrays: buffers)
        if numeric.ENABLED:
            bases = list(map(offsets.__getitem__, names))
            total = numeric.claim_numbers(joined, bases, list(map(topics.__getitem__, names)))
        else:
            total = _lane_numbers(joined, len(indexes), names, topics, offsets)
        if total is None:  # a partition out of range
            continue
        # every member's columns are views into these two new buffers (copies of the
        # caller's arrays, which may change after planning): no array per member
        numbers, partitions = memoryview(total).cast("i"), memoryview(joined).cast("i")
        step = len(names)
        for n, i in enumerate(indexes):
            start = n * step
            stop = start + step
            settled[i] = PartitionClaims(
                names, numbers[start:stop], offsets, partitions[start:stop]
            )
    return settled


def _lane_numbers(
    joined: bytes,
    rows: int,
    names: tuple[str, ...],
    topics: Mapping[str, int],
    offsets: Mapping[str, int],
) -> bytes | None:
    """`numeric.claim_numbers` without numpy: the claims' global numbers (rows of `names`'
    partitions, as `_lanes` reads them) by lane arithmetic on one integer, or None when a
    partition is negative or not below its topic's count."""
    if joined[_TOP::_WIDTH].translate(None, _LOW_HALF):  # a negative partition
        return None
    value = int.from_bytes(joined, _ORDER)
    size = len(joined)
    if not _below(joined, min(map(topics.__getitem__, names))):
        # some partition is not below the smallest count: each against its own topic's
        limits = array("I", [2**31 - topics[name] for name in names]).tobytes()
        over = (value + int.from_bytes(limits * rows, _ORDER)).to_bytes(size, _ORDER)
        if over[_TOP::_WIDTH].translate(None, _LOW_HALF):  # a partition out of range
            return None
    bases = array("i", map(offsets.__getitem__, names)).tobytes()
    return (value + int.from_bytes(bases * rows, _ORDER)).to_bytes(size, _ORDER)


_PLANES = _WIDTH == 4 and _ORDER == "little"  # `_below` reads 4-byte little-endian lanes
_ZERO = b"\0"


def _below(data: bytes, bound: int) -> bool:
    """Whether every value of `data` (4-byte lanes of values >= 0, as `_lanes` reads them) is
    below `bound`, read byte plane by byte plane for a bound up to 2**16 (the partition counts
    of a group of many topics): the two high planes all zero, the next below the bound's high
    byte or equal to it where the low plane is below the bound's low byte. A few strided
    copies and translations, no int per value and no 4-byte-lane integer. False when it
    cannot tell (a larger bound, another lane layout): the caller checks lane by lane."""
    if not _PLANES or not 0 < bound <= 2**16:
        return False
    if data[2::4].translate(None, _ZERO) or data[3::4].translate(None, _ZERO):
        return False  # a value of 2**16 or more
    high, low = divmod(bound, 256)
    second = data[1::4]
    if second.translate(None, bytes(range(high + 1 if low else high))):
        return False  # a high byte above the bound's (or at it, when its low byte is 0)
    if not low or high.to_bytes(1, _ORDER) not in second:
        return True
    # values with the bound's high byte: their low byte must be below the bound's
    at_high = second.translate(bytes(255 if b == high else 0 for b in range(256)))
    too_low = data[0::4].translate(bytes(255 if b >= low else 0 for b in range(256)))
    return not int.from_bytes(at_high, _ORDER) & int.from_bytes(too_low, _ORDER)


def _member(
    member_id: str, member: MemberRequest, topics: Mapping[str, int], shared: _Shared
) -> tuple[Member, int, int]:
    """(the validated member, its stale claims dropped, its unknown subscriptions ignored).
    A member whose `OwnedColumns` look clean (when `shared.defer`) comes back as
    `_PLACEHOLDER`, its `_Pending` columns in `shared.pending`: `validate` settles those
    together and builds the member."""
    path = f"members.{member_id}"
    subscription = member.topics
    if subscription is shared.subscription:  # members sharing one list: checked once
        known, unknown = shared.subscribed
    else:
        if not _is_sequence(subscription) or not all(map(isinstance, subscription, repeat(str))):
            raise PlanInputError(f"{path}.topics", "must be a list of topic names")
        subscribed = set(subscription)  # set operations: C speed for 1,000 members x 100 topics
        known = tuple(sorted(subscribed.intersection(topics)))
        if known == shared.subscribed[0]:  # equal subscriptions share one tuple (see `Group`)
            known = shared.subscribed[0]
        unknown = len(subscribed.difference(topics))
        shared.subscription, shared.subscribed = subscription, (known, unknown)

    weight = member.weight
    # (a float in range, the usual case, needs no other check; NaN fails the comparison)
    in_range = type(weight) is float and 0.0 < weight < math.inf
    if not in_range and (not _is_number(weight) or not math.isfinite(weight) or weight <= 0):
        raise PlanInputError(f"{path}.weight", f"must be a finite number > 0, got {weight!r}")

    generation = member.generation
    if generation is not None and type(generation) is not int and not _is_int(generation):
        raise PlanInputError(f"{path}.generation", f"must be an integer, got {generation!r}")

    owned: Mapping[str, Any] = member.owned
    if type(owned) is dict and not owned:  # owns nothing: no claim to check
        return Member(member_id, known, float(weight), {}, generation), 0, unknown
    if type(owned) is OwnedColumns:
        columns = _columns(owned, topics, shared, f"{path}.owned")
        if isinstance(columns, _Pending):  # claims {} until `validate` settles them
            columns.known = known
            shared.pending[member_id] = columns
            return _PLACEHOLDER, 0, unknown
        if type(columns) is PartitionClaims:
            return Member(member_id, known, float(weight), columns, generation), 0, unknown
        owned = columns  # not clean, or not one per topic: the general path below
    owned = require_object(owned, f"{path}.owned")
    claimed = _claims_at_once(owned, topics, shared)
    if claimed is not None:
        member_ = Member(member_id, known, float(weight), claimed, generation)
        return member_, 0, unknown
    claimed = {}
    stale = 0
    for topic in sorted(owned):
        partitions = owned[topic]
        if not _is_sequence(partitions) or not set(map(type, partitions)) <= _INT_ONLY:
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
    member_ = Member(member_id, known, float(weight), claimed, generation)
    return member_, stale, unknown


def _claims_at_once(
    owned: Mapping[str, Any], topics: Mapping[str, int], shared: _Shared
) -> Mapping[str, tuple[int, ...]] | None:
    """A member's claims when every one is clean (a non-empty list of ints, all of an existing
    topic and in range), in topic order as ascending tuples: the usual case, checked list by
    list at C speed. One partition per topic (the usual shape at scale) is returned as
    `PartitionClaims`, one array of global numbers. None otherwise, and the caller's
    topic-by-topic path names the problem or drops the stale part."""
    if not owned:
        return {}
    keys = list(owned)
    names = sorted(keys)
    # In name order already (the usual case: the check is by identity, at C speed): no lookups.
    lists = list(owned.values()) if names == keys else list(map(owned.__getitem__, names))
    try:
        # Lists (the usual case) are checked and measured in one pass: `list.__len__` refuses
        # anything else, which the general checks below then look at. At a million claims each
        # pass over the lists is a pass over a million scattered objects.
        lengths = set(map(list.__len__, lists))
    except TypeError:
        lengths = set()
    if lengths == _ONE:  # one partition per topic: no set or sort per list
        firsts = list(map(_FIRST, lists))
        if not set(map(type, firsts)) <= _INT_ONLY:
            return None
        return _one_per_topic(tuple(names), firsts, topics, shared)
    if not topics.keys() >= owned.keys():  # a deleted topic: stale
        return None
    if not set(map(type, lists)) <= _SEQUENCE_TYPES:
        return None
    if not all(lists) or not set(map(type, chain.from_iterable(lists))) <= _INT_ONLY:
        return None
    valid = list(map(sorted, map(set, lists)))
    if min(map(_FIRST, valid)) < 0 or not all(
        map(int.__lt__, map(itemgetter(-1), valid), map(topics.__getitem__, names))
    ):
        return None
    return dict(zip(names, map(tuple, valid), strict=True))


def _one_per_topic(
    names: tuple[str, ...],
    firsts: list[int],
    topics: Mapping[str, int],
    shared: _Shared,
    column: array[int] | None = None,
) -> PartitionClaims | None:
    """The claims of partition `firsts[i]` of topic `names[i]` (names ascending and distinct,
    `firsts` ints) as `PartitionClaims` when every one is clean, else None (a deleted topic or
    a partition out of range: the caller's general path drops and counts it). `column`: the
    same numbers as the caller's array, when it has one (its bytes are read, not its items)."""
    if not firsts:
        return None
    if min(firsts) < 0:
        return None
    if names != shared.names:  # equal names are shared: one tuple (and its facts) for all
        if not all(map(topics.__contains__, names)):  # a deleted topic: stale
            return None
        shared.names = names
        shared.lanes = _lanes(array("i", map(shared.offsets.__getitem__, names)))
        shared.counts = list(map(topics.__getitem__, names))
        shared.bound = min(shared.counts)
    # in range: below the smallest count of these topics, else below each one's own
    if max(firsts) >= shared.bound and not all(map(int.__lt__, firsts, shared.counts)):
        return None
    # Every claim's global number, base + partition, added as one integer (see `_lanes`): a
    # million additions at C speed, no int object per claim. No lane carries into the next:
    # each sum is below the group's partition count, at most MAX_PARTITIONS < 2**31.
    if column is None or column.typecode != "i":
        column = array("i", firsts)
    numbers = array("i")
    numbers.frombytes((shared.lanes + _lanes(column)).to_bytes(len(column) * _WIDTH, _ORDER))
    return PartitionClaims(shared.names, numbers, shared.offsets, firsts)


def _lanes(numbers: array[int]) -> int:
    """`numbers` (an `array('i')` of values >= 0) as one integer, one `_WIDTH`-byte lane per
    value: two such integers add lane by lane as long as no sum reaches 2**31."""
    return int.from_bytes(numbers.tobytes(), _ORDER)


def _int_column(values: Any) -> bool:
    """Whether `values` is a column of ints: an integer `array`, or a list or tuple of ints."""
    if type(values) is array:
        return values.typecode in _INT_CODES
    return _is_sequence(values) and set(map(type, values)) <= _INT_ONLY


def _columns(
    owned: OwnedColumns, topics: Mapping[str, int], shared: _Shared, path: str
) -> Mapping[str, Any] | _Pending:
    """A member's `OwnedColumns` checked as values: `PartitionClaims` when the claims are one
    partition per topic, topics ascending, and all clean (the usual case, checked with a few
    C-level passes and no object per claim); else the plain mapping topic -> partitions they
    stand for, which the general path checks, drops stale parts of and counts. Refuses bad
    columns (types, the shape of `starts`, a topic named twice) naming the field."""
    names, partitions, starts = owned.topics, owned.partitions, owned.starts
    if not _is_sequence(names):
        raise PlanInputError(f"{path}.topics", "must be a list of topic names")
    key: tuple[str, ...] = names if type(names) is tuple else tuple(names)
    # members passing equal names (or one tuple): checked once
    if key is not shared.columns and key != shared.columns:
        if not all(map(isinstance, key, repeat(str))):
            raise PlanInputError(f"{path}.topics", "must be a list of topic names")
        if len(set(key)) != len(key):
            twice = next(name for name in key if key.count(name) > 1)
            raise PlanInputError(f"{path}.topics", f"names topic {twice} twice")
        shared.columns = key
        shared.ascending = all(map(str.__lt__, key, key[1:]))
    if type(partitions) is array:
        if partitions.typecode not in _INT_CODES:
            raise PlanInputError(f"{path}.partitions", "must be partition numbers")
    elif not _is_sequence(partitions):
        raise PlanInputError(f"{path}.partitions", "must be a sequence of partition numbers")
    count = len(key)
    if starts is None:
        single = True
        if len(partitions) != count:
            raise PlanInputError(
                f"{path}.partitions",
                f"has {len(partitions)} numbers for {count} topics (no starts: one per topic)",
            )
    else:
        if len(shared.steps) != count + 1:
            shared.steps = array("i", range(count + 1))
        # one per topic: starts 0, 1, ..., n (one C-level comparison of two arrays)
        single = len(partitions) == count and starts == shared.steps
        if not single:
            if not (
                _int_column(starts)
                and len(starts) == count + 1
                and starts[0] == 0
                and starts[-1] == len(partitions)
                and all(map(int.__le__, starts, starts[1:]))
            ):
                raise PlanInputError(
                    f"{path}.starts",
                    f"must be {count + 1} ascending positions from 0 to {len(partitions)}",
                )
            single = len(partitions) == count and all(map(int.__lt__, starts, starts[1:]))
    clean_looking = single and shared.ascending and shared.defer and count
    if clean_looking and type(partitions) is array and partitions.typecode == "i":
        # checked with the other members' (see `_settle`); equal names: one tuple
        return _Pending(shared.columns or key, partitions)
    if single and shared.ascending and _int_column(partitions):
        # a list (min, max and the sums read it without an int object per item) and a copy:
        # the plan may read it after the caller changed its own
        column = partitions if type(partitions) is array else None
        firsts = partitions.tolist() if type(partitions) is array else list(partitions)
        claims = _one_per_topic(key, firsts, topics, shared, column)
        if claims is not None:
            return claims
    return dict(owned.runs())


_FLOAT_CODES = frozenset("fd")  # `array` type codes of floating-point numbers


def _float_column(values: Any) -> bool:
    """Whether `values` is a column of floats (an `array` of type code 'd' or 'f'), whose NaN
    stands for a value not reported."""
    return type(values) is array and values.typecode in _FLOAT_CODES


def _check_loads(values: Any, path: str) -> bool:
    """Every value a finite number >= 0 or None (not reported; NaN in a float `array`); True
    when none is missing. A vectorised check first (these arrays reach a million entries), the
    per-value scan only when something is missing or to name the offender."""
    if (
        values
        and set(map(type, values)) <= _NUMBER_TYPES
        and min(values) >= 0
        and math.isfinite(sum(values))
    ):
        return True
    complete = True
    column = _float_column(values)
    for index, value in enumerate(values):
        if value is None or (column and value != value):  # NaN: not reported
            complete = False
            continue
        if not _is_number(value) or not math.isfinite(value) or value < 0:
            raise PlanInputError(
                f"{path}[{index}]", f"must be a finite number >= 0 or null, got {value!r}"
            )
    return complete


def _loads(
    raw: Any, name: str, topics: Mapping[str, int], gaps: set[tuple[str, str]]
) -> dict[str, tuple[float | None, ...]]:
    """topic -> values; adds (name, topic) to `gaps` for an array with a None in it."""
    loads = require_object(raw, name)
    parsed: dict[str, tuple[float | None, ...]] = {}
    for topic in sorted(loads):
        values = loads[topic]
        path = f"{name}.{topic}"
        if not _is_sequence(values) and not _float_column(values):
            raise PlanInputError(path, "must be a list with one number per partition")
        if topic not in topics:
            continue  # a stale fact about a deleted topic
        if len(values) != topics[topic]:
            raise PlanInputError(
                path, f"has {len(values)} values but topic {topic} has {topics[topic]} partitions"
            )
        if _check_loads(values, path):
            parsed[topic] = tuple(map(float, values))
        else:  # (a NaN of a float column, the only value not equal to itself, is None too)
            parsed[topic] = tuple(
                None if value is None or value != value else float(value) for value in values
            )
            gaps.add((name, topic))
    return parsed


def parse_max_moves(raw: Any, total_partitions: int, path: str = "options.max_moves") -> int | None:
    """A move budget: an integer >= 0, a percentage string like "25%" of all partitions, or None."""
    if raw is None:
        return None
    if _is_int(raw) and raw >= 0:
        return raw
    if isinstance(raw, str) and (match := _PERCENT.match(raw)):
        percent = float(match.group(1))
        if percent <= 100:
            return math.ceil(total_partitions * percent / 100)
    raise PlanInputError(path, f"must be an integer >= 0 or a percentage like '25%', got {raw!r}")


def check_count_balance(value: Any) -> None:
    if value not in ("strict", "relaxed"):
        raise PlanInputError(
            "options.count_balance", f"must be 'strict' or 'relaxed', got {value!r}"
        )


def check_min_improvement(value: Any) -> None:
    if not _is_number(value) or not 0 <= value < 1:
        raise PlanInputError(
            "options.min_improvement", f"must be a number in [0, 1), got {value!r}"
        )


def check_target_drain_seconds(value: Any) -> None:
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise PlanInputError(
            "options.target_drain_seconds", f"must be a finite number > 0, got {value!r}"
        )


def _options(options: PlanOptions, total_partitions: int) -> Options:
    """The options with the planner's defaults in place of None."""
    count_balance = "relaxed" if options.count_balance is None else options.count_balance
    check_count_balance(count_balance)
    min_improvement = 0.0 if options.min_improvement is None else options.min_improvement
    check_min_improvement(min_improvement)
    load_model = options.load_model
    if load_model is not None and load_model not in ("count", "lag", "rate", "drain"):
        raise PlanInputError(
            "options.load_model", f"must be one of count, lag, rate, drain, got {load_model!r}"
        )
    drain = options.target_drain_seconds
    drain = DEFAULT_TARGET_DRAIN_SECONDS if drain is None else drain
    check_target_drain_seconds(drain)
    return Options(
        count_balance=count_balance,  # type: ignore[arg-type]  # checked above
        max_moves=parse_max_moves(options.max_moves, total_partitions),
        min_improvement=float(min_improvement),
        load_model=load_model,  # type: ignore[arg-type]  # checked above
        target_drain_seconds=float(drain),
    )


def validate(request: PlanRequest) -> ParsedRequest:
    """Validate one request: fields in the contract's order (strategy, topics, members by id,
    lag, rate, options). Raises PlanInputError naming the first bad field. The strategy name is
    checked for its type only: whether it names a strategy is the planner's question."""
    strategy = request.strategy
    if not isinstance(strategy, str):
        raise PlanInputError("strategy", f"must be a strategy name, got {strategy!r}")
    topics = _topics(request.topics)
    requested = require_object(request.members, "members")
    members: dict[str, Member] = {}
    stale = unknown = 0
    shared = _Shared(topics)
    for member_id in sorted(requested):
        member = requested[member_id]
        if not isinstance(member, MemberRequest):
            raise PlanInputError(
                f"members.{member_id}", f"must be a MemberRequest, got {type(member).__name__}"
            )
        validated, member_stale, member_unknown = _member(member_id, member, topics, shared)
        members[member_id] = validated
        stale += member_stale
        unknown += member_unknown
    if shared.pending:
        settled = _settle(list(shared.pending.values()), topics, shared.offsets)
        shared.defer = False
        for member_id, claims in zip(shared.pending, settled, strict=True):
            if claims is None:  # not all clean: the member's own path drops and counts them
                validated, member_stale, _ = _member(
                    member_id, requested[member_id], topics, shared
                )
                members[member_id] = validated
                stale += member_stale
            else:  # (its fields were checked by `_member`)
                member = requested[member_id]
                known = shared.pending[member_id].known
                members[member_id] = Member(
                    member_id, known, float(member.weight), claims, member.generation
                )
    gaps: set[tuple[str, str]] = set()
    group = Group(
        topics=topics,
        members=members,
        lag=_loads(request.lag, "lag", topics, gaps),
        rate=_loads(request.rate, "rate", topics, gaps),
        stale_ownership_dropped=stale,
        unknown_subscriptions_ignored=unknown,
        gaps=frozenset(gaps),
    )
    options = request.options
    if not isinstance(options, PlanOptions):
        raise PlanInputError("options", f"must be PlanOptions, got {type(options).__name__}")
    return ParsedRequest(
        strategy=strategy, group=group, options=_options(options, sum(topics.values()))
    )
