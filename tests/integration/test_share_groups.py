"""Share groups (KIP-932) on the real 4.4 broker: the broker plug-in's share assignor
(`PlanFollowingShareAssignor`, the `kafka_plans` broker's `group.share.assignors`) follows a
signed share plan, and a group without one gets what Kafka's `simple` assignor gives; the
operator's share-group calls (`kafka_rebalance_operator.kafka.share_group`: ShareGroupDescribe,
DescribeShareGroupOffsets and the join-and-leave trigger) against the live groups. Marked `share`.

Consumers are real Java `KafkaShareConsumer`s with explicit acknowledgement
(tests/integration/java/ShareConsumers.java), three per group, one JVM per group. Both groups
read the same topic side by side (each group has its own share-partitions).
"""

from __future__ import annotations

import subprocess
import time
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka_rebalance_assignors.share import (
    PartitionLoad,
    ShareMemberInput,
    ShareRequest,
    plan_share,
)
from kafka_rebalance_common.kafka_retry import RetryingAdmin, ensure_topic
from kafka_rebalance_common.wire import plan_record
from kafka_rebalance_dev.demo.cluster import policy_body, wait_for
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.devenv import java_classes, kafka_broker
from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.toolchain import Toolchain
from kafka_rebalance_operator.adapters import SystemClock
from kafka_rebalance_operator.kafka import share_group
from kafka_rebalance_operator.kafka.clients import SharedObservers
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver
from kafka_rebalance_operator.kafka.share_group import ShareGroup
from kafka_rebalance_operator.ports import Ports
from kafka_rebalance_operator.settings import OperatorSettings

from tests.integration.harnesses import group_harness, kubectl_cgp, plan_flags
from tests.integration.streams_apps import PacedProducer
from tests.operator_ports import (
    ListTelemetry,
    MemoryConfigMaps,
    MemorySecrets,
    MemoryStatus,
    Policy,
    RecordingMetrics,
)

pytestmark = [pytest.mark.integration, pytest.mark.share]

APP = Path(__file__).parent / "java" / "ShareConsumers.java"
SHARE_ASSIGNOR_CLASS = "dev/kafkarebalance/broker/PlanFollowingShareAssignor.class"
PLAN_TOPIC = "kafka-rebalance-plans"
PARTITIONS = 4
RECORDS_PER_PARTITION = 100
CONSUMERS = 3


class ShareConsumers:
    """One JVM of ShareConsumers.java: `count` share consumers of `group`; stopped by closing
    its standard input (its own process, ended by pid if it does not exit)."""

    def __init__(
        self,
        tools: Toolchain,
        classes: Path,
        bootstrap: str,
        topic: str,
        group: str,
        log: Path,
        work_ms: str = "2",
    ) -> None:
        classpath = ":".join(str(j) for j in sorted(tools.kafka_libs().glob("*.jar")))
        self.log, self.group = log, group
        self._out = open(log, "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                java_binary(),
                "-Xmx128m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
                f"{classes}:{classpath}",
                APP.stem,
                bootstrap,
                topic,
                group,
                str(CONSUMERS),
                group,
                work_ms,
            ],
            stdin=subprocess.PIPE,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop_member(self, index: int) -> None:
        """Closes consumer `index` (it leaves the group); the others go on."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"stop {index}\n".encode())
        self.process.stdin.flush()
        wait_for(
            f"consumer {index} stopped",
            lambda: f"STOPPED {self.group}-{index}" in self.text(),
            40,
            0.25,
        )

    def stop(self) -> str:
        """Stops the consumers; returns the program's output."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self._out.close()
        return self.text()


def plugin_missing(tools: Toolchain) -> str | None:
    jar = tools.broker_plugin_jar
    if not jar.is_file():
        return f"the broker plug-in is not provisioned ({jar}): run scripts/bootstrap"
    with zipfile.ZipFile(jar) as archive:
        if SHARE_ASSIGNOR_CLASS not in archive.namelist():
            return (
                f"the broker plug-in ({jar}) has no share assignor: "
                "kafka-rebalance dev provision --only broker-plugin"
            )
    return None


