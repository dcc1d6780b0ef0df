"""The operator's StreamsGroupDescribe (kafka/streams_group.py, its own schema files) against a real
Kafka 4.4 streams group, the task lags it reads for it, and the assignor switch the brokers
refuse without the plug-in. Marked `streams`.

One Kafka Streams application (tests/integration/java/StreamsDescribeApp.java, one instance,
`group.protocol=streams`) runs on the plain `kafka` broker: its topology has a stateless
subtopology writing a repartition topic and a stateful one (count, with a changelog) reading
it, so the describe shows both kinds. Richer applications and the plan-following tests live in
test_streams_groups.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType
from kafka_rebalance_assignors import streams_tasks
from kafka_rebalance_common.kafka_retry import call_with_retry, ensure_topic
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.devenv import java_classes
from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.toolchain import Toolchain
from kafka_rebalance_operator.adapters import SystemClock
from kafka_rebalance_operator.kafka import streams_group, streams_trigger
from kafka_rebalance_operator.kafka.clients import SharedObservers
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver
from kafka_rebalance_operator.lag import PolicyOffsets, classify
from kafka_rebalance_operator.ports import Ports

from tests.integration.streams_apps import missing_streams_jars
from tests.operator_ports import (
    ListTelemetry,
    MemoryConfigMaps,
    MemorySecrets,
    MemoryStatus,
    Policy,
    RecordingMetrics,
)

pytestmark = [pytest.mark.integration, pytest.mark.streams]

APP = Path(__file__).parent / "java" / "StreamsDescribeApp.java"
APP_ID, INPUT, OUTPUT, CLIENT = "describe-app", "describe-in", "describe-out", "describe-client"
PARTITIONS = 2


def _classpath(tools: Toolchain) -> str:
    """The provisioned Kafka Streams classpath (`Toolchain.kafka_streams_classpath`); fails
    naming the missing component when kafka-streams is not provisioned."""
    if reason := missing_streams_jars(tools):
        pytest.fail(reason)
    return tools.kafka_streams_classpath()


@pytest.fixture(scope="module")
def streams_app(
    tools: Toolchain, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The application running, after it processed the input: its group id."""
    for topic in (INPUT, OUTPUT):
        ensure_topic(kafka, topic, PARTITIONS)
    producer = call_with_retry(KafkaProducer, bootstrap_servers=kafka, what="producer")
    for i in range(40):
        producer.send(INPUT, key=f"k{i}".encode(), value=f"v{i % 5}".encode(), partition=i % 2)
    producer.flush()
    producer.close()
    classpath = _classpath(tools)
    classes = java_classes.compiled(APP, classpath, tools.java_classes_cache)
    workdir = tmp_path_factory.mktemp("streams-describe")
    log = workdir / "app.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                java_binary(),
                "-Xmx128m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{classes}:{classpath}",
                APP.stem,
                kafka,
                APP_ID,
                INPUT,
                OUTPUT,
                CLIENT,
                str(workdir / "state"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            "the streams application RUNNING",
            lambda: b"state RUNNING" in log.read_bytes(),
            timeout=90,
            abort=lambda: None if process.poll() is None else log.read_text()[-2000:],
        )
        yield APP_ID
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def observer(kafka: str) -> Iterator[KafkaObserver]:
    client = KafkaObserver(kafka, {}, 10.0)
    yield client
    client.close()


def test_a_real_streams_group_decodes_members_tasks_and_topology(
    streams_app: str, observer: KafkaObserver
) -> None:
    def stable() -> streams_group.StreamsGroup | None:
        group = observer.describe_streams_group(streams_app)
        if group is None or group.state != "Stable" or not group.members:
            return None
        return group if group.members[0].active else None

    group = wait_for("the streams group Stable with tasks", stable, timeout=60)
    assert group.group_id == APP_ID
    assert group.group_epoch >= 1 and group.assignment_epoch >= 1
    assert group.assignor == "sticky"  # version 1: the broker's default task assignor
    first, second = group.subtopologies
    assert (first.subtopology_id, first.source_topics, first.stateful) == ("0", (INPUT,), False)
    assert second.subtopology_id == "1"
    assert second.repartition_source_topics and second.repartition_source_topics[0].endswith(
        "-repartition"
    )
    assert second.source_topics == second.repartition_source_topics
    assert second.stateful and second.changelog_topics[0].endswith("-changelog")
    (member,) = group.members
    assert member.client_id.startswith(CLIENT)
    assert member.process_id and member.client_host
    assert member.active == {"0": [0, 1], "1": [0, 1]}  # one instance runs every task
    assert member.standby == {} and member.warmup == {}


