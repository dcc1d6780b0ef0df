"""apply.mode broker: a KIP-848 group of Java consumers follows the operator's plans through the
brokers' `kafka-rebalance-plan` assignor (broker-plugin/, docs/kip848.md). Marked `kip848`.

Everything is real: a 4.4 broker with the plug-in jar on its classpath, requiring signed plan
records (the `kafka_plans` and `plan_keys` fixtures), the API server with KWOK pods, the operator
process (given the same key), and one Java consumer
(`group.protocol=consumer`, `group.instance.id` = pod name) per pod writing the project's ledger.
The group's actual assignment is read with ConsumerGroupDescribe (`kip848.describe`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_common.wire import plan_record
from kafka_rebalance_dev.demo.cluster import GROUP, PLURAL, VERSION, wait_for
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.demo.ledger import ledger_path
from kafka_rebalance_dev.devenv import java_classes
from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.processes import dies_with_parent
from kafka_rebalance_dev.devenv.toolchain import Toolchain
from kafka_rebalance_operator.kafka import kip848

from tests.integration.harnesses import group_harness, ledger_verdict, plan_flags

pytestmark = [pytest.mark.integration, pytest.mark.kip848]

CONSUMER = Path(__file__).parent / "java" / "Kip848LedgerConsumer.java"
PARTITIONS, RATE = 6, 6.0
PLAN_TOPIC = "kafka-rebalance-plans"


class JavaMembers:
    """One Java KIP-848 consumer process per member, each in its own process group."""

    def __init__(self, tools: Toolchain, bootstrap: str, group: str, topic: str, workdir: Path):
        libs = tools.kafka_libs()
        classpath = ":".join(
            str(j) for j in [*libs.glob("kafka-clients-*.jar"), *libs.glob("slf4j-api-*.jar")]
        )
        # compiled once (cached across runs), not by every member's JVM as a source launch would
        classes = java_classes.compiled(CONSUMER, classpath, tools.java_classes_cache)
        self.classpath = f"{classes}:{classpath}"
        self.bootstrap, self.group, self.topic, self.workdir = bootstrap, group, topic, workdir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def log(self, member: str) -> Path:
        return self.workdir / f"java-{member}.log"

    def start(self, member: str, ledger_dir: Path) -> None:
        ledger_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log(member), "ab") as out:
            self.processes[member] = subprocess.Popen(
                [
                    java_binary(),
                    "-Xmx96m",
                    "-XX:TieredStopAtLevel=1",
                    "-cp",
                    self.classpath,
                    CONSUMER.stem,
                    self.bootstrap,
                    self.group,
                    self.topic,
                    member,
                    str(ledger_path(ledger_dir, member)),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=dies_with_parent,  # not orphaned by an interrupted run
            )

    def stop(self, member: str) -> None:
        process = self.processes.pop(member)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def crashed(self) -> str | None:
        dead = [m for m, p in self.processes.items() if p.poll() is not None]
        if not dead:
            return None
        return "; ".join(f"{m}: {self.log(m).read_text()[-1500:]}" for m in dead)

    def stop_all(self) -> None:
        for member in list(self.processes):
            self.stop(member)


@contextlib.contextmanager
def _broker_group(
    kafka_bootstrap: str,
    k8s: Any,
    tools: Toolchain,
    workdir: Path,
    prefix: str,
    replicas: int,
    plan_keys: Path | None = None,
) -> Iterator[tuple[GroupHarness, JavaMembers, RetryingAdmin]]:
    endpoints = Endpoints(kafka_bootstrap, k8s.kubeconfig, k8s.tools.kubectl)
    admin = RetryingAdmin(bootstrap_servers=kafka_bootstrap)
    java: JavaMembers | None = None

    def consumers() -> str:
        assert java is not None
        return "\n".join(f"--- {m} ---\n{java.log(m).read_text()[-1500:]}" for m in java.processes)

    try:
        with group_harness(
            endpoints,
            workdir,
            evidence=(lambda: f"group: {kip848.describe(admin, harness.group)}", consumers),
            prefix=prefix,
            partitions=PARTITIONS,
            replicas=replicas,
            apply_mode="broker",
        ) as harness:
            harness.operator.extra = plan_flags(workdir, kafka_bootstrap, plan_keys)
            java = JavaMembers(tools, kafka_bootstrap, harness.group, harness.topic, workdir)
            try:
                yield harness, java, admin
            finally:
                java.stop_all()
    finally:
        admin.close()


def _plan(harness: GroupHarness) -> tuple[int, dict[str, dict[str, list[int]]]]:
    """The applied epoch and plan (instance id -> topic -> partitions) from the ConfigMaps."""
    documents = harness.assignments()
    epochs = {int(d["epoch"]) for d in documents.values()}
    epoch = epochs.pop() if len(epochs) == 1 else -1
    return epoch, {m: d["partitions"] for m, d in documents.items()}


def _converged(
    harness: GroupHarness,
    admin: RetryingAdmin,
    java: JavaMembers,
    min_epoch: int,
    timeout: float,
) -> tuple[int, dict[str, dict[str, list[int]]], kip848.ConsumerGroup]:
    """Wait until one epoch >= `min_epoch` is applied and every member holds its planned
    partitions as the coordinator describes the group."""

    def check() -> Any:
        epoch, plan = _plan(harness)
        if epoch < min_epoch or not plan:
            return None
        group = kip848.describe(admin, harness.group)
        if group is None or group.members_off_plan(plan) or group.state != "Stable":
            return None
        return epoch, plan, group

    return wait_for(
        f"the group on a plan of epoch >= {min_epoch}", check, timeout, 0.5, java.crashed
    )


def _last_plan_record(bootstrap: str, group: str) -> tuple[bytes, bytes | None]:
    """The latest plan record for `group` in the plan topic: its value and signature header."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [
            TopicPartition(PLAN_TOPIC, p) for p in consumer.partitions_for_topic(PLAN_TOPIC) or []
        ]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        last: tuple[bytes, bytes | None] | None = None
        while any(consumer.position(p) < ends[p] for p in partitions):
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    if record.key == group.encode() and record.value is not None:
                        headers = dict(record.headers or [])
                        last = (record.value, headers.get(plan_record.SIGNATURE_HEADER))
    finally:
        consumer.close()
    assert last is not None, f"no plan record for {group} in {PLAN_TOPIC}"
    return last


