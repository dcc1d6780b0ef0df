"""Streams groups (KIP-1071, `group.protocol=streams`) on the real 4.4 broker: Kafka Streams
applications follow the operator's lag-aware task plans through the broker's plan-following
`TaskAssignor` (docs/streams.md). Marked `streams`.

Everything is real: the 4.4 broker (`streams_broker`: the plug-in jar on its classpath with
its task assignors in `group.streams.assignors`, signed plan records required; `kafka`: no
plug-in), Kafka Streams 4.4 applications in Java, one JVM per instance
(tests/integration/java/StreamsTestApp.java), and, where a test needs it, the API server and
the operator process. What is measured comes from the broker: end offsets, the
group's committed offsets, and the output topic read with read_committed.

The tests share one environment per module (the session brokers and API server; topics and
groups are named per test) to keep CI minutes down.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka_rebalance_common.kafka_retry import RetryingAdmin, ensure_topic
from kafka_rebalance_common.wire import partitions as wire_partitions
from kafka_rebalance_dev.demo.cluster import policy_body, wait_for
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.devenv import kafka_broker
from kafka_rebalance_dev.devenv.toolchain import Toolchain
from kafka_rebalance_operator.kafka import streams_group, streams_trigger
from kafka_rebalance_operator.kafka.streams_group import TRIGGER_CONFIG, TRIGGER_TAG

from tests.integration.harnesses import group_harness, plan_flags
from tests.integration.streams_apps import (
    PacedProducer,
    StreamsApps,
    committed,
    compile_app,
    end_offsets,
    lag,
    missing_streams_jars,
    read_committed_output,
    set_group_configs,
)

pytestmark = [pytest.mark.integration, pytest.mark.streams]

NOT_FOLLOWING = "AssignorNotPlanFollowing"  # the Stalled reason (operator groups/streams.py)
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"  # set on each pod by the StatefulSet


TASK_ASSIGNOR_CLASS = "dev/kafkarebalance/broker/PlanFollowingTaskAssignor.class"


def plugin_missing(tools: Toolchain) -> str | None:
    """Why the brokers cannot load the plan-following task assignor (the plug-in jar lacks
    it), or None."""
    jar = tools.broker_plugin_jar
    if not jar.is_file():
        return f"the broker plug-in is not provisioned ({jar}): run scripts/bootstrap"
    with zipfile.ZipFile(jar) as archive:
        if TASK_ASSIGNOR_CLASS not in archive.namelist():
            return f"the broker plug-in ({jar}) has no streams TaskAssignor"
    return None


@dataclass
class StreamsEnv:
    """The module's shared environment: a 4.4 broker with the plug-in, an admin client and the
    toolchain; topics and groups are per test."""

    bootstrap: str
    admin: RetryingAdmin
    tools: Toolchain
    broker: Any  # KafkaHandle (tests/conftest.py), None for a plain bootstrap
    classes: Path  # StreamsTestApp compiled once for the module

    def apps(
        self, application_id: str, mode: str, source: str, sink: str, workdir: Path
    ) -> StreamsApps:
        return StreamsApps(
            self.tools, self.bootstrap, application_id, mode, source, sink, workdir, self.classes
        )

    def topic(self, name: str, partitions: int) -> str:
        ensure_topic(self.bootstrap, name, partitions)
        wait_for(
            f"topic {name} leaders",
            lambda: len(end_offsets(self.admin, name, partitions)) == partitions,
            30,
            0.25,
        )
        return name


@pytest.fixture(scope="module")
def streams_classes(tools: Toolchain) -> Path:
    if reason := missing_streams_jars(tools):
        pytest.fail(reason)  # scripts/bootstrap provisions them
    return compile_app(tools)


@pytest.fixture(scope="module")
def streams_broker(tools: Toolchain, kafka_plans: Any) -> Any:
    """The session's 4.4 broker with the plug-in: its task assignors are
    `group.streams.assignors` (`kafka_broker.plan_plugin_overrides`; the first,
    `kafka-rebalance-plan`, is the default) and signed plans are required."""
    if reason := plugin_missing(tools):
        pytest.fail(reason)  # scripts/bootstrap provisions it
    assert "group.streams.assignors" in kafka_broker.plan_plugin_overrides()
    return kafka_plans


@pytest.fixture(scope="module")
def streams_env(
    streams_broker: Any, tools: Toolchain, streams_classes: Path
) -> Iterator[StreamsEnv]:
    admin = RetryingAdmin(bootstrap_servers=streams_broker.bootstrap_servers)
    try:
        yield StreamsEnv(
            streams_broker.bootstrap_servers, admin, tools, streams_broker, streams_classes
        )
    finally:
        admin.close()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ---- (b) stateful, exactly-once: a task moves with its standby promoted -------------------------

COUNT_PARTITIONS = 4


def _count_check(output: list[tuple[str, str]], sent: dict[str, int]) -> tuple[int, int, list[str]]:
    """(lost, duplicated, examples) of a count-by-key output against what was sent: with the
    record cache off each input record yields one output record, so key k's counts must read
    exactly 1, 2, ..., sent[k]. A count seen twice is a duplicate (a record processed twice);
    a count never seen, or a final count short of sent[k], is a loss."""
    seen: dict[str, list[int]] = {}
    for key, value in output:
        seen.setdefault(key, []).append(int(value))
    lost = duplicated = 0
    examples: list[str] = []
    for key in sorted(set(sent) | set(seen)):
        counts = seen.get(key, [])
        expected = sent.get(key, 0)
        dup = len(counts) - len(set(counts))
        missing = len(set(range(1, expected + 1)) - set(counts))
        extra = len({c for c in counts if c > expected})
        if counts != sorted(counts):
            examples.append(f"{key}: counts out of order {counts[:12]}")
        lost += missing
        duplicated += dup + extra
        if (dup or missing or extra) and len(examples) < 5:
            examples.append(f"{key}: sent {expected}, counts {counts[:12]}...")
    return lost, duplicated, examples


def test_exactly_once_counts_survive_a_task_move_with_its_standby_promoted(
    streams_env: StreamsEnv, tmp_path: Path
) -> None:
    env = streams_env
    app_id = _name("count")
    source = env.topic(f"{app_id}-in", COUNT_PARTITIONS)
    sink = env.topic(f"{app_id}-out", COUNT_PARTITIONS)
    # a streams group takes its standby count from the group config, not the client's
    set_group_configs(env.admin, app_id, {"streams.num.standby.replicas": "1"})
    apps = env.apps(app_id, "count", source, sink, tmp_path)
    all_tasks = {f"0_{p}" for p in range(COUNT_PARTITIONS)}
    producer: PacedProducer | None = None
    try:
        began = time.monotonic()
        apps.start("a")
        apps.start("b")

        def both_placed() -> Any:
            a, b = apps.tasks("a"), apps.tasks("b")
            if a.active | b.active != all_tasks or not a.active or not b.active:
                return None
            # standby 1 with two instances: each holds the other's actives as standbys
            if a.standby != b.active or b.standby != a.active:
                return None
            return a, b

        a, b = wait_for("a and b with actives and standbys", both_placed, 120, 0.5, apps.crashed)
        placed = time.monotonic() - began
        producer = PacedProducer(
            env.bootstrap, source, dict.fromkeys(range(COUNT_PARTITIONS), 15.0), keys=5
        ).start()
        time.sleep(6)

        # a leaves: its active tasks move to b, which held each of them as a standby
        moved = set(a.active)
        standby_before = set(b.standby)
        left = time.monotonic()
        apps.stop("a")
        wait_for(
            "b active on every task",
            lambda: apps.tasks("b").active == all_tasks,
            90,
            0.25,
            apps.crashed,
        )
        promoted = time.monotonic() - left
        assert moved <= standby_before, (moved, standby_before)
        time.sleep(4)

        # a joins again: tasks spread back over two instances
        rejoined = time.monotonic()
        apps.start("a")
        wait_for(
            "a and b active again, each with standbys",
            lambda: both_placed(),
            90,
            0.5,
            apps.crashed,
        )
        spread = time.monotonic() - rejoined
        time.sleep(4)
        producer.stop()
        total = sum(producer.sent.values())
        drained = time.monotonic()
        wait_for(
            "the group caught up",
            lambda: sum(lag(env.admin, app_id, source, COUNT_PARTITIONS).values()) == 0,
            90,
            0.5,
            apps.crashed,
        )
        drained = time.monotonic() - drained
        output = read_committed_output(env.bootstrap, sink, timeout=5)
        lost, duplicated, examples = _count_check(output, producer.per_key)
        print(
            f"\nexactly-once count: {total} input records over {len(producer.per_key)} keys, "
            f"{len(output)} committed output records; lost {lost}, duplicated {duplicated}; "
            f"tasks {sorted(moved)} moved a->b (standbys promoted) in {promoted:.1f} s, "
            f"spread again {spread:.1f} s after a rejoined; (placed {placed:.1f} s after start, "
            f"caught up {drained:.1f} s after the input stopped)"
        )
        assert len(output) == total, (len(output), total, examples)
        assert (lost, duplicated) == (0, 0), examples
    except BaseException:
        print(apps.evidence())
        raise
    finally:
        if producer is not None and producer._thread.is_alive():
            producer.stop()
        apps.stop_all()


# ---- the operator side: a policy for a streams group ---------------------------------------------


@contextlib.contextmanager
def _policy_harness(
    bootstrap: str,
    k8s: Any,
    workdir: Path,
    prefix: str,
    partitions: int,
    replicas: int,
    plan_keys: Path | None,
    evidence: Any,
) -> Iterator[GroupHarness]:
    """A namespace with `replicas` KWOK pods (app-0, ...: the instances are named after them),
    the input topic (harness.topic), and the operator process (not started): harness.group is
    the application id."""
    endpoints = Endpoints(bootstrap, k8s.kubeconfig, k8s.tools.kubectl)
    with group_harness(
        endpoints,
        workdir,
        evidence=(evidence,),
        prefix=prefix,
        partitions=partitions,
        replicas=replicas,
        apply_mode="broker",
    ) as harness:
        harness.operator.extra = plan_flags(workdir, bootstrap, plan_keys)
        yield harness


def _apply_streams_policy(
    harness: GroupHarness, *, weights: dict[str, float] | None = None, **options: Any
) -> None:
    """The group's policy: `spec.groupType: streams`, lag-aware, enforce, apply.mode broker;
    `weights`: pod name -> relative capacity (spec.members.weights by the pod-name label)."""
    body = policy_body(
        harness.policy,
        group=harness.group,
        bootstrap=harness.endpoints.bootstrap_servers,
        topic=harness.topic,
        app=harness.app,
        strategy="lag-aware",
        mode="enforce",
        apply={"mode": "broker"},
        **options,
    )
    body["spec"]["groupType"] = "streams"
    del body["spec"]["topics"]  # a streams group's topology names its topics
    if weights:
        body["spec"]["members"]["weights"] = [
            {"selector": {"matchLabels": {POD_NAME_LABEL: pod}}, "weight": weight}
            for pod, weight in weights.items()
        ]
    harness.cluster.apply_policy(body)


def _condition(harness: GroupHarness, kind: str) -> dict[str, Any] | None:
    conditions = harness.cluster.policy_status(harness.policy).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def _following(harness: GroupHarness) -> Any:
    """The Ready condition once a plan is published and the group runs it (Ready is False,
    reason Applying, while members do not run the published plan yet)."""
    ready = _condition(harness, "Ready")
    status = harness.cluster.policy_status(harness.policy)
    published = status.get("appliedPlan")
    return ready if published and ready and ready.get("status") == "True" else None


def _trigger_cost(harness: GroupHarness) -> str:
    """The operator's own count of triggers and of the epoch bumps its last plan cost."""
    streams = harness.cluster.policy_status(harness.policy).get("streams") or {}
    return (
        f"{streams.get('triggers')} triggers, {streams.get('lastPlanEpochBumps')} epoch bumps "
        f"for the last plan (group epoch {streams.get('groupEpoch')})"
    )


