"""Poll cost of the operator for one group of 1,000 partitions, against a real Kafka broker.

    .venv/bin/python -m benchmarks.operator_poll --bootstrap HOST:PORT [--partitions 1000]
        [--members 10] [--polls 10] [--kubeconfig PATH --namespace NS]

Creates a topic with N partitions, writes a few records to each and commits offsets for half of
them, then times each part of a poll: the Kafka reads (metadata, committed offsets, log start
and end), lag classification, building the plan document, the planner, and the whole
`reconcile.poll`. Without --kubeconfig the ConfigMaps live in an in-memory store (Kafka and the
planner are real; the Kubernetes round trips are then not in the figure); with it, the policy's
ConfigMaps are really listed and written in that namespace. Prints figures only.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import kafka_rebalance_assignors as assignors
from kafka import KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_operator import adapters, planning, reconcile
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver
from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.lag import classify
from kafka_rebalance_operator.memory import PolicyMemory
from kafka_rebalance_operator.policy import PolicySpec, parse_spec
from kafka_rebalance_operator.settings import OperatorSettings
from kafka_rebalance_operator.telemetry import Telemetry


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return times, result


def show(label: str, times: list[float]) -> None:
    print(
        f"{label:<44} median {statistics.median(times) * 1000:8.1f} ms   "
        f"min {min(times) * 1000:8.1f} ms   max {max(times) * 1000:8.1f} ms   (n={len(times)})"
    )


def prepare(bootstrap: str, partitions: int, group: str) -> str:
    topic = f"pollcost-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    time.sleep(2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    for p in range(partitions):
        for _ in range(1 + p % 7):
            producer.send(topic, value=b"x", partition=p)
    producer.flush(120)
    producer.close()
    offsets = {
        TopicPartition(topic, p): OffsetAndMetadata(1, "", -1) for p in range(0, partitions, 2)
    }
    commit_group_offsets(admin, group, offsets)
    admin.close()
    return topic


def commit_group_offsets(
    admin: RetryingAdmin, group: str, offsets: dict[Any, Any], timeout_s: float = 60
) -> None:
    """alter_group_offsets, retried for `timeout_s`: the group coordinator of a just-started
    broker answers COORDINATOR_NOT_AVAILABLE for a while."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.alter_group_offsets(group, offsets)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


class InMemoryConfigMaps:
    """The ConfigMap port in a dict (ports.ConfigMapStore)."""

    def __init__(self) -> None:
        self.store: dict[str, dict[str, Any]] = {}

    def list(self, namespace: str, policy: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(v) for v in self.store.values()]

    def upsert(self, body: Any) -> str:
        self.store[body["metadata"]["name"]] = copy.deepcopy(dict(body))
        return ""  # no versions: every write is taken

    def delete(self, namespace: str, name: str, resource_version: str = "") -> None:
        self.store.pop(name, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--polls", type=int, default=10)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--namespace", default="default")
    args = parser.parse_args()

    group = f"pollcost-group-{uuid.uuid4().hex[:6]}"
    topic = prepare(args.bootstrap, args.partitions, group)
    print(f"topic {topic}: {args.partitions} partitions, group {group}, {args.members} members")
    spec_body = {
        "groupId": group,
        "kafka": {"bootstrapServers": args.bootstrap},
        "topics": [topic],
        "members": {"selector": {"matchLabels": {"app": "bench"}}},
        "strategy": "lag-aware",
        "rebalance": {"cooldown": "0s"},
    }
    weights = {f"bench-{i}": 1.0 for i in range(args.members)}
    _time_steps(args, group, topic, parse_spec(spec_body), weights)
    poll_ports, namespace, where, policy_name, uid, custom = _poll_ports(args, spec_body)
    pods = [PodSummary(name, {"app": "bench"}, "Running", True) for name in weights]
    memory, settings = PolicyMemory(), OperatorSettings()
    status: dict[str, Any] = {}

    def one_poll() -> reconcile.PollOutcome:
        nonlocal status
        ctx = reconcile.PolicyContext(namespace, policy_name, uid, 1, spec_body, status)
        outcome = reconcile.poll(ctx, pods, memory, poll_ports, settings)
        status = {**status, **{k: v for k, v in outcome.status.items() if v is not None}}
        return outcome

    times, outcome = timed(one_poll, 1)
    show(f"first poll, applies epoch 1 ({where})", times)
    times, outcome = timed(one_poll, args.polls)
    show(f"steady poll, nothing to write ({where})", times)
    print(
        f"last action: {outcome.action}; epoch {status.get('epoch')}, "
        f"maxLoadRatio {status.get('maxLoadRatio')}"
    )
    memory.close()
    if custom is not None:  # its ConfigMaps go with it
        custom.delete_namespaced_custom_object(
            "kafka-rebalance.io", "v1alpha1", namespace, "consumergrouppolicies", policy_name
        )


def _time_steps(
    args: argparse.Namespace,
    group: str,
    topic: str,
    spec: PolicySpec,
    weights: dict[str, float],
) -> None:
    """The poll's steps timed one by one: the Kafka reads, lag classification, the plan request
    and the planner."""
    observer = KafkaObserver(args.bootstrap, {}, timeout_s=10)
    times, observation = timed(lambda: observer.observe(group, [topic], None), args.polls)
    show("kafka: metadata + committed + start/end", times)
    times, _ = timed(lambda: observer.observe(group, [topic], None, describe=True), args.polls)
    show("kafka: ... + describe_groups", times)
    times, lags = timed(
        lambda: {k: classify(v) for k, v in observation.offsets.items()}, args.polls
    )
    show("lag classification", times)
    lag_values = {k: float(v.lag) for k, v in lags.items() if v.lag is not None}
    times, request = timed(
        lambda: planning.build_request(spec, observation.topics, weights, {}, lag_values, {}),
        args.polls,
    )
    show("plan request", times)
    times, _ = timed(lambda: assignors.plan_request(request), args.polls)
    show("kafka_rebalance_assignors.plan_request (lag-aware, fresh)", times)
    observer.close()


def _poll_ports(
    args: argparse.Namespace, spec_body: dict[str, Any]
) -> tuple[Any, str, str, str, str, Any]:
    """The ports whole polls run on: the real API server with a real policy (its uid owns the
    ConfigMaps) with --kubeconfig, else in-memory ConfigMaps. Returns the ports, namespace, a
    label for the table, the policy's name and uid, and the custom-objects API (None in memory)."""
    if not args.kubeconfig:
        poll_ports = replace(
            adapters.real_ports(None, Telemetry()), configmaps=InMemoryConfigMaps()
        )
        return poll_ports, "bench", "in-memory ConfigMaps", "bench", str(uuid.uuid4()), None
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=args.kubeconfig)
    namespace = args.namespace
    # A real owner: ConfigMaps owned by a uid that does not exist are garbage-collected.
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(
        "kafka-rebalance.io",
        "v1alpha1",
        namespace,
        "consumergrouppolicies",
        {
            "apiVersion": "kafka-rebalance.io/v1alpha1",
            "kind": "ConsumerGroupPolicy",
            "metadata": {"name": f"bench-{uuid.uuid4().hex[:6]}"},
            "spec": spec_body,
        },
    )
    return (
        adapters.real_ports(api, Telemetry()),
        namespace,
        f"real API server, namespace {namespace}",
        created["metadata"]["name"],
        created["metadata"]["uid"],
        custom,
    )


if __name__ == "__main__":
    main()