def test_a_kip848_group_follows_lag_aware_plans_through_the_broker_plugin(
    kafka_plans: Any, plan_keys: Path, k8s: Any, tools: Toolchain, tmp_path: Path
) -> None:
    with _broker_group(
        kafka_plans.bootstrap_servers, k8s, tools, tmp_path, "broker", 3, plan_keys
    ) as (harness, java, admin):
        members = harness.pods(3)
        harness.operator.start()
        for member in members:
            java.start(member, harness.ledger_dir)
        # partitions 0 and 1 carry most of the load: lag-aware gives them a member each
        harness.produce({0: 4 * RATE, 1: 4 * RATE, **{p: RATE for p in range(2, PARTITIONS)}})
        harness.apply_policy("lag-aware", "enforce", load={"model": "rate"})
        epoch, plan, group = _converged(harness, admin, java, 1, timeout=120)
        assert group.assignor == "kafka-rebalance-plan"
        assert {m.instance_id for m in group.members} == set(members)
        print(f"\nfollowing epoch {epoch}: {plan} (group epoch {group.group_epoch})")

        # the key rotates with no restart (docs/security.md): the new key second in the one
        # key file the broker and the operator share, the broker re-reads it, the new key
        # first; the next plan is signed with it, and the broker follows it
        original = plan_keys.read_text()
        rotated = "kafka-rebalance-test-plan-key-2"
        broker_log = kafka_plans.cluster.nodes[0].log
        try:
            rereads = broker_log.read_text(errors="replace").count("re-read 2 plan keys")
            plan_keys.write_text(f"{original}{rotated}\n")
            wait_for(
                "the broker re-reading the key file",
                lambda: (
                    broker_log.read_text(errors="replace").count("re-read 2 plan keys") > rereads
                ),
                30,
                0.5,
            )
            plan_keys.write_text(f"{rotated}\n{original}")
            # the operator stats the file at most once a second (PlanKeyRing), and a plan
            # published meanwhile (rates warming up) may have read the two-key file just before
            # this write: past that second, the next publish reads this one
            time.sleep(1.5)

            # a new plan takes effect: time from the patch to every member holding it
            before_epoch = group.group_epoch
            patched = time.monotonic()
            harness.cluster.patch_policy(harness.policy, {"spec": {"strategy": "range"}})
            ranged, plan, group = _converged(harness, admin, java, epoch + 1, timeout=90)
            took = time.monotonic() - patched
            value, signature = _last_plan_record(kafka_plans.bootstrap_servers, harness.group)
            assert signature == plan_record.sign(rotated.encode(), harness.group, value)
        finally:
            plan_keys.write_text(original)
        assert plan == {m: {harness.topic: [2 * i, 2 * i + 1]} for i, m in enumerate(members)}
        print(
            f"range plan (epoch {ranged}) followed {took:.1f} s after the patch; group epoch "
            f"{before_epoch} -> {group.group_epoch}"
        )

        # a member leaves: its pod goes, the plan covers the other two
        java.stop(members[2])
        harness.scale(2)
        left, plan, group = _converged(harness, admin, java, ranged + 1, timeout=120)
        assert set(plan) == set(members[:2])

        # the operator is down: the group keeps consuming by the last plan
        harness.operator.stop()
        progress = harness.sample().committed
        harness.watch(6.0)
        after = harness.sample().committed
        assert all(after[p] > progress[p] for p in range(PARTITIONS)), (progress, after)
        harness.operator.start()

        # a malformed plan record signed with the shared key (as an operator bug would write
        # it): the plug-in falls back (the group keeps consuming), and the operator publishes
        # its plan again once it sees the group drift from it
        producer = KafkaProducer(bootstrap_servers=kafka_plans.bootstrap_servers)
        value = b"{not json"
        signature = plan_record.sign(plan_record.load_keys(plan_keys)[0], harness.group, value)
        headers = [(plan_record.SIGNATURE_HEADER, signature)]
        producer.send(PLAN_TOPIC, key=harness.group.encode(), value=value, headers=headers).get(10)
        producer.close()
        kip848.nudge(admin, harness.group)
        harness.watch(5.0)
        _converged(harness, admin, java, left, timeout=120)
        # (the restarted operator's first poll publishes too: it does not know what was published)
        wait_for(
            "the operator publishing its plan",
            lambda: (
                harness.operator.log is not None
                and "published to kafka-rebalance-plans" in harness.operator.log.read_text()
            ),
            60,
            0.5,
        )
        ledger_verdict(harness, same_epoch=False)