def _operator_log(harness: GroupHarness) -> str:
    return harness.operator.log.read_text(errors="replace") if harness.operator.log else ""


def _tags(bootstrap: str, group: str) -> str | None:
    """The group's streams.rack.aware.assignment.tags as the brokers report them."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return streams_trigger.read_tags(admin, group)
    finally:
        admin.close()


def _publishes(harness: GroupHarness) -> int:
    return _operator_log(harness).count("published to kafka-rebalance-plans")


# ---- (a) stateless: one hot partition, one slow instance; plan vs sticky in one run -------------

STATELESS_PARTITIONS = 6
HOT, COLD = 24.0, 4.0  # records/s: partition 0 and each of the other five (44/s in all)
SLOW_DELAY_MS = 200  # the slow instance: at most 5 records/s
NOISE_EVERY = 10  # every 10th record is "noise" (the topology filters it out)
WARMUP_S, WINDOW_S = 20.0, 40.0
# With adaptive weights a plan needs measured capacities: the slow instance must be seen busy
# over at least 3 poll intervals covering 12 s (capacity.MIN_SAMPLES / MIN_SECONDS). The demand
# a never-busy instance's share is taken from follows a step in production from the first poll
# after it (history.PolicyHistory.demand), so the window may start half a minute in.
ADAPTIVE_WARMUP_S = 30.0
ADAPTIVE_COOLDOWN_S = 30
ADAPTIVE_COOLDOWN = f"{ADAPTIVE_COOLDOWN_S}s"


@dataclass
class Measured:
    label: str
    processed: int  # input records committed by the group within the window
    throughput: float  # records/s within the window
    final_lag: int  # end offsets - committed, summed, at the window's end
    lag_growth: int  # final lag minus the lag at the window's start

    def line(self) -> str:
        return (
            f"{self.label}: {self.throughput:.1f} records/s in the {WINDOW_S:.0f} s window "
            f"({self.processed} records), final lag {self.final_lag} "
            f"({self.lag_growth:+d} over the window)"
        )


def _measure(env: StreamsEnv, groups: dict[str, str], source: str) -> dict[str, Measured]:
    """Committed progress of each group (label -> application id) over one shared window."""
    before = {g: committed(env.admin, g, source, STATELESS_PARTITIONS) for g in groups.values()}
    lag_before = {
        g: sum(lag(env.admin, g, source, STATELESS_PARTITIONS).values()) for g in groups.values()
    }
    started = time.monotonic()
    time.sleep(WINDOW_S)
    took = time.monotonic() - started
    out = {}
    for label, group in groups.items():
        after = committed(env.admin, group, source, STATELESS_PARTITIONS)
        processed = sum(after.values()) - sum(before[group].values())
        final = sum(lag(env.admin, group, source, STATELESS_PARTITIONS).values())
        out[label] = Measured(label, processed, processed / took, final, final - lag_before[group])
    return out


@pytest.mark.parametrize("weighting", ["weights", "adaptive"])
def test_a_lag_aware_plan_keeps_up_with_a_hot_partition_where_sticky_falls_behind(
    streams_env: StreamsEnv, k8s: Any, plan_keys: Path, tmp_path: Path, weighting: str
) -> None:
    """Two applications read the same input at once, each with one fast and one slow instance
    (sleeps SLOW_DELAY_MS per record): one group follows the operator's lag-aware plan, the
    other uses the broker's built-in `sticky` task assignor. Sticky balances task counts (three
    each), so the slow instance gets at least 3 x COLD = 12 records/s, more than its 5: that
    group falls behind whatever its placement. The plan gives the slow instance what its
    weight allows: a weight rule on its pod (`weights`), or its capacity as measured from its
    tasks' committed offsets while backlogged (`weightFrom: adaptive`, no rule). With adaptive
    weights, plans follow the measured capacities and the demand as its rate estimate warms up,
    no faster than the cooldown allows (30 s: at most two within the 40 s window)."""
    env = streams_env
    apps: list[StreamsApps] = []

    def evidence() -> str:
        return "\n".join(a.evidence() for a in apps)

    with _policy_harness(
        env.bootstrap, k8s, tmp_path, "hot", STATELESS_PARTITIONS, 2, plan_keys, evidence
    ) as harness:
        source = harness.topic
        sticky_id = f"{harness.group}-sticky"
        planned = env.apps(
            harness.group, "stateless", source, env.topic(f"{source}-out", 6), tmp_path / "plan"
        )
        sticky = env.apps(
            sticky_id,
            "stateless",
            source,
            env.topic(f"{source}-sticky-out", 6),
            tmp_path / "sticky",
        )
        apps.extend([planned, sticky])
        fast, slow = harness.pods(2)
        set_group_configs(env.admin, sticky_id, {"streams.assignor.name": "sticky"})
        producer: PacedProducer | None = None
        try:
            began = time.monotonic()
            for group_apps in (planned, sticky):
                group_apps.workdir.mkdir(parents=True, exist_ok=True)
                group_apps.start(fast)
                group_apps.start(slow, delay_ms=SLOW_DELAY_MS)
            harness.operator.start()
            if weighting == "adaptive":
                # a cooldown a user would set (the module's 4 s lets plans chase lag noise; see
                # docs/streams.md, "Observe, propose, approve")
                _apply_streams_policy(
                    harness, weight_from="adaptive", rebalance={"cooldown": ADAPTIVE_COOLDOWN}
                )
            else:
                _apply_streams_policy(harness, weights={slow: 0.1})
            applied = time.monotonic()
            all_tasks = {f"0_{p}" for p in range(STATELESS_PARTITIONS)}
            rates = {0: HOT, **{p: COLD for p in range(1, STATELESS_PARTITIONS)}}

            def placed(a: StreamsApps) -> bool:
                return a.tasks(fast).active | a.tasks(slow).active == all_tasks

            wait_for(
                "both groups running every task",
                lambda: placed(planned) and placed(sticky),
                120,
                0.5,
                lambda: planned.crashed() or sticky.crashed(),
            )
            placed_s = time.monotonic() - began
            if weighting == "adaptive":  # capacity is measured only while backlogged
                producer = PacedProducer(env.bootstrap, source, rates, noise_every=NOISE_EVERY)
                producer.start()
            wait_for("the plan followed", lambda: _following(harness), 120, 0.5, planned.crashed)
            converged_s = time.monotonic() - applied
            if producer is None:
                producer = PacedProducer(env.bootstrap, source, rates, noise_every=NOISE_EVERY)
                producer.start()
            time.sleep(ADAPTIVE_WARMUP_S if weighting == "adaptive" else WARMUP_S)
            published_before = _publishes(harness)
            figures = _measure(env, {"plan": harness.group, "sticky": sticky_id}, source)
            published_within = _publishes(harness) - published_before
            plan, stuck = figures["plan"], figures["sticky"]
            print(
                f"\n[{weighting}] one hot partition ({HOT:.0f}/s + 5 x {COLD:.0f}/s), slow "
                f"instance {SLOW_DELAY_MS} ms/record, same input, one run:\n  {plan.line()}\n  "
                f"{stuck.line()}\n  tasks: plan fast {sorted(planned.tasks(fast).active)} slow "
                f"{sorted(planned.tasks(slow).active)}; sticky fast "
                f"{sorted(sticky.tasks(fast).active)} slow {sorted(sticky.tasks(slow).active)}; "
                f"{_publishes(harness)} plans published ({published_within} within the window); "
                f"both groups placed {placed_s:.0f} s "
                f"after the start; the first plan followed {converged_s:.1f} s after the policy "
                f"was applied; trigger cost: {_trigger_cost(harness)}"
            )
            if weighting == "adaptive":  # what each plan followed: weights, demand, moves
                for line in _operator_log(harness).splitlines():
                    if "adaptive weights" in line or "published to kafka-rebalance-plans" in line:
                        print("  " + line.split(" ", 2)[-1])
            # sticky's slow instance runs >= 3 tasks: >= 12 records/s offered, 5 processed, so
            # that group loses >= 7 records/s; the plan's keeps up within its warm-up
            assert plan.throughput >= 1.08 * stuck.throughput, (plan, stuck)
            if weighting == "adaptive":
                # capacity is measured from a backlog built on purpose before the plan, so the
                # final lag carries it: within the window, sticky's lag grows (>= 7 records/s
                # short) and the plan's grows by less than half as much, plans included
                assert stuck.lag_growth >= 150, (plan, stuck)
                assert plan.lag_growth <= stuck.lag_growth / 2, (plan, stuck)
            else:
                assert stuck.final_lag >= 2 * plan.final_lag + 100, (plan, stuck)
            # the slow instance runs fewer tasks than sticky gives it (three)
            assert len(planned.tasks(slow).active) < 3, planned.tasks(slow).active
            if weighting == "adaptive":  # the cooldown bounds the plans, structural or not
                assert published_within <= 1 + WINDOW_S // ADAPTIVE_COOLDOWN_S, published_within
        finally:
            if producer is not None:
                producer.stop()
            planned.stop_all()
            sticky.stop_all()


# ---- (c) an instance leaves, one joins; the operator stops, the application keeps on ------------


def test_c_membership_changes_are_planned_and_the_app_outlives_the_operator(
    streams_env: StreamsEnv, k8s: Any, plan_keys: Path, tmp_path: Path
) -> None:
    env = streams_env
    partitions = 4
    holder: list[StreamsApps] = []
    with _policy_harness(
        env.bootstrap,
        k8s,
        tmp_path,
        "churn",
        partitions,
        3,
        plan_keys,
        lambda: holder[0].evidence() if holder else "",
    ) as harness:
        source = harness.topic
        apps = env.apps(
            harness.group, "stateless", source, env.topic(f"{source}-out", partitions), tmp_path
        )
        holder.append(apps)
        first, second, third = harness.pods(3)
        all_tasks = {f"0_{p}" for p in range(partitions)}
        producer = PacedProducer(env.bootstrap, source, dict.fromkeys(range(partitions), 5.0))
        try:
            apps.start(first)
            apps.start(second)
            harness.operator.start()
            _apply_streams_policy(harness)
            producer.start()

            def covered_by(*instances: str) -> Any:
                held = [apps.tasks(i).active for i in instances]
                return all(held) and set().union(*held) == all_tasks

            def following() -> Any:
                return _following(harness)

            wait_for(
                "a plan followed by two instances",
                lambda: covered_by(first, second) and following(),
                120,
                0.5,
                apps.crashed,
            )
            publishes = _publishes(harness)

            # one leaves, one joins: the next plan covers the new membership
            changed = time.monotonic()
            apps.stop(second)
            apps.start(third)
            wait_for(
                "a plan over the new membership",
                lambda: (
                    covered_by(first, third) and following() and _publishes(harness) > publishes
                ),
                120,
                0.5,
                apps.crashed,
            )
            took = time.monotonic() - changed

            # the operator stops: the group keeps processing every task by its last assignment
            harness.operator.stop()
            progress = committed(env.admin, harness.group, source, partitions)
            time.sleep(8)
            after = committed(env.admin, harness.group, source, partitions)
            assert all(after[p] > progress[p] for p in range(partitions)), (progress, after)
            producer.stop()
            wait_for(
                "the group caught up without the operator",
                lambda: sum(lag(env.admin, harness.group, source, partitions).values()) == 0,
                60,
                0.5,
                apps.crashed,
            )
            print(
                f"\nleave + join: the new membership followed a new plan {took:.1f} s after the "
                f"change; without the operator every partition advanced "
                f"({sum(after.values()) - sum(progress.values())} records in 8 s) and the "
                f"group caught up; trigger cost: {_trigger_cost(harness)}"
            )

            # the policy is deleted while the operator is down: at its restart, the operator
            # retires the plan (a tombstone) and takes its tag out of the group's tags,
            # although it never polled the policy
            if TRIGGER_TAG not in (_tags(env.bootstrap, harness.group) or ""):
                # each trigger toggles the tag: an even number of them took it out already
                admin = KafkaAdminClient(bootstrap_servers=env.bootstrap)
                try:
                    streams_group.alter(admin, harness.group, TRIGGER_CONFIG, TRIGGER_TAG)
                finally:
                    admin.close()
                wait_for(
                    "the tag in place",
                    lambda: TRIGGER_TAG in (_tags(env.bootstrap, harness.group) or ""),
                    30,
                    0.5,
                )
            harness.cluster.delete_policy(harness.policy)
            harness.operator.start()
            wait_for(
                "the restarted operator retiring the deleted policy's plan and tag",
                lambda: (
                    "(tombstone)" in _operator_log(harness)
                    and TRIGGER_TAG not in (_tags(env.bootstrap, harness.group) or "")
                ),
                60,
                0.5,
            )
            assert not harness.cluster.policy_status(harness.policy)
        finally:
            if producer._thread.is_alive():
                producer.stop()
            apps.stop_all()


# ---- (e) standbys are part of the plan ----------------------------------------------------------

PLAN_TOPIC = "kafka-rebalance-plans"  # the operator's default plan topic


def _plan_record(bootstrap: str, group: str) -> dict[str, Any] | None:
    """The latest plan record the operator published for `group` (None: none yet)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = [
            TopicPartition(PLAN_TOPIC, p) for p in consumer.partitions_for_topic(PLAN_TOPIC) or []
        ]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        last: dict[str, Any] | None = None
        while any(consumer.position(p) < ends[p] for p in parts):
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    if record.key == group.encode() and record.value is not None:
                        last = json.loads(record.value)
        return last
    finally:
        consumer.close()


