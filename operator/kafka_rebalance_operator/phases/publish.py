"""Publish (broker mode only): the plan in place goes to the brokers' `kafka-rebalance-plan`
assignor through the plan topic, and the group's coordinator is nudged into recomputing its
target assignment (docs/kip848.md). The other modes stop at apply; a policy that leaves broker
mode, or is deleted, retires its record with a tombstone (`retire`).
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_rebalance_common.wire import plan_record

from kafka_rebalance_operator import planning
from kafka_rebalance_operator.kafka.kafka_io import KafkaUnavailable
from kafka_rebalance_operator.kafka.plan_keys import signing_key
from kafka_rebalance_operator.kafka.verify import recompute_pending, target_differs
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.apply import Applied
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, iso
from kafka_rebalance_operator.phases.observe import Observed
from kafka_rebalance_operator.ports import MetricsSink
from kafka_rebalance_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

Header = tuple[str, bytes]


MEMBERSHIP_UNKNOWN = "MembershipUnknown"  # the condition reason while nothing is published


def _member_ids(group: dict[str, Any] | None) -> list[str]:
    """The group's KIP-848 member ids as ConsumerGroupDescribe gave them (kip848.describe)."""
    return sorted(
        str(m["member_id"]) for m in (group or {}).get("members") or [] if m.get("member_id")
    )


def value_headers(settings: OperatorSettings, group_id: str, value: bytes) -> list[Header]:
    """A plan value's headers: its signature with the current first key (none unsigned)."""
    key = signing_key(settings)
    return (
        []
        if key is None
        else [(plan_record.SIGNATURE_HEADER, plan_record.sign(key, group_id, value))]
    )


def tombstone_headers(
    settings: OperatorSettings, group_id: str, incarnation: str, epoch: int
) -> list[Header]:
    """A tombstone's headers: the incarnation and epoch it retires, signed with them."""
    headers = plan_record.tombstone_headers(incarnation, epoch)
    key = signing_key(settings)
    if key is not None:
        signature = plan_record.sign_tombstone(key, group_id, incarnation, epoch)
        headers.insert(0, (plan_record.SIGNATURE_HEADER, signature))
    return headers


def publish(
    ctx: PolicyContext,
    observed: Observed,
    applied: Applied,
    memory: PolicyMemory,
    settings: OperatorSettings,
    now: float,
    metrics: MetricsSink | None = None,
) -> None:
    """Broker mode: the plan in place goes to the brokers' plug-in (the plan topic), and the
    group's coordinator is nudged to recompute its target assignment.

    When: once per plan hash (published and nudged, the nudge right after the acknowledged
    write); again, nudged, when the coordinator's target still differs from the plan a poll
    interval after the last publish and no recompute is pending (the record was lost or
    overwritten, the nudge did not take); again, not nudged, every
    `settings.plan_refresh_s` (the brokers let plans expire) and when the group's members all
    changed since the record named them (the plug-in ties a plan to its group by member id).
    A publish that fails is retried at the next poll (the ConfigMaps hold the plan).

    Invariants: nothing is published and nobody nudged while the group is not a KIP-848 group
    (ProtocolMismatch). A KIP-848 group whose coordinator uses another assignor gets each new
    plan published (followed the moment the plug-in is loaded) but is never nudged. A record
    always names the member ids it is for: while the describe fails (membership unknown) the
    poll fails with MembershipUnknown and nothing is published; a group with no member yet gets
    no record (there is nobody to name); both are counted
    (`kafka_rebalance_plan_publish_skipped_total`)."""
    plan_hash = planning.plan_hash(applied.assignment)
    if not applied.assignment:
        return
    observation = observed.observation
    group = observation.group if observation else None
    kip848_group = observation is not None and observation.assignor is not None
    if observed.mismatch and not kip848_group:
        return
    unknown = observation is None or observation.membership_error is not None
    member_ids = _member_ids(group) if kip848_group else []
    if unknown or not member_ids:
        reason = "membership_unknown" if unknown else "no_members"
        if metrics is not None:
            metrics.plan_publish_skipped(ctx.namespace, ctx.name, reason)
        if unknown:
            why = observation.membership_error if observation is not None else "not read"
            raise PollFailure(
                MEMBERSHIP_UNKNOWN,
                f"plan {plan_hash} not published: the members of group "
                f"{observed.spec.group_id} are unknown ({why}); retried at the next poll",
                stalled=False,
            )
        log.debug("%s/%s: no plan published: group has no member", ctx.namespace, ctx.name)
        return
    if memory.published_hash != plan_hash:
        nudge = True
    else:
        patience = observed.spec.poll_interval
        waited = now - (memory.published_at or now)
        strangers = bool(member_ids) and not set(member_ids) & set(memory.published_member_ids)
        missed = target_differs(group, applied.assignment) and not recompute_pending(group)
        if missed and waited >= patience:
            nudge = True
        elif waited >= settings.plan_refresh_s or strangers:
            nudge = False
        else:
            return
    if observed.mismatch:  # another server-side assignor: no nudge, no drift loop
        if memory.published_hash == plan_hash:
            return
        nudge = False
    group_id = observed.spec.group_id
    record = plan_record.encode_plan(
        group_id,
        applied.epoch,
        plan_hash,
        iso(now),
        applied.assignment,
        incarnation=ctx.uid,
        member_ids=member_ids,
    )
    headers = value_headers(settings, group_id, record)
    if memory.observer is None:
        raise PollFailure("PublishFailed", "no Kafka client to publish the plan with")
    try:
        memory.observer.publish_plan(
            settings.plan_topic, group_id, record, headers, settings.plan_client
        )
        if nudge:
            memory.observer.nudge(group_id)
    except KafkaUnavailable as error:
        raise PollFailure("PublishFailed", str(error)) from None
    memory.published_hash, memory.published_at = plan_hash, now
    memory.published_group, memory.published_member_ids = group_id, tuple(member_ids)
    memory.published_incarnation, memory.published_epoch = ctx.uid, applied.epoch
    log.info(
        "%s/%s epoch %d: plan %s published to %s (%d bytes)%s",
        ctx.namespace,
        ctx.name,
        applied.epoch,
        plan_hash,
        settings.plan_topic,
        len(record),
        f"; group {group_id} nudged" if nudge else "",
    )


def retire(memory: PolicyMemory, settings: OperatorSettings, where: str) -> None:
    """The policy published a plan and is deleted or no longer in broker mode: its record
    becomes a signed tombstone naming the incarnation and epoch it retires (`plan_record`), so
    the brokers drop the plan at once rather than at its expiry, and the tombstone retires
    nothing a later incarnation publishes. Best effort (a failure is logged: the plan still
    expires by the brokers' max age)."""
    group_id = memory.published_group
    if group_id is None or memory.observer is None:
        return
    incarnation, epoch = memory.published_incarnation or "", memory.published_epoch or 0
    headers = tombstone_headers(settings, group_id, incarnation, epoch)
    try:
        memory.observer.publish_plan(
            settings.plan_topic, group_id, None, headers, settings.plan_client
        )
    except KafkaUnavailable as error:
        log.warning("%s: the plan of group %s stays until it expires: %s", where, group_id, error)
        return
    memory.published_hash = memory.published_at = memory.published_group = None
    memory.published_member_ids = ()
    memory.published_incarnation = memory.published_epoch = None
    log.info(
        "%s: plan of group %s (incarnation %s, epoch %d) retired from %s (tombstone)",
        where,
        group_id,
        incarnation,
        epoch,
        settings.plan_topic,
    )
