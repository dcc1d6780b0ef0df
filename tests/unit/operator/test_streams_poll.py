"""Whole polls of a streams-group policy (groups/streams.py) with in-memory ports: the plan
record published, the assignor switch as the trigger, the epoch bumps counted, tasks per
member in status, Stalled naming the assignor in use when the group cannot follow, and the
common conditions, proposal and approval of every group kind."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kafka_rebalance_operator.groups.streams import TRIGGER_PENDING_S
from kafka_rebalance_operator.kafka import trigger_cleanup
from kafka_rebalance_operator.kafka.streams_group import StreamsGroup, StreamsMember, Subtopology
from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.policy import PolicyError, parse_spec
from operator_ports import MemoryKafka, MemoryObserver, Policy, memory_ports

SPEC: dict[str, Any] = {
    "groupId": "app",
    "groupType": "streams",
    "kafka": {"bootstrapServers": "kafka:9092"},
    "members": {"selector": {"matchLabels": {"app": "app"}}},
    "apply": {"mode": "broker"},
    "rebalance": {"mode": "enforce", "cooldown": "0s", "minImprovement": 0.05},
}


def _member(member_id: str, active: dict[str, list[int]], standby: dict[str, list[int]]) -> Any:
    return StreamsMember(
        member_id=member_id,
        member_epoch=5,
        process_id=f"process-{member_id}",
        client_id=f"client-{member_id}",
        client_host="/127.0.0.1",
        instance_id=None,
        rack_id=None,
        active=active,
        standby=standby,
        warmup={},
        target_active=active,
    )


def _group(assignor: str | None = "kafka-rebalance-plan", epoch: int = 5) -> StreamsGroup:
    return StreamsGroup(
        group_id="app",
        state="Stable",
        group_epoch=epoch,
        assignment_epoch=epoch,
        topology_epoch=1,
        subtopologies=(
            Subtopology("0", ("words",), (), ()),
            Subtopology("1", ("app-repartition",), ("app-repartition",), ("app-changelog",)),
        ),
        members=(
            _member("m-a", {"0": [0, 1, 2, 3], "1": [0, 1]}, {}),
            _member("m-b", {"1": [2, 3]}, {"1": [0]}),
        ),
        assignor=assignor,
    )


def _cluster(group: StreamsGroup) -> MemoryKafka:
    kafka = MemoryKafka(
        topics={"words": 4, "app-repartition": 4, "app-changelog": 4},
        streams_groups={"app": group},
    )
    kafka.lag("words", {0: 9_000, 1: 8_000, 2: 7_000, 3: 6_000})
    kafka.lag("app-repartition", {0: 10, 1: 10, 2: 10, 3: 10})
    for p in range(4):
        kafka.log_end[("app-changelog", p)] = 1_000
    return kafka


def _policy(kafka: MemoryKafka) -> Policy:
    return Policy(dict(SPEC), [], memory_ports(kafka))


def test_a_lag_aware_task_plan_is_published_as_a_streams_record_and_triggered() -> None:
    kafka = _cluster(_group())
    policy = _policy(kafka)
    policy.poll()
    # published and triggered: Reconciling until the group runs the plan
    assert policy.condition("Reconciling")["status"] == "True", policy.status["conditions"]
    assert policy.condition("Ready")["reason"] == "Applying"
    assert "do not run the published plan" in policy.condition("Ready")["message"]
    assert [e[1] for e in policy.events] == ["PlanApplied"]
    assert policy.status["epoch"] == 1 and policy.status["appliedPlan"]
    ((topic, key, record),) = kafka.published
    assert (topic, key, record["kind"], record["group"]) == (
        "kafka-rebalance-plans",
        "app",
        "streams",
        "app",
    )
    assert record["memberIds"] == ["m-a", "m-b"]
    assert set(record["members"]) == {"m-a", "m-b"}
    planned = {
        (s, p)
        for tasks in record["members"].values()
        for s, text in tasks.items()
        for p in _parts(text)
    }
    assert planned == {(s, p) for s in "01" for p in range(4)}  # every task, once
    # the hot input partitions no longer all sit on m-a
    assert record["members"]["m-b"].get("0")
    assert kafka.streams_triggers == ["app"]
    assert kafka.settles == [0.0]  # triggered right after the acknowledged write
    streams = policy.status["streams"]
    assert streams["triggers"] == 1
    assert streams["tasks"] == 8 and streams["statefulTasks"] == 4
    assert streams["assignor"] == "kafka-rebalance-plan"
    assert [m["memberId"] for m in streams["members"]] == ["m-a", "m-b"]
    assert streams["members"][0]["active"] == "0:0-3 1:0-1"
    assert streams["members"][1]["standby"] == "1:0"
    assert streams["members"][0]["lag"] == 9_000 + 8_000 + 7_000 + 6_000 + 20
    assert policy.status["totalLag"] == 30_000 + 40


def _parts(text: str) -> list[int]:
    out: list[int] = []
    for item in text.split(","):
        a, _, b = item.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def _following(policy: Policy) -> bool:
    """Ready, the group running the published plan."""
    ready = policy.condition("Ready")
    return ready["status"] == "True" and ready["reason"] == "Balanced"


def test_the_epoch_bumps_of_a_plan_are_counted_once_the_group_follows_it() -> None:
    kafka = _cluster(_group())
    policy = _policy(kafka)
    policy.poll()
    record = kafka.published[-1][2]
    assert record is not None
    following = dataclasses.replace(
        _group(assignor="kafka-rebalance-plan-alt", epoch=6),
        members=tuple(
            _member(m, {s: _parts(t) for s, t in tasks.items()}, {})
            for m, tasks in sorted(record["members"].items())
        ),
    )
    kafka.streams_groups["app"] = following
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert policy.status["streams"]["lastPlanEpochBumps"] == 1
    assert policy.ports.metrics.group_bumps == [("streams", 1)]  # type: ignore[attr-defined]
    assert _following(policy)
    assert len(kafka.published) == 1 and len(kafka.streams_triggers) == 1


def test_a_group_on_another_assignor_is_stalled_naming_it_and_nothing_is_published() -> None:
    kafka = _cluster(_group(assignor="sticky"))
    policy = _policy(kafka)
    policy.poll()
    stalled = policy.condition("Stalled")
    assert stalled["status"] == "True"
    assert stalled["reason"] == "AssignorNotPlanFollowing"
    assert "'sticky'" in stalled["message"]
    assert "streams.assignor.name=kafka-rebalance-plan" in stalled["message"]
    assert not kafka.published and not kafka.streams_triggers


@pytest.mark.parametrize(
    ("assignor", "named"),
    [("kafka-rebalance-plan", "'kafka-rebalance-plan'"), (None, "unknown")],
)
def test_a_refused_trigger_is_stalled_naming_the_assignor_in_use(
    assignor: str | None, named: str
) -> None:
    kafka = _cluster(_group(assignor=assignor))
    kafka.refuse_trigger = "InvalidConfigurationException: too many tags"
    policy = _policy(kafka)
    policy.poll()
    stalled = policy.condition("Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "TriggerRefused")
    assert named in stalled["message"]
    assert "too many tags" in stalled["message"]


def test_a_trigger_that_could_not_read_the_tags_is_trigger_failed_and_triggers_nothing() -> None:
    kafka = _cluster(_group())
    kafka.fail_trigger = (
        "triggering a recompute of streams group g: reading streams.rack.aware.assignment.tags"
        " of group g: GroupAuthorizationFailedError (30); nothing was changed"
    )
    policy = _policy(kafka)
    policy.poll()
    reasons = {c["type"]: (c["status"], c["reason"]) for c in policy.status["conditions"]}
    assert "TriggerFailed" in {reason for _, reason in reasons.values()}, reasons
    failed = next(c for c in policy.status["conditions"] if c["reason"] == "TriggerFailed")
    assert "GroupAuthorizationFailedError (30); nothing was changed" in failed["message"]
    assert kafka.streams_triggers == []


def test_no_streams_group_yet_is_reconciling_not_stalled() -> None:
    kafka = _cluster(_group())
    kafka.streams_groups.clear()
    policy = _policy(kafka)
    policy.poll()
    assert policy.condition("Reconciling")["status"] == "True"
    assert policy.condition("Ready")["reason"] == "StreamsGroupNotFound"


def test_streams_needs_broker_mode_and_no_topics() -> None:
    spec = parse_spec(SPEC)
    assert (spec.group_type, spec.topics, spec.topic_pattern) == ("streams", None, None)
    with pytest.raises(PolicyError, match=r"spec.groupType: streams requires spec.apply.mode"):
        parse_spec({**SPEC, "apply": {"mode": "group"}})
    with pytest.raises(PolicyError, match=r"spec.groupType: consumer, streams or share"):
        parse_spec({**SPEC, "groupType": "queue"})
    assert parse_spec({**SPEC, "rebalance": {"mode": "propose"}}).needs_approval
    assert parse_spec({**SPEC, "rebalance": {"mode": "observe"}}).mode == "observe"
    assert (
        parse_spec(
            {k: v for k, v in SPEC.items() if k != "groupType"} | {"topics": ["t"]}
        ).group_type
        == "consumer"
    )


def _hot_tasks_of(kafka: MemoryKafka, member: str) -> set[int]:
    record = kafka.published[-1][2]
    assert record is not None
    text = record["members"][member].get("0")
    return set(_parts(text)) if text else set()


def test_weights_rules_apply_to_the_pod_named_by_the_members_client_id() -> None:
    spec = dict(SPEC)
    spec["members"] = {
        "selector": {"matchLabels": {"app": "app"}},
        "weights": [{"selector": {"matchLabels": {"size": "l"}}, "weight": 4}],
    }
    pods = [
        PodSummary("client-m-a", {"app": "app"}, "Running", True),
        PodSummary("client-m-b", {"app": "app", "size": "l"}, "Running", True),
    ]
    weighted, equal = _cluster(_group()), _cluster(_group())
    Policy(spec, pods, memory_ports(weighted)).poll()
    Policy(dict(SPEC), pods, memory_ports(equal)).poll()
    # the weight-4 member is given more of the hot subtopology than with equal weights
    assert len(_hot_tasks_of(weighted, "m-b")) > len(_hot_tasks_of(equal, "m-b"))


def test_a_plan_the_group_does_not_follow_is_triggered_again_and_both_bumps_count() -> None:
    kafka = _cluster(_group())
    policy = Policy(
        {**SPEC, "rebalance": {"mode": "enforce", "cooldown": "5m"}}, [], memory_ports(kafka)
    )
    policy.poll()
    policy.ports.clock.advance(5)  # type: ignore[attr-defined]
    policy.poll()  # within the poll interval: wait
    assert kafka.streams_triggers == ["app"]
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()  # the group still runs its old tasks: the published plan, triggered again
    assert kafka.streams_triggers == ["app", "app"]
    assert len(kafka.published) == 1  # the record is in place: not written again
    record = kafka.published[-1][2]
    assert record is not None
    kafka.streams_groups["app"] = dataclasses.replace(
        _group(epoch=7),
        members=tuple(
            _member(m, {s: _parts(t) for s, t in tasks.items()}, {})
            for m, tasks in sorted(record["members"].items())
        ),
    )
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert policy.status["streams"]["lastPlanEpochBumps"] == 2
    assert policy.status["streams"]["triggers"] == 2


def test_adaptive_weights_measure_each_members_tasks_while_backlogged() -> None:
    kafka = _cluster(_group())
    for topic in ("words", "app-repartition"):
        for p in range(4):
            kafka.log_end[(topic, p)] = 1_000_000
            kafka.committed[(topic, p)] = (0, "")
    spec = {**SPEC, "rebalance": {"mode": "enforce", "cooldown": "5m"}}
    spec["members"] = {"selector": {"matchLabels": {"app": "app"}}, "weightFrom": "adaptive"}
    policy = Policy(spec, [], memory_ports(kafka))
    # m-a runs words 0-3 and app-repartition 0-1; m-b app-repartition 2-3 (`_group`)
    fast = [("words", p) for p in range(4)] + [("app-repartition", 0), ("app-repartition", 1)]
    slow = [("app-repartition", 2), ("app-repartition", 3)]
    # the first interval settles ownership; an estimate takes 3 intervals (capacity.MIN_SAMPLES)
    for _ in range(5):
        policy.poll()
        policy.ports.clock.advance(30)  # type: ignore[attr-defined]
        for key in fast:
            kafka.committed[key] = (kafka.committed[key][0] + 3_000, "")
        for key in slow:
            kafka.committed[key] = (kafka.committed[key][0] + 300, "")
    capacity = policy.memory.capacity.capacity
    assert capacity["m-a"] == pytest.approx(6 * 3_000 / 30)
    assert capacity["m-b"] == pytest.approx(2 * 300 / 30)
    weights = policy.memory.capacity.used
    assert weights["m-a"] > weights["m-b"]


def _three_and_three(hot_lag: int) -> MemoryKafka:
    """Six stateless tasks split 3/3; client-slow runs the hot one (0_0) and lags."""
    group = StreamsGroup(
        group_id="app",
        state="Stable",
        group_epoch=5,
        assignment_epoch=5,
        topology_epoch=1,
        subtopologies=(Subtopology("0", ("words",), (), ()),),
        members=(
            dataclasses.replace(_member("fast", {"0": [1, 3, 5]}, {}), client_id="fast-0"),
            dataclasses.replace(_member("slow", {"0": [0, 2, 4]}, {}), client_id="slow-0"),
        ),
        assignor="kafka-rebalance-plan",
    )
    kafka = MemoryKafka(topics={"words": 6}, streams_groups={"app": group})
    kafka.lag("words", {0: hot_lag, 1: 0, 2: hot_lag // 20, 3: 0, 4: hot_lag // 20, 5: 0})
    return kafka


SLOW_WEIGHT_SPEC: dict[str, Any] = {
    **SPEC,
    "members": {
        "selector": {"matchLabels": {"app": "app"}},
        "weights": [{"selector": {"matchLabels": {"speed": "slow"}}, "weight": 0.1}],
    },
    "rebalance": {"mode": "enforce", "cooldown": "0s", "minImprovement": 0.1},
}


@pytest.mark.parametrize("slow_pod_ready", [True, False])
def test_a_slow_member_running_the_hot_task_gets_a_plan_that_unloads_it(
    slow_pod_ready: bool,
) -> None:
    # the plan raises the fast member's raw load, yet lowers load / weight: it is published;
    # a pod not Ready yet (e.g. restoring state) is still the member, so its weight applies
    slow = PodSummary("slow-0", {"app": "app", "speed": "slow"}, "Running", slow_pod_ready)
    pods = [PodSummary("fast-0", {"app": "app"}, "Running", True), slow]
    kafka = _three_and_three(1_600)
    policy = Policy(dict(SLOW_WEIGHT_SPEC), pods, memory_ports(kafka))
    policy.poll()
    assert policy.memory.published_hash == policy.status["appliedPlan"], policy.condition("Ready")
    assert 0 in _hot_tasks_of(kafka, "fast")


def test_adaptive_weights_hold_a_load_plan_until_a_capacity_is_measured() -> None:
    """m-a holds every hot input partition: the plan that spreads them waits while no member's
    capacity is measured (every weight is 1 for want of one), and goes once one is."""
    kafka = _cluster(_group())
    spec = {**SPEC, "members": {**SPEC["members"], "weightFrom": "adaptive"}}
    policy = Policy(spec, [], memory_ports(kafka))
    policy.poll()
    ready = policy.condition("Ready")
    assert ready["reason"] == "MeasuringCapacity", ready
    assert "waits for the first capacity measurement" in ready["message"], ready
    assert kafka.published == [] and kafka.streams_triggers == []
    # measured (how: tests/unit/operator/test_operator_capacity.py)
    policy.memory.capacity.capacity["m-a"] = 10.0
    policy.poll()
    assert len(kafka.published) == 1, policy.condition("Ready")
    assert kafka.streams_triggers == ["app"]


def test_a_failed_describe_publishes_nothing_and_is_counted() -> None:
    kafka = _cluster(_group())
    policy = _policy(kafka)
    policy.poll()  # connected, identified, published once
    assert len(kafka.published) == 1
    kafka.reachable = False  # the describe, the poll's first Kafka call, fails
    policy.ports.clock.advance(60)
    assert not policy.poll().succeeded
    assert policy.condition("Ready")["reason"] == "KafkaUnreachable"
    assert len(kafka.published) == 1
    assert policy.ports.metrics.skipped == ["membership_unknown"]


def test_a_replaced_member_running_the_plan_already_is_recorded_without_a_trigger() -> None:
    kafka = _cluster(_group())
    policy = _policy(kafka)
    policy.poll()
    record = kafka.published[-1][2]
    assert record is not None
    tasks = {m: {s: _parts(t) for s, t in ts.items()} for m, ts in record["members"].items()}
    kafka.streams_groups["app"] = dataclasses.replace(
        _group(assignor="kafka-rebalance-plan-alt", epoch=6),
        members=tuple(_member(m, t, {}) for m, t in sorted(tasks.items())),
    )
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert _following(policy)
    # m-b leaves and m-c joins; the plug-in's fallback gives m-c exactly m-b's tasks
    kafka.streams_groups["app"] = dataclasses.replace(
        _group(assignor="kafka-rebalance-plan", epoch=7),
        members=(_member("m-a", tasks["m-a"], {}), _member("m-c", tasks["m-b"], {})),
    )
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    latest = kafka.published[-1][2]
    assert latest is not None and latest["memberIds"] == ["m-a", "m-c"], kafka.published
    assert len(kafka.published) == 2 and len(kafka.streams_triggers) == 1  # no trigger needed
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert _following(policy)
    assert len(kafka.published) == 2


def test_a_group_reconciling_after_the_trigger_is_not_triggered_again() -> None:
    kafka = _cluster(_group())
    policy = Policy(
        {**SPEC, "rebalance": {"mode": "enforce", "cooldown": "5m"}}, [], memory_ports(kafka)
    )
    policy.poll()
    assert kafka.streams_triggers == ["app"]
    # the trigger took: the group epoch moved, members still reconcile to the new assignment
    kafka.streams_groups["app"] = dataclasses.replace(
        _group(epoch=5), group_epoch=6, assignment_epoch=6, state="Reconciling"
    )
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert kafka.streams_triggers == ["app"], "a reconciling group is left to reconcile"
    assert policy.condition("Ready")["reason"] == "Applying"
    # the group settles on other tasks than the plan's (the plug-in had not read it yet)
    kafka.streams_groups["app"] = dataclasses.replace(_group(epoch=6), state="Stable")
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert kafka.streams_triggers == ["app", "app"]


def test_a_trigger_that_has_not_moved_the_epoch_yet_is_not_undone_by_another() -> None:
    # A toggled tag takes effect at a member's next heartbeat: toggling it back before then
    # would undo the trigger, so a trigger that has not bumped the epoch is on its way for
    # TRIGGER_PENDING_S, however short the poll interval.
    kafka = _cluster(_group())
    rebalance = {"mode": "enforce", "cooldown": "5m", "pollInterval": "5s"}
    policy = Policy({**SPEC, "rebalance": rebalance}, [], memory_ports(kafka))
    policy.poll()
    assert kafka.streams_triggers == ["app"]
    waited = 0.0
    while waited + 5 < TRIGGER_PENDING_S:
        policy.ports.clock.advance(5)  # type: ignore[attr-defined]
        waited += 5
        policy.poll()
        assert kafka.streams_triggers == ["app"], f"triggered again after {waited} s"
    policy.ports.clock.advance(5)  # type: ignore[attr-defined]
    policy.poll()  # the epoch never moved: that trigger was lost, another is due
    assert kafka.streams_triggers == ["app", "app"]


def test_the_clean_up_of_a_deleted_policy_is_best_effort() -> None:
    kafka = _cluster(_group())
    observer = MemoryObserver(kafka)
    assert trigger_cleanup.clear_trigger(observer, "g", "ns/p") is True
    assert kafka.streams_cleared == ["g"]
    assert trigger_cleanup.clear_trigger(observer, None, "ns/p") is False  # not streams
    assert trigger_cleanup.clear_trigger(None, "g", "ns/p") is False  # never connected
    kafka.reachable = False
    assert trigger_cleanup.clear_trigger(observer, "g", "ns/p") is False  # logged, not raised
    assert kafka.streams_cleared == ["g"]


def test_deleting_a_streams_policy_takes_the_trigger_tag_out_of_its_group() -> None:
    """handlers.forget_deleted: a deleted streams policy's group loses the reserved tag (through
    the policy's own Kafka client, before it is closed); a consumer policy's group is left."""
    from types import SimpleNamespace

    import kopf
    from kafka_rebalance_operator import handlers
    from kafka_rebalance_operator.health import Liveness
    from kafka_rebalance_operator.memory import PolicyMemory

    for group_type, cleared in (("streams", ["g"]), ("consumer", [])):
        kafka = _cluster(_group())
        memory = PolicyMemory()
        memory.observer = MemoryObserver(kafka)
        operator = SimpleNamespace(
            liveness=Liveness(60.0),
            ports=SimpleNamespace(clusters=SimpleNamespace(forget=lambda key: None)),
            settings=None,
        )
        memo = kopf.Memo(operator=operator, memory=memory)
        spec = {"groupId": "g", "groupType": group_type}
        handlers.forget_deleted("DELETED", "ns", "p", memo, spec=spec)
        assert kafka.streams_cleared == cleared, group_type
        assert memory.observer is None  # closed after the clean-up


def test_a_policy_switched_to_observe_takes_its_trigger_tag_out_once() -> None:
    kafka = _cluster(_group())
    policy = _policy(kafka)
    policy.poll()
    assert kafka.streams_triggers == ["app"] and kafka.streams_cleared == []
    policy.spec = {**policy.spec, "rebalance": {"mode": "observe"}}
    policy.generation = 2
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert kafka.streams_cleared == ["app"]
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    policy.poll()
    assert kafka.streams_cleared == ["app"]  # once


def test_the_record_carries_standbys_planned_off_each_tasks_active_member() -> None:
    kafka = _cluster(dataclasses.replace(_group(), standby_replicas=1))
    policy = _policy(kafka)
    policy.poll()
    record = kafka.published[-1][2]
    owner = {
        (s, p): m
        for m, tasks in record["members"].items()
        for s, text in tasks.items()
        for p in _parts(text)
    }
    holders = {
        (s, p): m
        for m, tasks in record["standbys"].items()
        for s, text in tasks.items()
        for p in _parts(text)
    }
    # one standby per stateful task (subtopology 1), never on the member running it
    assert sorted(holders) == [("1", p) for p in range(4)]
    assert all(holders[t] != owner[t] for t in holders), (record["members"], record["standbys"])


def test_without_a_standby_count_the_record_leaves_standbys_to_the_plugin() -> None:
    kafka = _cluster(_group())  # standby_replicas None: the config could not be read
    policy = _policy(kafka)
    policy.poll()
    assert "standbys" not in kafka.published[-1][2]


def test_a_group_running_the_actives_with_other_standbys_is_triggered_onto_the_plans() -> None:
    # m-c holds every standby; balanced, the plan gives m-a two of them: the actives already
    # run as planned, yet the record is published with a trigger so the standbys move
    group = dataclasses.replace(
        _group(),
        members=(
            _member("m-a", {"0": [0, 1], "1": [0, 1]}, {}),
            _member("m-b", {"0": [2, 3], "1": [2, 3]}, {}),
            _member("m-c", {}, {"1": [0, 1, 2, 3]}),
        ),
        standby_replicas=1,
    )
    kafka = _cluster(group)
    kafka.lag("words", {0: 0, 1: 0, 2: 0, 3: 0})
    policy = _policy(kafka)
    policy.poll()
    record = kafka.published[-1][2]
    assert record["members"]["m-c"] == {}, record  # the actives stay as they run
    assert record["standbys"] == {"m-a": {"1": "2-3"}, "m-c": {"1": "0-1"}}, record
    assert kafka.streams_triggers == ["app"]
    # once the group runs the planned standbys too, it runs the plan
    moved = dataclasses.replace(
        group,
        members=(
            _member("m-a", {"0": [0, 1], "1": [0, 1]}, {"1": [2, 3]}),
            _member("m-b", {"0": [2, 3], "1": [2, 3]}, {}),
            _member("m-c", {}, {"1": [0, 1]}),
        ),
        group_epoch=6,
        assignment_epoch=6,
    )
    kafka.streams_groups["app"] = moved
    policy.poll()
    assert policy.condition("Ready")["status"] == "True", policy.condition("Ready")
    assert len(kafka.published) == 1 and kafka.streams_triggers == ["app"]


def test_each_poll_writes_a_telemetry_row_per_task_and_a_plan_row_the_backtest_reads() -> None:
    from kafka_rebalance_pipeline.schema import row_errors
    from kafka_rebalance_pipeline.streams_replay import streams_history_from_rows

    kafka = _cluster(_group())
    policy = _policy(kafka)
    policy.poll()  # a plan is published: task rows, then its plan row
    policy.ports.clock.advance(30)  # type: ignore[attr-defined]
    kafka.log_end[("words", 0)] += 3_000
    policy.poll()
    rows = policy.ports.telemetry.rows  # type: ignore[attr-defined]
    assert all(row_errors(r) is None for r in rows), [row_errors(r) for r in rows]
    tasks = [r for r in rows if r["kind"] == "streams"]
    plans = [r for r in rows if r["kind"] == "plan"]
    assert len(tasks) == 16  # 8 tasks, 2 polls
    applied = [e for e in policy.events if e[1] == "PlanApplied"]  # one plan row per published plan
    assert [p["epoch"] for p in plans] == list(range(1, len(applied) + 1)) and applied
    assert {p["strategy"] for p in plans} == {"lag-aware"}
    assert plans[0]["moves"] >= 1 and plans[0]["ts_ms"] == tasks[0]["ts_ms"]
    first = {(r["subtopology"], r["partition"]): r for r in tasks[:8]}
    assert first[("0", 0)]["lag"] == 9_000 and first[("0", 0)]["owner"] == "m-a"
    assert first[("0", 0)]["process"] == "process-m-a"
    assert first[("0", 0)]["stateful"] is False and first[("0", 0)]["changelog"] is None
    assert first[("1", 0)]["stateful"] is True and first[("1", 0)]["changelog"] == 1_000
    assert first[("1", 0)]["standbys"] == ["m-b"] and first[("1", 2)]["owner"] == "m-b"
    assert first[("1", 0)]["lag"] == 10 and first[("1", 0)]["log_end"] == 10
    assert first[("0", 0)]["rate"] is None  # one log end: no rate measured yet
    second = {(r["subtopology"], r["partition"]): r for r in tasks[8:]}
    assert second[("0", 0)]["rate"] == 100.0 and second[("0", 0)]["lag"] == 12_000
    assert second[("0", 0)]["epoch"] == plans[-1]["epoch"]
    key = {"cluster": "c", "namespace": "ns", "policy": "p", "group": "app"}
    history = streams_history_from_rows(key, rows)
    assert history.tasks == [(s, p) for s in "01" for p in range(4)]
    assert history.owners[0][:4] == ["m-a"] * 4 and history.stateful == [False] * 4 + [True] * 4
    assert history.rates[1][0] == 100.0