def test_task_lags_come_from_the_groups_commits_on_its_source_topics(
    streams_app: str, observer: KafkaObserver
) -> None:
    group = observer.describe_streams_group(streams_app)
    assert group is not None
    subtopologies = [
        streams_tasks.SubtopologyTopics(s.subtopology_id, s.source_topics, s.changelog_topics)
        for s in group.subtopologies
    ]
    topics = sorted({t for s in subtopologies for t in s.source_topics + s.changelog_topics})

    def caught_up() -> dict[tuple[str, int], float | None] | None:
        observation = observer.observe(streams_app, topics, None)
        offsets = observation.offsets
        assert isinstance(offsets, PolicyOffsets)
        lags = {k: classify(offsets[k]).lag for k in offsets}
        task_lag, _ = streams_tasks.task_loads(
            subtopologies, observation.topics, {k: v for k, v in lags.items()}, {}
        )
        sizes = streams_tasks.changelog_sizes(
            subtopologies, observation.topics, {k: offsets[k].log_end for k in offsets}
        )
        return task_lag if all(v == 0 for v in task_lag.values()) and any(sizes.values()) else None

    task_lag = wait_for("every task caught up, the changelog written", caught_up, timeout=60)
    assert sorted(task_lag) == [("0", 0), ("0", 1), ("1", 0), ("1", 1)]


def test_without_the_plug_in_the_brokers_refuse_its_assignor_name(
    streams_app: str, observer: KafkaObserver
) -> None:
    with pytest.raises(streams_group.StreamsGroupError, match=r"streams\.assignor\.name"):
        streams_group.alter(
            observer.admin, streams_app, streams_group.ASSIGNOR_CONFIG, streams_group.PLAN_ASSIGNOR
        )
    group = observer.describe_streams_group(streams_app)
    assert group is not None and group.assignor == "sticky"


def test_each_trigger_bumps_the_group_epoch_once(streams_app: str, observer: KafkaObserver) -> None:
    """The recompute trigger (a reserved tag toggled in the group's assignment configs) is
    what the operator sends once per plan: the coordinator bumps the epoch at the next
    heartbeat (KAFKA-19765), whatever the group's task assignor."""

    def settled(after: int) -> streams_group.StreamsGroup | None:
        group = observer.describe_streams_group(streams_app)
        if group is None or group.group_epoch <= after or group.state != "Stable":
            return None
        return group if group.assignment_epoch == group.group_epoch else None

    before = observer.describe_streams_group(streams_app)
    assert before is not None
    assert observer.trigger_streams_group(streams_app) == streams_group.TRIGGER_TAG
    bumped = wait_for("the epoch bumped by the trigger", lambda: settled(before.group_epoch), 60)
    assert bumped.group_epoch == before.group_epoch + 1
    assert observer.trigger_streams_group(streams_app) == ""  # deleted again
    again = wait_for("the epoch bumped again", lambda: settled(bumped.group_epoch), 60)
    assert again.group_epoch == bumped.group_epoch + 1
    assert again.members[0].active == {"0": [0, 1], "1": [0, 1]}  # nothing else changed


def _real_kafka_ports() -> Ports:
    """Ports with the real Kafka client and everything else in memory."""
    return Ports(
        configmaps=MemoryConfigMaps(),
        status=MemoryStatus(),
        secrets=MemorySecrets(),
        kafka=SharedObservers(KafkaObserver),
        clock=SystemClock(),
        metrics=RecordingMetrics(),
        telemetry=ListTelemetry(),
    )


