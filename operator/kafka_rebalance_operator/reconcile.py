"""One poll of one policy, whatever its group kind (`groups/`): observe, plan, decide, carry
out (write ConfigMaps, publish to the brokers, trigger), report. Decide is the same code for
every kind (`phases.decide`); the kind supplies the rest.

Runs in a worker thread (it blocks on Kafka, the Kubernetes client and the planner). It returns
the status fields to patch and the Events to post; kopf writes them from the event loop. Every
effect on the world goes through the `Ports` passed in; what the operator remembers about the
policy between polls is the `PolicyMemory` passed in.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka_rebalance_operator.groups import kind_for
from kafka_rebalance_operator.kafka.cluster_identity import servers_of
from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.phases import report
from kafka_rebalance_operator.phases.context import PolicyContext, PollFailure
from kafka_rebalance_operator.phases.decide import decide
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
    kind = kind_for(ctx.spec)
    observed = kind.observe(ctx, pods, memory, ports, settings, now)
    stop = kind.wait(observed)
    if stop is not None:
        return kind.waited(ctx, observed, stop, memory, ports, settings, now)
    planned = kind.plan(ctx, observed, memory, settings, now)
    decision = decide(observed.spec, kind.facts(ctx, observed, planned), now)
    applied = kind.carry_out(ctx, observed, planned, decision, memory, ports, settings, now)
    return kind.report(ctx, observed, planned, decision, applied, memory, ports, settings, now)
