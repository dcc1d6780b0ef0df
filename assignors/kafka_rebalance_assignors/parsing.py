"""Validation: a plan-contract document into the `ParsedRequest` every strategy plans for.

The plan contract (docs/planning.md) is JSON. `parse_request` refuses bad input with a
`PlanInputError` that names the offending field, and silently drops *stale* facts (ownership of
deleted topics or partitions, subscriptions to unknown topics) while counting them, because Kafka
does the same and an operator replanning after a topic deletion must not fail. A lag or rate
value may be null: not reported (see `load`, "unknown is not zero").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

from kafka_rebalance_assignors.model import (
    DEFAULT_STRATEGY,
    DEFAULT_TARGET_DRAIN_SECONDS,
    MAX_PARTITIONS,
    Group,
    Member,
    Options,
    ParsedRequest,
    PlanInputError,
)

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


def _check_loads(values: list[Any], path: str) -> bool:
    """Every value a finite number >= 0 or None (not reported); True when none is None. A
    vectorised check first (these arrays reach a million entries), the per-value scan only when
    something is missing or to name the offender."""
    if (
        values
        and set(map(type, values)) <= {int, float}
        and min(values) >= 0
        and math.isfinite(sum(values))
    ):
        return True
    complete = True
    for index, value in enumerate(values):
        if value is None:
            complete = False
            continue
        if not _is_number(value) or not math.isfinite(value) or value < 0:
            raise PlanInputError(
                f"{path}[{index}]", f"must be a finite number >= 0 or null, got {value!r}"
            )
    return complete


def _parse_loads(
    raw: Any, name: str, topics: Mapping[str, int], gaps: set[tuple[str, str]]
) -> dict[str, tuple[float | None, ...]]:
    """topic -> values; adds (name, topic) to `gaps` for an array with a null in it."""
    loads = _require_object(raw, name)
    parsed: dict[str, tuple[float | None, ...]] = {}
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
        if _check_loads(values, path):
            parsed[topic] = tuple(map(float, values))
        else:
            parsed[topic] = tuple(None if value is None else float(value) for value in values)
            gaps.add((name, topic))
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


def parse_request(raw: Any, strategy_override: str | None = None) -> ParsedRequest:
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
    gaps: set[tuple[str, str]] = set()
    group = Group(
        topics=topics,
        members=members,
        lag=_parse_loads(document.get("lag", {}), "lag", topics, gaps),
        rate=_parse_loads(document.get("rate", {}), "rate", topics, gaps),
        stale_ownership_dropped=stale,
        unknown_subscriptions_ignored=unknown,
        gaps=frozenset(gaps),
    )
    options = _parse_options(document.get("options", {}), sum(topics.values()))
    return ParsedRequest(strategy=strategy, group=group, options=options)