@pytest.fixture(scope="module")
def share_broker(tools: Toolchain, kafka_plans: Any) -> Any:
    if reason := plugin_missing(tools):
        pytest.fail(reason)
    assert "group.share.assignors" in kafka_broker.plan_plugin_overrides()
    return kafka_plans


@pytest.fixture(scope="module")
def admin(share_broker: Any) -> Iterator[RetryingAdmin]:
    client = RetryingAdmin(bootstrap_servers=share_broker.bootstrap_servers)
    try:
        yield client
    finally:
        client.close()


def _produce(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for p in range(PARTITIONS):
            for i in range(RECORDS_PER_PARTITION):
                producer.send(topic, value=f"{p}-{i}".encode(), partition=p)
        producer.flush(30)
    finally:
        producer.close()


def _settled(admin: RetryingAdmin, group: str) -> ShareGroup | None:
    """The group once its CONSUMERS members all run the target assignment and every
    partition has a member; else None."""
    described = share_group.describe(admin, group)
    if described is None or len(described.members) != CONSUMERS:
        return None
    if described.assignment_epoch != described.group_epoch:
        return None
    if any(m.member_epoch != described.group_epoch for m in described.members):
        return None
    if len(described.holders()) != PARTITIONS:
        return None
    return described


def _simple_shaped(group: ShareGroup) -> None:
    """What `simple` gives 3 members on 4 partitions: one member per partition, counts 2/1/1."""
    holders = group.holders()
    assert all(len(ids) == 1 for ids in holders.values()), holders
    counts = sorted(sum(len(p) for p in m.assignment.values()) for m in group.members)
    assert counts == [1, 1, 2], group.assignment()


def test_a_share_plan_is_followed_and_a_group_without_one_gets_simple(
    tools: Toolchain, share_broker: Any, admin: RetryingAdmin, plan_keys: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    bootstrap = share_broker.bootstrap_servers
    suffix = uuid.uuid4().hex[:6]
    topic, planned, plain = f"share-jobs-{suffix}", f"share-plan-{suffix}", f"share-simple-{suffix}"
    ensure_topic(bootstrap, topic, PARTITIONS)
    _produce(bootstrap, topic)
    classpath = ":".join(str(j) for j in sorted(tools.kafka_libs().glob("*.jar")))
    classes = java_classes.compiled(APP, classpath, tools.java_classes_cache)
    groups = {
        name: ShareConsumers(tools, classes, bootstrap, topic, name, tmp_path / f"{name}.log")
        for name in (planned, plain)
    }
    try:
        settled = {}
        for name, app in groups.items():
            settled[name] = wait_for(
                f"share group {name} settled with {CONSUMERS} members",
                lambda name=name: _settled(admin, name),
                60,
                0.5,
                abort=lambda app=app: app.text()[-2000:] if "ERROR" in app.text() else None,
            )
        before = settled[planned]
        assert before.assignor == "kafka-rebalance-plan"  # the cluster-wide share assignor
        assert before.subscribed_topics() == (topic,)
        assert sorted(m.client_id for m in before.members) == [f"{planned}-{i}" for i in range(3)]
        _simple_shaped(before)  # no plan yet: the plug-in delegates to simple
        _simple_shaped(settled[plain])

        # every record consumed and acknowledged: the broker's share lag (version 1) reaches 0.
        # The persisted start offset (SPSO) may still trail: the lag subtracts the records past
        # it already completed, so `log end - SPSO` alone overstates the backlog.
        for name in (planned, plain):
            offsets = wait_for(
                f"{name}'s share lag reaching 0",
                lambda name=name: (
                    (o := share_group.start_offsets(admin, name))
                    and len(o) == PARTITIONS
                    and all(v.lag == 0 for v in o.values())
                    and o
                ),
                60,
                0.5,
            )
            ends = {(topic, p): RECORDS_PER_PARTITION for p in range(PARTITIONS)}
            assert share_group.share_backlog(offsets, ends) == {tp: 0 for tp in ends}
            assert all(0 <= o.start_offset <= RECORDS_PER_PARTITION for o in offsets.values())
            print(name, {p: (o.start_offset, o.lag) for (_, p), o in offsets.items()})

        # a plan the simple assignor would never give: every member on the hot partition 0
        members = before.member_ids()
        request = ShareRequest(
            partitions={
                (topic, p): PartitionLoad(100.0 if p == 0 else 10.0, 30000 if p == 0 else 0)
                for p in range(PARTITIONS)
            },
            members={m: ShareMemberInput(m, frozenset({topic})) for m in members},
            current={
                m.member_id: frozenset((t, p) for t, ps in m.assignment.items() for p in ps)
                for m in before.members
            },
            drain_seconds=60,
        )
        plan = plan_share(request)
        assignment = {
            m: {t: list(p) for t, p in topics.items()} for m, topics in plan.assignment.items()
        }
        assert plan.members_per_partition[(topic, 0)] >= 2, assignment
        key = plan_record.load_keys(plan_keys)[0]
        value = plan_record.encode_plan(
            planned,
            1,
            "share-check",
            datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            assignment,
            incarnation=f"uid-{suffix}",
            member_ids=members,
            kind="share",
        )
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        headers = [(plan_record.SIGNATURE_HEADER, plan_record.sign(key, planned, value))]
        producer.send(PLAN_TOPIC, key=planned.encode(), value=value, headers=headers).get(10)
        producer.close()
        log = share_broker.cluster.nodes[0].log
        wait_for(
            "the plug-in caching the share plan",
            lambda: f"cached share plan for group '{planned}'" in log.read_text(errors="replace"),
            30,
            0.25,
        )

        epoch = share_group.trigger(admin, planned, before.subscribed_topics())
        assert epoch == before.group_epoch + 1  # the join: one bump
        after = wait_for(
            "the planned group running its plan",
            lambda: (
                (g := share_group.describe(admin, planned)) is not None
                and g.assignment_epoch == g.group_epoch
                and not g.members_off_plan(assignment)
                and g
            ),
            60,
            0.5,
        )
        assert after.group_epoch == before.group_epoch + 2  # join and leave: two bumps
        assert [m.member_id for m in after.members] == members  # the trigger member is gone
        assert len(after.holders()[(topic, 0)]) >= 2
        assert f"following share plan for group '{planned}'" in log.read_text(errors="replace")
        # the group without a plan is untouched and still simple's
        _simple_shaped(share_group.describe(admin, plain) or pytest.fail("plain group gone"))
    finally:
        outputs = {name: app.stop() for name, app in groups.items()}
    for name, text in outputs.items():
        assert "ERROR" not in text and "DONE" in text, text[-3000:]
        acked = sum(int(line.split()[3]) for line in text.splitlines() if line.startswith("ACKED"))
        assert acked >= PARTITIONS * RECORDS_PER_PARTITION, (name, acked)
    print(f"share plan check: {time.monotonic() - started:.1f} s")


def _distinct(text: str) -> dict[int, int]:
    """Partition -> offsets whose acknowledgement the broker confirmed (DISTINCT lines)."""
    return {
        int(line.split()[1]): int(line.split()[2])
        for line in text.splitlines()
        if line.startswith("DISTINCT ")
    }


def _group_lag(admin: RetryingAdmin, group: str) -> int:
    offsets = share_group.start_offsets(admin, group)
    assert all(o.lag is not None for o in offsets.values()), offsets
    return sum(o.lag or 0 for o in offsets.values())


def _share_policy(bootstrap: str, group: str, plan_keys: Path | None) -> Policy:
    """A share policy for `group`, polled through reconcile.poll with the real Kafka client
    and in-memory Kubernetes ports."""
    ports = Ports(
        configmaps=MemoryConfigMaps(),
        status=MemoryStatus(),
        secrets=MemorySecrets(),
        kafka=SharedObservers(KafkaObserver),
        clock=SystemClock(),
        metrics=RecordingMetrics(),
        telemetry=ListTelemetry(),
    )
    settings = OperatorSettings(
        kafka_timeout_s=5,
        plan_client={"bootstrap_servers": bootstrap},
        plan_keys=tuple(plan_record.load_keys(plan_keys)) if plan_keys else (),
        min_poll_interval_s=1,
    )
    spec = {
        "groupId": group,
        "groupType": "share",
        "kafka": {"bootstrapServers": bootstrap},
        "members": {"selector": {"matchLabels": {"app": group}}},
        "apply": {"mode": "broker"},
        "load": {"targetDrainSeconds": 30},
        # pollInterval 5s: each Kafka call may take 5 s (a new share group's first offsets
        # read can)
        "rebalance": {"mode": "enforce", "pollInterval": "5s", "cooldown": "2m"},
    }
    return Policy(spec, [], ports, settings)


def _apply_share_policy(harness: GroupHarness) -> None:
    """The group's share policy through the API server: `spec.groupType: share` (its members'
    subscriptions name the topics), enforce, apply.mode broker, drained within 30 s."""
    body = policy_body(
        harness.policy,
        group=harness.group,
        bootstrap=harness.endpoints.bootstrap_servers,
        topic=harness.topic,
        app=harness.app,
        strategy="lag-aware",
        mode="enforce",
        apply={"mode": "broker"},
        load={"targetDrainSeconds": 30},
        # pollInterval 5s: each Kafka call may take 5 s (a new share group's first offsets
        # read can)
        rebalance={"pollInterval": "5s", "cooldown": "2m"},
    )
    body["spec"]["groupType"] = "share"
    del body["spec"]["topics"]
    harness.cluster.apply_policy(body)


def _running_its_plan(harness: GroupHarness) -> dict[str, Any] | None:
    """The policy's status once it published a plan that moved something (not only the record
    of the assignment the group had: the operator records that too) and the group runs it."""
    status = harness.cluster.policy_status(harness.policy)
    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
    share = status.get("share") or {}
    if status.get("appliedPlan") and share.get("triggers") and ready and ready["status"] == "True":
        return status
    return None


HOT_RATE, COLD_RATE = 250.0, 25.0  # records/s: partition 0 ten times the others
WORK_MS = "5,5,20"  # two consumers of ~200 records/s and a slow one of ~50
WINDOW_S = 30.0


def test_a_hot_partition_gets_more_consumers_and_half_the_backlog_of_simple(
    tools: Toolchain,
    share_broker: Any,
    k8s: Any,
    admin: RetryingAdmin,
    plan_keys: Path,
    tmp_path: Path,
) -> None:
    """End to end, side by side on one broker and one topic: a group whose share policy is
    applied through the API server and run by the operator process, against a group on
    `simple`. Then the operator stops, the planned group loses a member and keeps consuming on
    its assignment, and every record produced is acknowledged (at least once) by the planned
    group."""
    started = time.monotonic()
    bootstrap = share_broker.bootstrap_servers
    classpath = ":".join(str(j) for j in sorted(tools.kafka_libs().glob("*.jar")))
    classes = java_classes.compiled(APP, classpath, tools.java_classes_cache)
    groups: dict[str, ShareConsumers] = {}

    def evidence() -> str:
        return "\n".join(f"--- {n} ---\n{app.text()[-1500:]}" for n, app in groups.items())

    endpoints = Endpoints(bootstrap, k8s.kubeconfig, k8s.tools.kubectl)
    with group_harness(
        endpoints,
        tmp_path,
        evidence=(evidence,),
        prefix="sharehot",
        partitions=PARTITIONS,
        replicas=CONSUMERS,
        apply_mode="broker",
    ) as harness:
        harness.operator.extra = plan_flags(tmp_path, bootstrap, plan_keys)
        topic, planned, plain = harness.topic, harness.group, f"{harness.group}-simple"
        for name in (planned, plain):
            groups[name] = ShareConsumers(
                tools, classes, bootstrap, topic, name, tmp_path / f"{name}.log", WORK_MS
            )
        producer = PacedProducer(
            bootstrap, topic, {p: HOT_RATE if p == 0 else COLD_RATE for p in range(PARTITIONS)}
        ).start()
        producing = True
        try:
            for name, app in groups.items():
                wait_for(
                    f"share group {name} settled",
                    lambda name=name: _settled(admin, name),
                    60,
                    0.5,
                    abort=lambda app=app: app.text()[-2000:] if "ERROR" in app.text() else None,
                )
            before = share_group.describe(admin, planned)
            assert before is not None
            _simple_shaped(before)
            # the operator process (kopf, groups/share.py) observes rates and backlog, plans,
            # publishes the signed share record and triggers
            harness.operator.start()
            _apply_share_policy(harness)
            status = wait_for(
                "the share policy's plan run by the group",
                lambda: _running_its_plan(harness),
                90,
                1.0,
                abort=lambda: "the operator exited" if not harness.operator.running else None,
            )
            print("operator status.share:", status.get("share"))
            # the window: both groups consume the same records side by side
            time.sleep(WINDOW_S)
            lag_planned, lag_plain = _group_lag(admin, planned), _group_lag(admin, plain)
            hot = share_group.describe(admin, planned)
            assert hot is not None
            print(
                f"after {WINDOW_S:.0f} s: backlog planned {lag_planned}, simple {lag_plain} "
                f"(ratio {lag_planned / max(1, lag_plain):.3f}); hot partition members: planned "
                f"{len(hot.holders()[(topic, 0)])}, simple 1"
            )
            assert len(hot.holders()[(topic, 0)]) >= 2
            assert lag_planned <= 0.5 * lag_plain, (lag_planned, lag_plain)
            # what a user reads: the share line and the consumers per partition
            shown = kubectl_cgp(k8s, harness.namespace, "status", harness.policy)
            assert shown.returncode == 0, shown.stderr
            print(shown.stdout)
            assert "share group: assignor kafka-rebalance-plan" in shown.stdout, shown.stdout
            lines = shown.stdout.splitlines()
            header = next(i for i, line in enumerate(lines) if line.startswith("TOPIC"))
            row = lines[header + 1].split()
            assert row[0] == topic and int(row[1].split(",")[0]) >= 2, row  # the hot partition

            # the operator stops; a member of the planned group leaves: its partitions are
            # covered, nothing is lost
            harness.operator.stop()
            groups[planned].stop_member(2)
            wait_for(
                "the planned group covering every partition with two members",
                lambda: (
                    (g := share_group.describe(admin, planned)) is not None
                    and len(g.members) == CONSUMERS - 1
                    and g.assignment_epoch == g.group_epoch
                    and len(g.holders()) == PARTITIONS
                    and all(m.member_epoch == g.group_epoch for m in g.members)
                ),
                30,
                0.5,
            )
            producer.stop()
            producing = False
            sent = dict(producer.sent)
            wait_for(f"{planned} drained", lambda: _group_lag(admin, planned) == 0, 45, 0.5)
        finally:
            if producing:
                producer.stop()
            outputs = {name: app.stop() for name, app in groups.items()}
    text = outputs[planned]
    assert "ERROR" not in text and "DONE" in text, text[-3000:]
    distinct = _distinct(text)
    assert distinct == sent, (distinct, sent)  # every record acknowledged, none beyond the limit
    print(f"hot partition check: {time.monotonic() - started:.1f} s; sent {sent}")


def test_without_the_plug_in_a_share_group_names_the_simple_assignor(
    tools: Toolchain, kafka: str, tmp_path: Path
) -> None:
    """The session's broker without the plug-in: a live share group reports Kafka's `simple`
    assignor, and `plugin_missing` names it (what the policy's Stalled reason will say)."""
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"share-plain-{suffix}", f"share-plain-{suffix}"
    ensure_topic(kafka, topic, PARTITIONS)
    classpath = ":".join(str(j) for j in sorted(tools.kafka_libs().glob("*.jar")))
    classes = java_classes.compiled(APP, classpath, tools.java_classes_cache)
    app = ShareConsumers(tools, classes, kafka, topic, group, tmp_path / "plain.log")
    admin = RetryingAdmin(bootstrap_servers=kafka)
    try:
        described = wait_for(
            f"share group {group} settled",
            lambda: _settled(admin, group),
            60,
            0.5,
            abort=lambda: app.text()[-2000:] if "ERROR" in app.text() else None,
        )
        assert described.assignor == "simple"
        reason = share_group.plugin_missing(described)
        assert reason is not None and "'simple'" in reason, reason
        _simple_shaped(described)
        # the operator's poll of a share policy for it: Stalled, naming the assignor in use
        policy = _share_policy(kafka, group, None)
        try:
            policy.poll()
        finally:
            policy.memory.close()
        stalled = policy.condition("Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "AssignorNotPlanFollowing")
        assert "'simple'" in stalled["message"], stalled
    finally:
        admin.close()
        text = app.stop()
    assert "ERROR" not in text, text[-3000:]
