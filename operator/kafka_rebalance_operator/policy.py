"""A ConsumerGroupPolicy spec read into typed settings, with the CRD's defaults.

The API server applies the CRD defaults, but the operator repeats them here so that a policy
stored before a default existed still reads the same. A spec the operator cannot use raises
`PolicyError` naming the field; the poll then reports Stalled/InvalidSpec instead of crashing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalance_operator.durations import DurationError, parse_duration
from kafka_rebalance_operator.topic_pattern import (
    TopicPattern,
    TopicPatternError,
    compile_topic_pattern,
)

MODES = ("enforce", "propose", "observe")
# A policy that names no mode observes: it reports lag and what a plan would move, and moves
# nothing until the user opts in (docs/adopting.md: observe -> propose -> enforce). Policies
# stored under the old default (enforce) carry it in etcd, written by the API server's defaulting.
DEFAULT_MODE = "observe"
APPROVALS = ("Auto", "Manual")
APPLY_MODES = ("group", "assign", "broker")
GROUP_TYPES = ("consumer", "streams", "share")


class PolicyError(ValueError):
    """The spec names something the operator cannot act on (the message names the field)."""


@dataclass(frozen=True)
class WeightRule:
    selector: Mapping[str, Any]
    weight: float


@dataclass(frozen=True)
class PolicySpec:
    group_id: str
    bootstrap_servers: str
    secret_name: str | None
    ca_secret_name: str | None
    topics: tuple[str, ...] | None
    topic_pattern: TopicPattern | None  # RE2: linear-time matching (topic_pattern.py)
    selector: Mapping[str, Any]
    weights: tuple[WeightRule, ...] = ()
    weight_from: str | None = None
    strategy: str = "lag-aware"
    load_model: str | None = None
    target_drain_seconds: float = 300.0
    offset_reset: str = "earliest"
    mode: str = DEFAULT_MODE
    approval: str = "Auto"
    poll_interval: float = 30.0
    cooldown: float = 300.0
    min_improvement: float = 0.1
    max_moves: int | str | None = None
    count_balance: str = "relaxed"
    apply_mode: str = "group"
    handoff_timeout: float = 60.0
    # broker mode: the group's own heartbeat interval in ms (None: the brokers' default), the
    # time a plan waits for each member's next heartbeat (`phases.group_config`)
    heartbeat_interval_ms: int | None = None
    approved_plan: str | None = None
    group_type: str = "consumer"  # "streams": a KIP-1071 streams group (docs/streams.md)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def needs_approval(self) -> bool:
        """propose mode and Manual approval both apply only a plan the user approved."""
        return self.mode == "propose" or self.approval == "Manual"

    def move_budget(self, total_partitions: int) -> int | None:
        """maxMovesPerRound as a number of partitions ("25%" of 40 partitions -> 10)."""
        value = self.max_moves
        if value is None:
            return None
        if isinstance(value, int):
            return max(1, value)
        percent = float(value.rstrip("%"))
        return max(1, math.ceil(total_partitions * percent / 100.0))


def _duration(section: Mapping[str, Any], key: str, default: float, path: str) -> float:
    raw = section.get(key)
    if raw is None:
        return default
    try:
        return parse_duration(str(raw))
    except DurationError as error:
        raise PolicyError(f"{path}.{key}: {error}") from error


def _max_moves(raw: Any) -> int | str | None:
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise PolicyError("spec.rebalance.maxMovesPerRound: must be an integer or 'N%'")
    if isinstance(raw, int):
        if raw < 1:
            raise PolicyError("spec.rebalance.maxMovesPerRound: must be >= 1")
        return raw
    text = str(raw)
    if re.fullmatch(r"[0-9]+", text):
        return _max_moves(int(text))
    if not re.fullmatch(r"([1-9][0-9]?|100)%", text):
        raise PolicyError(
            f"spec.rebalance.maxMovesPerRound: must be an integer >= 1 or 1%..100%, got {text!r}"
        )
    return text


def _heartbeat_ms(apply: Mapping[str, Any], apply_mode: str) -> int | None:
    """spec.apply.heartbeatInterval in whole milliseconds (None when absent). Only a group whose
    brokers assign it (KIP-848, streams, share: broker mode) has a heartbeat interval of its own;
    the brokers' min/max bounds are theirs to check."""
    if apply.get("heartbeatInterval") is None:
        return None
    if apply_mode != "broker":
        raise PolicyError(
            "spec.apply.heartbeatInterval: a group's own heartbeat interval is a KIP-848, streams "
            f"or share group config and needs spec.apply.mode broker, got {apply_mode!r}"
        )
    seconds = _duration(apply, "heartbeatInterval", 0.0, "spec.apply")
    milliseconds = round(seconds * 1000)
    if milliseconds < 1:
        raise PolicyError(f"spec.apply.heartbeatInterval: must be at least 1ms, got {seconds:g}s")
    return milliseconds


