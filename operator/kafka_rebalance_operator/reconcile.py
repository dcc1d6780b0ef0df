"""One poll of one policy, phase by phase (phases/): observe, plan, decide, apply, (broker
mode) publish, report. A streams-group policy (`spec.groupType: streams`) takes its own path
(`phases.streams`).

Runs in a worker thread (it blocks on Kafka, the Kubernetes client and the planner). It returns
the status fields to patch and the Events to post; kopf writes them from the event loop. Every
effect on the world goes through the `Ports` passed in; what the operator remembers about the
policy between polls is the `PolicyMemory` passed in.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka_rebalance_operator.cluster_identity import servers_of
from kafka_rebalance_operator.members import PodSummary
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases import report, streams
from kafka_rebalance_operator.phases.apply import apply
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure
from kafka_rebalance_operator.phases.decide import decide, wait
from kafka_rebalance_operator.phases.observe import observe
from kafka_rebalance_operator.phases.plan import plan
from kafka_rebalance_operator.phases.publish import publish, retire
from kafka_rebalance_operator.phases.report import PollOutcome
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.settings import OperatorSettings

__all__ = ["PolicyContext", "PolicyMemory", "PollOutcome", "poll"]


def poll(
    ctx: PolicyContext,
    pods: Sequence[PodSummary],
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
) -> PollOutcome:
    started, now = ports.clock.monotonic(), ports.clock.now()
    memory.polls += 1
    try:
        return _phases(ctx, pods, memory, ports, settings, now)
    except PollFailure as failure:
        return report.failed(ctx, failure, memory, ports, now)
    finally:
        # whatever it learned, this policy has been polled: a younger one need not wait for it
        servers = (ctx.spec.get("kafka") or {}).get("bootstrapServers") or ""
        ports.clusters.polled((ctx.namespace, ctx.name), servers_of(str(servers)))
        ports.metrics.poll_finished(ctx.namespace, ctx.name, ports.clock.monotonic() - started)


def _phases(
    ctx: PolicyContext,
    pods: Sequence[PodSummary],
    memory: PolicyMemory,
    ports: Ports,
    settings: OperatorSettings,
    now: float,
) -> PollOutcome:
    if ctx.spec.get("groupType") == "streams":  # a KIP-1071 streams group: its own path
        return streams.poll(ctx, pods, memory, ports, settings, now)
    observed = observe(ctx, pods, memory, ports, settings, now)
    stop = wait(observed)
    if stop is not None:
        return report.waited(ctx, observed, stop, memory, ports, settings, now)
    planned = plan(ctx, observed, memory, settings, now)
    decision = decide(ctx, observed, planned, settings, now)
    applied = apply(ctx, observed, planned, decision, memory, ports, settings, now)
    if observed.spec.apply_mode == "broker":
        publish(ctx, observed, applied, memory, settings, now, ports.metrics)
    elif memory.published_group is not None:  # left broker mode: the brokers drop its plan
        retire(memory, settings, f"{ctx.namespace}/{ctx.name}")
    return report.polled(ctx, observed, planned, decision, applied, memory, ports, settings, now)
