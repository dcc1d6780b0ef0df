"""Publish (broker mode only): the plan in place goes to the brokers' `kafka-rebalance-plan`
assignor through the plan topic, and the group's coordinator is nudged into recomputing its
target assignment (docs/kip848.md). The other modes stop at apply.
"""

from __future__ import annotations

import logging

from kafka_rebalance_operator import broker_plan, planning
from kafka_rebalance_operator.kafka_io import KafkaUnavailable
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases.apply import Applied
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure, iso
from kafka_rebalance_operator.phases.observe import Observed
from kafka_rebalance_operator.settings import OperatorSettings
from kafka_rebalance_operator.verify import target_differs

log = logging.getLogger(__name__)


def publish(
    ctx: PolicyContext,
    observed: Observed,
    applied: Applied,
    memory: PolicyMemory,
    settings: OperatorSettings,
    now: float,
) -> None:
    """Broker mode: the plan in place goes to the brokers' plug-in (the plan topic), and the
    group's coordinator is nudged to recompute its target assignment. Done once per plan hash,
    and again when the coordinator's target for the group still differs from the plan a poll
    interval after the last publish (the record was lost or overwritten, the nudge did not
    take); a publish that fails is retried at the next poll (the ConfigMaps hold the plan)."""
    plan_hash = planning.plan_hash(applied.assignment)
    if not applied.assignment:
        return
    if memory.published_hash == plan_hash:
        patience = observed.spec.poll_interval * settings.interval_scale
        drifted = target_differs(observed.observation.group, applied.assignment)
        if not drifted or now - (memory.published_at or now) < patience:
            return
    record = broker_plan.encode_plan(
        observed.spec.group_id, applied.epoch, plan_hash, iso(now), applied.assignment
    )
    if memory.observer is None:
        raise PollFailure("PublishFailed", "no Kafka client to publish the plan with")
    try:
        memory.observer.publish_plan(settings.plan_topic, observed.spec.group_id, record)
        memory.observer.nudge(observed.spec.group_id)
    except KafkaUnavailable as error:
        raise PollFailure("PublishFailed", str(error)) from None
    memory.published_hash, memory.published_at = plan_hash, now
    log.info(
        "%s/%s epoch %d: plan %s published to %s; group %s nudged",
        ctx.namespace,
        ctx.name,
        applied.epoch,
        plan_hash,
        settings.plan_topic,
        observed.spec.group_id,
    )