def test_a_streams_policy_poll_on_brokers_without_the_plug_in_is_stalled_naming_sticky(
    streams_app: str, kafka: str
) -> None:
    """The whole streams poll (reconcile -> phases/streams.py) with the real Kafka client: the
    group's task assignor is the broker default `sticky`, so nothing is published."""
    ports = _real_kafka_ports()
    spec = {
        "groupId": streams_app,
        "groupType": "streams",
        "kafka": {"bootstrapServers": kafka},
        "members": {"selector": {"matchLabels": {"app": streams_app}}},
        "rebalance": {"mode": "enforce"},
        "apply": {"mode": "broker"},
    }
    policy = Policy(spec, [], ports)
    try:
        policy.poll()
    finally:
        policy.memory.close()
    stalled = policy.condition("Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "AssignorNotPlanFollowing")
    assert f"group {streams_app} uses the task assignor 'sticky'" in stalled["message"]


def _own_heartbeat(observer: KafkaObserver, group: str) -> str | None:
    """The group's own `streams.heartbeat.interval.ms` (None: the brokers' default applies)."""
    resource = ConfigResource(ConfigResourceType.GROUP, group)
    configs = observer.admin.describe_configs([resource])
    entry = ((configs.get("group") or {}).get(group) or {}).get("streams.heartbeat.interval.ms")
    return None if entry is None else str(entry["value"])


def test_a_streams_policy_sets_the_groups_own_heartbeat_and_a_refused_one_stalls_it(
    streams_app: str, kafka: str, observer: KafkaObserver
) -> None:
    """spec.apply.heartbeatInterval through the whole poll with the real Kafka client: 7s
    becomes the group's config; 1s, under these brokers' 5 s minimum, stalls the policy with
    the brokers' reason and leaves 7s in place; unset, the group is back on the default."""
    ports = _real_kafka_ports()
    spec: dict[str, Any] = {
        "groupId": streams_app,
        "groupType": "streams",
        "kafka": {"bootstrapServers": kafka},
        "members": {"selector": {"matchLabels": {"app": streams_app}}},
        "rebalance": {"mode": "enforce"},
        "apply": {"mode": "broker", "heartbeatInterval": "7s"},
    }
    policy = Policy(spec, [], ports)
    try:
        policy.poll()
        assert _own_heartbeat(observer, streams_app) == "7000"
        assert policy.condition("Stalled")["reason"] == "AssignorNotPlanFollowing"  # no plug-in

        policy.spec = {**spec, "apply": {"mode": "broker", "heartbeatInterval": "1s"}}
        policy.poll()
        stalled = policy.condition("Stalled")
        print(f"\n1s refused: {stalled['message']}")
        assert (stalled["status"], stalled["reason"]) == ("True", "HeartbeatIntervalRefused")
        assert "streams.heartbeat.interval.ms" in stalled["message"]
        assert _own_heartbeat(observer, streams_app) == "7000"

        policy.spec = {**spec, "apply": {"mode": "broker"}}
        policy.poll()
        assert _own_heartbeat(observer, streams_app) is None
    finally:
        policy.memory.close()
        observer.set_heartbeat_interval(streams_app, "streams", None)


def test_a_group_with_its_own_rack_tags_keeps_them_through_triggers_and_the_removal(
    streams_app: str, observer: KafkaObserver
) -> None:
    """The app's own `streams.rack.aware.assignment.tags` stay through each trigger (each still
    bumps the epoch once) and through the removal of the reserved tag (the deleted policy's
    clean-up); a removal with no reserved tag there writes nothing."""
    admin = observer.admin
    own = "zone,cluster"
    streams_group.alter(admin, streams_app, streams_group.TRIGGER_CONFIG, own)
    tagged = f"{own},{streams_group.TRIGGER_TAG}"

    def settled(after: int) -> streams_group.StreamsGroup | None:
        group = observer.describe_streams_group(streams_app)
        if group is None or group.group_epoch <= after or group.state != "Stable":
            return None
        return group if group.assignment_epoch == group.group_epoch else None

    try:
        start = wait_for("the app's tags applied", lambda: settled(0), 60)
        epoch = start.group_epoch
        for expected in (tagged, own, tagged):
            assert observer.trigger_streams_group(streams_app) == expected
            assert streams_trigger.read_tags(admin, streams_app) == expected
            bumped = wait_for(f"the epoch past {epoch}", lambda e=epoch: settled(e), 60)
            assert bumped.group_epoch == epoch + 1
            epoch = bumped.group_epoch
        assert observer.clear_streams_trigger(streams_app) is True
        assert streams_trigger.read_tags(admin, streams_app) == own
        assert observer.clear_streams_trigger(streams_app) is False  # nothing to remove
        assert streams_trigger.read_tags(admin, streams_app) == own
        group = wait_for("the group Stable", lambda: settled(epoch), 60)
        assert group.members[0].active == {"0": [0, 1], "1": [0, 1]}
    finally:
        streams_group.alter(admin, streams_app, streams_group.TRIGGER_CONFIG, None)