def _task_names(tasks: dict[str, Any]) -> frozenset[str]:
    """A record's subtopology -> partitions (a list or "0-2,5") as Kafka Streams task names."""
    names = set()
    for subtopology, parts in tasks.items():
        numbers = wire_partitions.decode_set(parts, subtopology)
        names |= {f"{subtopology}_{p}" for p in numbers}
    return frozenset(names)


def _by_instance(harness: GroupHarness, record: dict[str, Any], field: str) -> dict[str, Any]:
    """A record's `members` or `standbys` keyed by instance (the member's client id before
    -StreamThread-, as the operator's status names it)."""
    streams = harness.cluster.policy_status(harness.policy).get("streams") or {}
    instance = {
        m["memberId"]: m["clientId"].split("-StreamThread-")[0]
        for m in streams.get("members") or []
    }
    return {instance.get(m, m): _task_names(t) for m, t in (record.get(field) or {}).items()}


def test_e_standbys_are_planned_and_a_moved_stateful_task_lands_on_its_standby(
    streams_env: StreamsEnv, k8s: Any, plan_keys: Path, tmp_path: Path
) -> None:
    env = streams_env
    partitions = 6
    holder: list[StreamsApps] = []
    with _policy_harness(
        env.bootstrap,
        k8s,
        tmp_path,
        "standby",
        partitions,
        3,
        plan_keys,
        lambda: holder[0].evidence() if holder else "",
    ) as harness:
        source = harness.topic
        set_group_configs(env.admin, harness.group, {"streams.num.standby.replicas": "1"})
        apps = env.apps(
            harness.group, "count", source, env.topic(f"{source}-out", partitions), tmp_path
        )
        holder.append(apps)
        pods = harness.pods(3)
        producer = PacedProducer(
            env.bootstrap, source, dict.fromkeys(range(partitions), 5.0), keys=5
        )
        # rates dominate the task loads (lag + rate x 300 s), so lag noise does not decide
        load = {"model": "drain", "targetDrainSeconds": 300}
        try:
            began = time.monotonic()
            for pod in pods:
                apps.start(pod)
            harness.operator.start()
            _apply_streams_policy(harness, load=load)
            producer.start()

            def runs_the_record(after_epoch: int = 0) -> Any:
                """The latest record, once the group follows it and every instance runs
                exactly its planned active and standby tasks."""
                if not _following(harness):
                    return None
                record = _plan_record(env.bootstrap, harness.group)
                if record is None or record["epoch"] <= after_epoch or "standbys" not in record:
                    return None
                active = _by_instance(harness, record, "members")
                standby = _by_instance(harness, record, "standbys")
                for pod in pods:
                    tasks = apps.tasks(pod)
                    if tasks.active != active.get(pod, frozenset()):
                        return None
                    if tasks.standby != standby.get(pod, frozenset()):
                        return None
                return record, active, standby

            first, active, standby = wait_for(
                "three instances running the plan's actives and standbys",
                runs_the_record,
                150,
                1.0,
                apps.crashed,
            )
            placed = time.monotonic() - began
            all_tasks = {f"0_{p}" for p in range(partitions)}
            holders = {t: pod for pod in pods for t in standby.get(pod, ())}
            assert set(holders) == all_tasks, standby  # one standby per stateful task
            for pod in pods:
                assert not active.get(pod, frozenset()) & standby.get(pod, frozenset()), pod

            # the first instance gets (almost) no capacity: its tasks move, onto their standbys
            slow = pods[0]
            moved = set(active[slow])
            assert moved, active
            changed = time.monotonic()
            _apply_streams_policy(harness, load=load, weights={slow: 0.01})
            second, active_after, standby_after = wait_for(
                f"a plan that moves {sorted(moved)} off {slow}, followed with its standbys",
                lambda: (
                    (found := runs_the_record(first["epoch"])) and not found[1].get(slow) and found
                ),
                120,
                1.0,
                apps.crashed,
            )
            took = time.monotonic() - changed
            owner = {t: pod for pod in pods for t in active_after.get(pod, ())}
            landed = sorted(t for t in moved if owner[t] == holders[t])
            for pod in pods:
                assert not active_after.get(pod, frozenset()) & standby_after.get(pod, frozenset())
            # the brokers' task assignor placed the plan's standbys, and refused none of them
            followed = [
                line
                for line in env.broker.cluster.nodes[0].log.read_text(errors="replace").splitlines()
                if f"plan for group '{harness.group}' epoch {second['epoch']} " in line
                and "following" in line
            ]
            assert followed and all("standbys: 6 from the plan" in line for line in followed), (
                followed[-3:]
            )
            assert not any("planned standbys not followed" in line for line in followed)
            # each holder can take one of the moved tasks without unbalancing the other two
            # instances (3 tasks each): every distinct holder gets its task
            assert len(landed) >= len({holders[t] for t in moved}), (moved, holders, owner)

            producer.stop()
            total = sum(producer.sent.values())
            wait_for(
                "the group caught up",
                lambda: sum(lag(env.admin, harness.group, source, partitions).values()) == 0,
                90,
                0.5,
                apps.crashed,
            )
            output = read_committed_output(env.bootstrap, f"{source}-out", timeout=5)
            lost, duplicated, examples = _count_check(output, producer.per_key)
            print(
                f"\nplanned standbys: 6 stateful tasks on 3 instances ran the plan's actives and "
                f"standbys {placed:.1f} s after start (epoch {first['epoch']}); after {slow}'s "
                f"weight fell to 0.01, {len(landed)} of {len(moved)} moved tasks "
                f"({sorted(moved)}) landed on their standby holder (distinct holders: "
                f"{len({holders[t] for t in moved})}), followed {took:.1f} s after the change "
                f"(epoch {second['epoch']}); {total} input records, {len(output)} committed "
                f"outputs, lost {lost}, duplicated {duplicated}; {_trigger_cost(harness)}"
            )
            assert len(output) == total, (len(output), total, examples)
            assert (lost, duplicated) == (0, 0), examples
        finally:
            if producer._thread.is_alive():
                producer.stop()
            apps.stop_all()