def parse_spec(spec: Mapping[str, Any]) -> PolicySpec:
    """Typed settings from `spec`; raises PolicyError naming the first unusable field."""
    group_id = spec.get("groupId")
    if not group_id or not isinstance(group_id, str):
        raise PolicyError("spec.groupId: required")
    kafka = spec.get("kafka") or {}
    bootstrap = kafka.get("bootstrapServers")
    if not bootstrap:
        raise PolicyError("spec.kafka.bootstrapServers: required")
    secret_name = (kafka.get("secretRef") or {}).get("name")
    # a second Secret with the cluster CA (Strimzi's <cluster>-cluster-ca-cert): see kafka_security
    ca_secret_name = (kafka.get("caSecretRef") or {}).get("name")

    group_type = spec.get("groupType", "consumer")
    if group_type not in GROUP_TYPES:
        raise PolicyError(f"spec.groupType: consumer, streams or share, got {group_type!r}")
    # streams and share groups name their topics themselves (topology, subscriptions)
    streams = group_type in ("streams", "share")
    topics, pattern = _topics(spec, streams)

    members = spec.get("members") or {}
    selector = members.get("selector") or {}
    if not (selector.get("matchLabels") or selector.get("matchExpressions")):
        raise PolicyError("spec.members.selector: must not be empty")
    weights = _weights(members)

    load = spec.get("load") or {}
    rebalance = spec.get("rebalance") or {}
    apply = spec.get("apply") or {}
    mode = rebalance.get("mode", DEFAULT_MODE)
    if mode not in MODES:
        raise PolicyError(f"spec.rebalance.mode: one of {', '.join(MODES)}, got {mode!r}")
    approval = rebalance.get("approval", "Auto")
    if approval not in APPROVALS:
        raise PolicyError(f"spec.rebalance.approval: Auto or Manual, got {approval!r}")
    apply_mode = apply.get("mode", "group")
    if apply_mode not in APPLY_MODES:
        raise PolicyError(f"spec.apply.mode: group, assign or broker, got {apply_mode!r}")
    if streams and apply_mode != "broker":
        raise PolicyError(
            f"spec.groupType: {group_type} requires spec.apply.mode broker, got {apply_mode!r}"
        )
    min_improvement = float(rebalance.get("minImprovement", 0.1))
    if not 0 <= min_improvement < 1:
        raise PolicyError("spec.rebalance.minImprovement: must be in [0, 1)")
    heartbeat_ms = _heartbeat_ms(apply, apply_mode)

    return PolicySpec(
        group_id=group_id,
        bootstrap_servers=str(bootstrap),
        secret_name=secret_name,
        ca_secret_name=ca_secret_name,
        topics=tuple(topics) if topics else None,
        topic_pattern=pattern,
        selector=selector,
        weights=weights,
        weight_from=members.get("weightFrom"),
        strategy=spec.get("strategy", "lag-aware"),
        load_model=load.get("model"),
        target_drain_seconds=float(load.get("targetDrainSeconds", 300)),
        offset_reset=load.get("offsetResetPolicy", "earliest"),
        mode=mode,
        approval=approval,
        poll_interval=_duration(rebalance, "pollInterval", 30.0, "spec.rebalance"),
        cooldown=_duration(rebalance, "cooldown", 300.0, "spec.rebalance"),
        min_improvement=min_improvement,
        max_moves=_max_moves(rebalance.get("maxMovesPerRound")),
        count_balance=rebalance.get("countBalance", "relaxed"),
        apply_mode=apply_mode,
        handoff_timeout=_duration(apply, "handoffTimeout", 60.0, "spec.apply"),
        heartbeat_interval_ms=heartbeat_ms,
        approved_plan=spec.get("approvedPlan") or None,
        group_type=group_type,
    )


def _topics(spec: Mapping[str, Any], streams: bool) -> tuple[Any, TopicPattern | None]:
    """(spec.topics, the compiled spec.topicPattern): one of them, except for a streams group
    (its topology names its topics) or a share group (its members' subscriptions do)."""
    topics = spec.get("topics")
    pattern_text = spec.get("topicPattern")
    if topics and pattern_text:
        raise PolicyError("spec.topicPattern: exclusive with spec.topics")
    pattern = None
    if pattern_text:
        try:
            pattern = compile_topic_pattern(str(pattern_text))
        except TopicPatternError as error:
            raise PolicyError(f"spec.topicPattern: {error}") from None
    elif not topics and not streams:
        raise PolicyError("spec.topics: give spec.topics or spec.topicPattern")
    return topics, pattern


def _weights(members: Mapping[str, Any]) -> tuple[WeightRule, ...]:
    weights = []
    for index, rule in enumerate(members.get("weights") or []):
        weight = rule.get("weight")
        if not isinstance(weight, int | float) or not math.isfinite(weight) or weight <= 0:
            raise PolicyError(f"spec.members.weights[{index}].weight: must be > 0")
        weights.append(WeightRule(rule.get("selector") or {}, float(weight)))
    return tuple(weights)