def test_without_the_plugin_broker_mode_is_stalled_naming_the_assignor(
    kafka: str, k8s: Any, tools: Toolchain, tmp_path: Path
) -> None:
    with _broker_group(kafka, k8s, tools, tmp_path, "noplugin", replicas=2) as (
        harness,
        java,
        _admin,
    ):
        members = harness.pods(2)
        harness.operator.start()
        for member in members:
            java.start(member, harness.ledger_dir)
        harness.produce(dict.fromkeys(range(PARTITIONS), RATE))
        harness.apply_policy("lag-aware", "enforce", load={"model": "rate"})

        def stalled() -> Any:
            conditions = harness.cluster.policy_status(harness.policy).get("conditions") or []
            found = next((c for c in conditions if c["type"] == "Stalled"), None)
            return found if found and found["status"] == "True" else None

        condition = wait_for("Stalled", stalled, timeout=90, every=0.5, abort=java.crashed)
        assert condition["reason"] == "ProtocolMismatch", condition
        assert "'uniform'" in condition["message"], condition
        assert "group.consumer.assignors" in condition["message"], condition
        print(f"\nwithout the plug-in: {condition['reason']}: {condition['message'][:200]}")
        ledger_verdict(harness, same_epoch=False)


def _policy_uid(harness: GroupHarness) -> str:
    body = harness.cluster.custom.get_namespaced_custom_object(
        GROUP, VERSION, harness.namespace, PLURAL, harness.policy
    )
    return str(body["metadata"]["uid"])


def _publishes(harness: GroupHarness) -> int:
    log = harness.operator.log.read_text() if harness.operator.log else ""
    return log.count("published to kafka-rebalance-plans")


