"""Operator-wide settings, from the command line (kafka_rebalance/operator_command.py).

Built once at start-up and handed to the handlers (handlers.registry, and kopf's memo) and from
there to every poll; nothing reads them from a module global.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_rebalance_operator.kafka.admission import AllowedServer

if TYPE_CHECKING:
    from kafka_rebalance_operator.kafka.plan_keys import PlanKeyRing


@dataclass(frozen=True)
class OperatorSettings:
    # --min-poll-interval: a policy whose pollInterval is shorter is Stalled (PollIntervalTooShort)
    # and polled no more often than this; the CRD itself admits 1s and more
    min_poll_interval_s: float = 5.0
    tick_s: float = 1.0  # how often each policy's timer wakes to check whether a poll is due
    kafka_timeout_s: float = 10.0
    cluster: str = "default"  # the `cluster` field of telemetry rows
    event_min_interval_s: float = 60.0  # at most one PlanApplied event per policy per interval
    # status.proposal.assignment is left out above this size (phases/report.py)
    proposal_budget_bytes: int = 512_000
    # --allowed-bootstrap-servers, parsed (kafka/admission.py); empty: any server
    allowed_bootstrap_servers: tuple[AllowedServer, ...] = ()
    # broker mode: the compacted topic the brokers' plug-in reads plans from (docs/kip848.md)
    plan_topic: str = "kafka-rebalance-plans"
    # --max-partitions-per-policy: a policy over it is Stalled before per-partition state
    # exists for it (one tenant cannot run the operator out of memory); 0: no cap
    max_partitions_per_policy: int = 20_000
    # broker mode: the shared keys plan records are signed with (--plan-key-file; the first
    # signs); empty: records go unsigned (brokers without kafka.rebalance.plans.keys.file)
    plan_keys: tuple[bytes, ...] = field(default=(), repr=False)
    # --plan-key-file, re-read when it changes (plan_keys.signing_key prefers it to plan_keys)
    plan_key_ring: PlanKeyRing | None = field(default=None, repr=False, compare=False)
    # broker mode: the operator's own kafka-python settings for writing the plan topic
    # (--plan-client-config, its bootstrap_servers the plan cluster's); never a policy's Secret,
    # never sent to a policy's bootstrap (kafka_io.KafkaObserver.publish_plan)
    plan_client: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    # broker mode: a published plan is written again (not nudged) this often, well within the
    # brokers' kafka.rebalance.plans.max.age.ms (default 15 min), so a live policy's plan
    # never expires and a deleted one's does
    plan_refresh_s: float = 300.0