# ---- (d) without the plug-in: Stalled, naming the assignor in use -------------------------------


def test_d_without_the_plugin_a_streams_policy_is_stalled_naming_the_assignor(
    kafka: str, k8s: Any, tools: Toolchain, streams_classes: Path, tmp_path: Path
) -> None:
    admin = RetryingAdmin(bootstrap_servers=kafka)
    env = StreamsEnv(kafka, admin, tools, None, streams_classes)
    holder: list[StreamsApps] = []
    try:
        with _policy_harness(
            kafka,
            k8s,
            tmp_path,
            "noplug",
            2,
            1,
            None,
            lambda: holder[0].evidence() if holder else "",
        ) as harness:
            apps = env.apps(
                harness.group,
                "stateless",
                harness.topic,
                env.topic(f"{harness.topic}-out", 2),
                tmp_path,
            )
            holder.append(apps)
            try:
                apps.start(harness.pods(1)[0])
                harness.operator.start()
                _apply_streams_policy(harness)

                def stalled() -> Any:
                    # (a fresh group may first be Stalled on KafkaUnreachable while its
                    # coordinator loads: wait for the verdict on the assignor)
                    found = _condition(harness, "Stalled")
                    if found and found["status"] == "True" and found["reason"] == NOT_FOLLOWING:
                        return found
                    return None

                condition = wait_for(f"Stalled: {NOT_FOLLOWING}", stalled, 120, 0.5, apps.crashed)
                assert "'sticky'" in condition["message"], condition
                assert _publishes(harness) == 0
                print(f"\nwithout the plug-in: {condition['reason']}: {condition['message']}")
            finally:
                apps.stop_all()
    finally:
        admin.close()