def test_forged_foreign_and_older_plan_records_are_ignored(
    kafka_plans: Any, plan_keys: Path, k8s: Any, tools: Toolchain, tmp_path: Path
) -> None:
    """Only the operator's plans count, and only for their own group: a record signed with a
    wrong key, a correctly signed plan of another group that names this group's instance ids,
    an older epoch of this group's own plan, a newer plan of another policy incarnation and a
    replayed tombstone of an earlier incarnation are each ignored by the plug-in. After each, the
    test nudges the group itself: the coordinator recomputes, and its target is still the
    operator's plan, with no republish by the operator needed. The ledger loses nothing."""
    with _broker_group(
        kafka_plans.bootstrap_servers, k8s, tools, tmp_path, "trust", 3, plan_keys
    ) as (harness, java, admin):
        members = harness.pods(3)
        harness.operator.start()
        for member in members:
            java.start(member, harness.ledger_dir)
        harness.produce({0: 4 * RATE, 1: 4 * RATE, **{p: RATE for p in range(2, PARTITIONS)}})
        # Only the first plan goes (a new policy skips minImprovement once): a better plan made
        # later, as the rate estimates warm up, would change the target this test holds fixed.
        harness.apply_policy(
            "lag-aware", "enforce", load={"model": "rate"}, rebalance={"minImprovement": 0.95}
        )
        epoch, plan, group = _converged(harness, admin, java, 1, timeout=120)
        harness.watch(4.0)  # the operator settles (its first record may predate the members)
        epoch, plan, group = _converged(harness, admin, java, epoch, timeout=60)
        publishes = _publishes(harness)
        uid = _policy_uid(harness)
        key = plan_record.load_keys(plan_keys)[0]
        member_ids = [m.member_id for m in group.members]
        everything = {members[0]: {harness.topic: list(range(PARTITIONS))}}
        other_group = f"other-{harness.group}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        hostile = [
            (
                "signed with a wrong key",
                harness.group,
                plan_record.encode_plan(
                    harness.group,
                    epoch + 10,
                    "forged",
                    stamp,
                    everything,
                    incarnation=uid,
                    member_ids=member_ids,
                ),
                b"not-the-shared-key-at-all",
                f"ignored an unauthenticated plan record for group '{harness.group}'",
            ),
            (
                "another group's plan naming this group's instance ids",
                other_group,
                plan_record.encode_plan(
                    other_group,
                    99,
                    "foreign",
                    stamp,
                    everything,
                    incarnation="another-policy",
                    member_ids=["another-groups-member"],
                ),
                key,
                f"cached plan for group '{other_group}' epoch 99",
            ),
            (
                "an older epoch of this group's plan",
                harness.group,
                plan_record.encode_plan(
                    harness.group,
                    epoch - 1,
                    "older",
                    stamp,
                    everything,
                    incarnation=uid,
                    member_ids=member_ids,
                ),
                key,
                f"ignored plan for group '{harness.group}' epoch {epoch - 1}",
            ),
            (
                "another incarnation's newer plan (a second policy for the group)",
                harness.group,
                plan_record.encode_plan(
                    harness.group,
                    epoch + 50,
                    "usurper",
                    stamp,
                    everything,
                    incarnation="another-incarnation",
                    member_ids=member_ids,
                ),
                key,
                f"is bound to policy incarnation '{uid}'",
            ),
            (
                "a replayed tombstone of an earlier incarnation",
                harness.group,
                None,
                key,
                "the plan held stays: the group is bound to another incarnation",
            ),
        ]
        producer = KafkaProducer(bootstrap_servers=kafka_plans.bootstrap_servers)
        broker_log = kafka_plans.cluster.nodes[0].log
        try:
            for label, record_key, value, secret, logged in hostile:
                if value is None:  # a tombstone retires one named incarnation, signed with it
                    tombstone = plan_record.sign_tombstone(secret, record_key, "an-earlier-uid", 3)
                    headers = [
                        (plan_record.SIGNATURE_HEADER, tombstone),
                        *plan_record.tombstone_headers("an-earlier-uid", 3),
                    ]
                else:
                    headers = [
                        (plan_record.SIGNATURE_HEADER, plan_record.sign(secret, record_key, value))
                    ]
                producer.send(
                    PLAN_TOPIC, key=record_key.encode(), value=value, headers=headers
                ).get(10)
                wait_for(
                    f"the broker log on the record {label}",
                    lambda logged=logged: logged in broker_log.read_text(),
                    30,
                    0.5,
                )
                before = kip848.describe(admin, harness.group)
                assert before is not None
                kip848.nudge(admin, harness.group)

                def recomputed(before: kip848.ConsumerGroup = before) -> Any:
                    now = kip848.describe(admin, harness.group)
                    return (
                        now
                        if now is not None and now.assignment_epoch > before.assignment_epoch
                        else None
                    )

                after = wait_for(
                    f"a recompute after the record {label}", recomputed, 30, 0.2, java.crashed
                )
                targets = {m.instance_id: m.target for m in after.members if m.instance_id}
                assert targets == {
                    m: {t: sorted(p) for t, p in d.items() if p} for m, d in plan.items()
                }, (
                    label,
                    targets,
                )
                print(
                    f"\n{label}: ignored; target after the recompute is still epoch {epoch}'s plan"
                )
        finally:
            producer.close()
        _converged(harness, admin, java, epoch, timeout=60)
        assert _publishes(harness) == publishes, "the operator did not have to repair anything"
        _, final = _plan(harness)
        assert final == plan
        ledger_verdict(harness, same_epoch=False)
