"""The plan contract's JSON edge: a document into a typed `PlanRequest`, and `plan(document)`.

The plan contract (docs/planning.md) is JSON; everything behind this module is typed. Here only
the document's *shape* is checked (the document and each member and `options` are objects, no
unknown field anywhere, `topics` and `members` present); every value is checked by
`validation.validate`, the rules in-process callers' requests go through too, so the command and
the operator refuse the same input with the same message. A document with several problems
reports a shape problem before a value problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_rebalance_assignors.collector import collector_paused
from kafka_rebalance_assignors.model import DEFAULT_STRATEGY, ParsedRequest, PlanInputError
from kafka_rebalance_assignors.planner import plan_request
from kafka_rebalance_assignors.request import MemberRequest, PlanOptions, PlanRequest
from kafka_rebalance_assignors.validation import (
    check_count_balance,
    check_min_improvement,
    check_target_drain_seconds,
    parse_max_moves,
    require_object,
    validate,
)

__all__ = ["parse_max_moves", "parse_request", "plan", "request_from_document"]

_TOP_LEVEL_FIELDS = {"strategy", "topics", "members", "lag", "rate", "options"}
_MEMBER_FIELDS = {"topics", "weight", "owned", "generation"}
_OPTION_FIELDS = {
    "count_balance",
    "max_moves",
    "min_improvement",
    "load_model",
    "target_drain_seconds",
}
# Options whose null is a value to refuse, not "the default" (PlanOptions' None): the check
# that refuses it.
_NOT_NULL = {
    "count_balance": check_count_balance,
    "min_improvement": check_min_improvement,
    "target_drain_seconds": check_target_drain_seconds,
}


def _refuse_unknown(obj: Mapping[str, Any], allowed: set[str], path: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        where = f"{path}." if path else ""
        raise PlanInputError(
            f"{where}{unknown[0]}", f"unknown field (expected one of {', '.join(sorted(allowed))})"
        )


def _members(raw: Any) -> Any:
    """member id -> MemberRequest, each member an object without unknown fields; anything but
    an object is passed on for `validate` to refuse."""
    if not isinstance(raw, Mapping):
        return raw
    members: dict[str, MemberRequest] = {}
    for member_id in sorted(raw):
        path = f"members.{member_id}"
        spec = require_object(raw[member_id], path)
        _refuse_unknown(spec, _MEMBER_FIELDS, path)
        members[member_id] = MemberRequest(
            # Unchecked input, None included: `validate` refuses anything but a list of names.
            topics=spec.get("topics"),  # type: ignore[arg-type]
            weight=spec.get("weight", 1.0),
            owned=spec.get("owned", {}),
            generation=spec.get("generation"),
        )
    return members


def _options(raw: Any) -> PlanOptions:
    options = require_object(raw, "options")
    _refuse_unknown(options, _OPTION_FIELDS, "options")
    for name, check in _NOT_NULL.items():
        if name in options and options[name] is None:
            check(None)
    return PlanOptions(**options)


def request_from_document(raw: Any, strategy_override: str | None = None) -> PlanRequest:
    """The typed request a plan-contract document states (`strategy_override`, when given,
    replaces its strategy). Raises PlanInputError for a document of the wrong shape; its values
    are `validate`'s to check."""
    document = require_object(raw, "input")
    _refuse_unknown(document, _TOP_LEVEL_FIELDS, "")
    if "topics" not in document:
        raise PlanInputError("topics", "is required (topic -> partition count)")
    if "members" not in document:
        raise PlanInputError("members", "is required (member id -> subscription)")
    return PlanRequest(
        topics=document["topics"],
        members=_members(document["members"]),
        strategy=strategy_override or document.get("strategy", DEFAULT_STRATEGY),
        lag=document.get("lag", {}),
        rate=document.get("rate", {}),
        options=_options(document.get("options", {})),
    )


def parse_request(raw: Any, strategy_override: str | None = None) -> ParsedRequest:
    """Validate one plan-contract document. Raises PlanInputError naming the bad field."""
    return validate(request_from_document(raw, strategy_override))


def plan(document: Any, strategy: str | None = None) -> dict[str, Any]:
    """Plan one plan-contract document into the contract's result document: `plan_request` on
    the request it states. Raises PlanInputError on bad input."""
    with collector_paused():
        return plan_request(request_from_document(document, strategy)).to_document()
