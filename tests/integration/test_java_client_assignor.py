"""Java consumers follow the operator's plans with the client-side assignor (client-assignor/,
docs/java-assignor.md): no sidecar, one `partition.assignment.strategy` line and the pod's
mounted document. Marked `java_assignor`.

Everything is real: the broker, the API server with KWOK pods, the operator process, Java
consumers (three plain `KafkaConsumer`s and one Spring Kafka `@KafkaListener` app, each with its
pod's name as `group.instance.id`) in one JVM (a JVM start is slow on a small machine; each
member still has its own consumer, assignor and document), and after the scale-up one Python
sidecar in the same group. KWOK runs no kubelet, so a stand-in
copies each pod's ConfigMap into `<documents>/<pod>/assignment.json` the way the kubelet
projects a mounted ConfigMap (a new file swapped in atomically). Nothing but the Java members'
own assignors makes the group follow the first plan change: no sidecar is in the group yet to
ask for a rebalance.
Every member writes the project's ledger before committing: 0 lost, 0 concurrent owners.

A second test has one member lie (issue 34): its subscription claims every partition at
`Long.MAX_VALUE`; the honest leader gives it its planned share and nothing more.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.devenv import java_classes
from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.toolchain import Toolchain, is_provisioned

from tests.integration.harnesses import group_harness, ledger_verdict

pytestmark = [pytest.mark.integration, pytest.mark.java_assignor]

APP = Path(__file__).parent / "java" / "PlanFollowingMembers.java"
PARTITIONS, RATE = 6, 6.0
LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{HH:mm:ss.SSS} %-5level [%t] %c{1} %msg%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.plan.name = dev.kafkarebalance
logger.plan.level = info
"""


def _classpath(tools: Toolchain) -> str:
    for directory in (tools.client_assignor_dir, tools.spring_kafka_dir):
        if not is_provisioned(directory):
            pytest.fail(
                f"not provisioned: {directory.parent.name} {directory.name}; run "
                "`scripts/bootstrap` (or `kafka-rebalance dev provision --only client-assignor "
                "--only spring-kafka`)",
                pytrace=False,
            )
    libs = tools.kafka_libs()
    kafka = [
        *libs.glob("kafka-clients-*.jar"),
        *libs.glob("slf4j-api-*.jar"),
        *libs.glob("log4j-*.jar"),
    ]
    assignor = [tools.client_assignor_jar, *sorted(tools.client_assignor_dir.glob("lib/*.jar"))]
    spring = sorted(tools.spring_kafka_dir.glob("lib/*.jar"))
    return ":".join(str(j) for j in [*kafka, *assignor, *spring])


class DocumentMounts:
    """The kubelet's part: each of the policy's ConfigMaps into `<root>/<pod>/assignment.json`,
    written to a temp file and renamed (a reader never sees half a document)."""

    def __init__(self, harness: GroupHarness, root: Path) -> None:
        self.harness, self.root = harness, root
        self.written: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="document-mounts", daemon=True)

    def __enter__(self) -> DocumentMounts:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        cluster = self.harness.cluster
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):
                items = cluster.core.list_namespaced_config_map(cluster.namespace).items
                for item in items:
                    text = (item.data or {}).get("assignment.json")
                    if not text:
                        continue
                    member = str(json.loads(text).get("member"))
                    if self.written.get(member) != text:
                        target = self.root / member / "assignment.json"
                        target.parent.mkdir(parents=True, exist_ok=True)
                        temp = target.with_name(".assignment.json.tmp")
                        temp.write_text(text)
                        os.replace(temp, target)
                        self.written[member] = text


class JavaMembers:
    """One JVM hosting every Java member, started by commands on its stdin."""

    def __init__(self, tools: Toolchain, harness: GroupHarness, workdir: Path) -> None:
        self.classpath, self.tools = _classpath(tools), tools
        self.workdir, self.harness = workdir, harness
        self.documents = workdir / "documents"
        self.log = workdir / "java-members.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> JavaMembers:
        classes = java_classes.compiled(APP, self.classpath, self.tools.java_classes_cache)
        config = self.workdir / "log4j2.properties"
        config.write_text(LOG4J2)
        self.harness.ledger_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [
                    java_binary(),
                    "-Xmx256m",
                    "-XX:TieredStopAtLevel=1",
                    f"-Dlog4j2.configurationFile={config}",
                    "-cp",
                    f"{classes}:{self.classpath}",
                    "PlanFollowingMembers",
                    self.harness.endpoints.bootstrap_servers,
                    self.harness.group,
                    self.harness.topic,
                    str(self.documents),
                    str(self.harness.ledger_dir),
                ],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def start(self, member: str, kind: str, *args: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(" ".join(["start", member, kind, *args, "\n"]).encode())
        self.process.stdin.flush()

    def crashed(self) -> str | None:
        if self.process is not None and self.process.poll() is not None:
            return f"the Java members exited ({self.process.returncode}):\n{self.tail()}"
        return None

    def tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def __exit__(self, *exc: object) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(BrokenPipeError, OSError):
            assert process.stdin is not None
            process.stdin.write(b"quit\n")
            process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@contextlib.contextmanager
def _java_group(
    kafka: str, k8s: Any, tools: Toolchain, workdir: Path
) -> Iterator[tuple[GroupHarness, JavaMembers]]:
    endpoints = Endpoints(kafka, k8s.kubeconfig, k8s.tools.kubectl)
    java: JavaMembers | None = None

    def members_log() -> str:
        return f"--- java members ---\n{java.tail() if java else ''}"

    with group_harness(
        endpoints,
        workdir,
        evidence=(members_log,),
        prefix="javaassign",
        partitions=PARTITIONS,
        replicas=3,
    ) as harness:
        java = JavaMembers(tools, harness, workdir)
        with DocumentMounts(harness, java.documents), java:
            yield harness, java


def _converged(
    harness: GroupHarness, java: JavaMembers, min_epoch: int, members: list[str]
) -> tuple[int, float]:
    """Wait until the group consumes by a plan of epoch >= `min_epoch` over `members`; return
    the epoch and how long that took."""
    started = time.monotonic()
    assert java.crashed() is None, java.crashed()
    epoch = harness.wait_converged(min_epoch, members, timeout=120)
    return epoch, time.monotonic() - started


def test_java_consumers_and_a_spring_listener_follow_plans_through_a_change_and_a_scale_up(
    kafka: str, k8s: Any, tools: Toolchain, tmp_path: Path
) -> None:
    with _java_group(kafka, k8s, tools, tmp_path) as (harness, java):
        members = harness.pods(3)
        harness.operator.start()
        # partitions 0 and 1 carry most of the load: lag-aware gives them a member each
        harness.produce({0: 4 * RATE, 1: 4 * RATE, **{p: RATE for p in range(2, PARTITIONS)}})
        harness.apply_policy("lag-aware", "enforce", load={"model": "rate"})
        java.start(members[0], "plain")
        java.start(members[1], "plain")
        java.start(members[2], "spring")
        first, took = _converged(harness, java, 1, members)
        _, planned = harness.planned_owners()
        assert planned[0] != planned[1], planned
        print(f"\nlag-aware epoch {first} followed after {took:.1f} s: {planned}")

        # a plan change: only the Java members' own assignors can make the group take it
        harness.cluster.patch_policy(harness.policy, {"spec": {"strategy": "range"}})
        ranged, took = _converged(harness, java, first + 1, members)
        _, planned = harness.planned_owners()
        assert planned == dict(enumerate([m for m in members for _ in range(2)]))
        print(f"range epoch {ranged} followed after {took:.1f} s")

        # a scale-up to five pods: a fourth Java consumer, and a Python sidecar (group mode) in
        # the same group, which speaks the same user_data
        harness.scale(5)
        pods = harness.pods(5)
        java.start(pods[3], "plain")
        harness.start_sidecars([pods[4]])
        grown, took = _converged(harness, java, ranged + 1, pods)
        _, planned = harness.planned_owners()
        assert {pods[3], pods[4]} <= set(planned.values()), planned
        print(f"scale-up epoch {grown} followed after {took:.1f} s: {planned}")

        # and back to lag-aware over five members
        harness.cluster.patch_policy(harness.policy, {"spec": {"strategy": "lag-aware"}})
        final, took = _converged(harness, java, grown + 1, pods)
        print(f"lag-aware epoch {final} over five followed after {took:.1f} s")

        log = java.log.read_text(errors="replace")
        nudges = len(re.findall(r"asking the group to rebalance", log))
        print(f"rebalances the Java members asked for: {nudges}")
        assert "composed assignment" in log  # a Java member led the group
        # The sidecar labels its records with the plan epoch, the Java members with the group
        # generation: only conflicts among members labelling alike mean anything.
        report = ledger_verdict(harness, same_epoch=False)
        java_conflicts = [c for c in report.conflicts if pods[4] not in c.members]
        assert java_conflicts == [], java_conflicts
        if report.conflicts:
            print(f"label collisions with the sidecar (no double assignment): {report.conflicts}")
        assert report.per_member.get(pods[4]), report.per_member


HUGE_EPOCH = 2**63 - 1  # Long.MAX_VALUE


def test_a_java_client_claiming_a_huge_epoch_gets_no_partition_beyond_the_plan(
    kafka: str, k8s: Any, tools: Toolchain, tmp_path: Path
) -> None:
    """Issue 34: a member whose subscription claims every partition at `Long.MAX_VALUE` (a
    rogue, or a broken client) joins a group led by an honest Java member. The leader trusts
    claims only up to its own document's epoch, so the rogue consumes its planned share and
    never one partition more, at every sample from its join to the end."""
    with _java_group(kafka, k8s, tools, tmp_path) as (harness, java):
        members = harness.pods(3)
        harness.operator.start()
        harness.produce({p: RATE for p in range(PARTITIONS)})
        harness.apply_policy("range", "enforce")
        for member in members:  # the honest members join first: one of them leads
            java.start(member, "plain")
        first, took = _converged(harness, java, 1, members)
        print(f"\nrange epoch {first} over three followed after {took:.1f} s")

        harness.scale(4)
        pods = harness.pods(4)
        rogue = pods[3]
        joined = len(harness.samples)
        java.start(rogue, "rogue", str(PARTITIONS))
        grown, took = _converged(harness, java, first + 1, pods)
        _, planned = harness.planned_owners()
        share = {p for p, m in planned.items() if m == rogue}
        assert share, planned  # range over four gives the rogue's pod a partition
        harness.watch(8)
        print(f"epoch {grown} over four, with the rogue, followed after {took:.1f} s: {planned}")

        beyond = [
            (round(s.t, 1), sorted(p for p, m in s.owners.items() if m == rogue and p not in share))
            for s in harness.samples[joined:]
        ]
        beyond = [b for b in beyond if b[1]]
        assert beyond == [], f"the rogue owned partitions beyond its plan {sorted(share)}: {beyond}"
        assert harness.samples[-1].owners == planned, harness.samples[-1].owners
        log = java.log.read_text(errors="replace")
        ignored = len(re.findall(rf"ignored the claim of epoch {HUGE_EPOCH} from member", log))
        assert ignored > 0, java.tail()
        report = ledger_verdict(harness)
        print(
            f"samples since the rogue joined: {len(harness.samples) - joined}, rogue partitions "
            f"beyond the plan: 0, huge claims ignored by the leader: {ignored}, records per "
            f"member: {dict(sorted(report.per_member.items()))}"
        )
        assert report.per_member.get(rogue), report.per_member


def test_a_java_client_following_an_old_incarnation_gets_no_partition_beyond_the_new_plan(
    kafka: str, k8s: Any, tools: Toolchain, tmp_path: Path
) -> None:
    """Issue 34: the policy was deleted and created again, and one member still follows the old
    incarnation's document: its claim is at the new plan's epoch (an old incarnation's epochs
    can be anything) and it is first in the leader's tie order (the lowest pod name), so only
    the incarnation tells it apart. The honest leader ignores the claim; the member consumes at
    most its share of the new plan, at every sample from its join on. Then its document becomes
    the new incarnation's, at the same epoch: it asks for a rebalance by itself and the group
    keeps the new plan."""
    with _java_group(kafka, k8s, tools, tmp_path) as (harness, java):
        members = harness.pods(3)
        stale = members[0]
        harness.operator.start()
        harness.produce({p: RATE for p in range(PARTITIONS)})
        harness.apply_policy("range", "enforce")
        for member in members[1:]:  # the honest members join first: one of them leads
            java.start(member, "plain")
        epoch, planned = harness.wait_plan(1, members, timeout=120)
        current = harness.assignments()[stale]
        uid = current.get("policyUid")
        assert uid, current  # the operator names the incarnation it writes for
        old_uid = str(uuid.uuid4())
        pinned = tmp_path / "pinned" / stale / "assignment.json"
        pinned.parent.mkdir(parents=True)
        old = {
            **current,
            "policyUid": old_uid,
            "partitions": {harness.topic: list(range(PARTITIONS))},
            "revoking": {},
        }
        pinned.write_text(json.dumps(old))
        # the leader composes from its own document and both honest claims before the stale
        # member joins (without a document a leader trusts no claim, and the fallback would hand
        # out every partition, the stale member's share or not)
        wait_for_log(
            java,
            rf"composed assignment for 2 members from epoch {epoch} \(claim epochs \[{epoch}\], "
            r"members without a claim 0,",
            timeout=60,
        )
        harness.wait_assigned(members[1:])
        joined = len(harness.samples)
        java.start(stale, "pinned", str(pinned))
        share = {p for p, m in planned.items() if m == stale}
        assert share, planned
        converged: int | None = None
        with contextlib.suppress(TimeoutError):  # judged below, after what the samples show
            converged, took = _converged(harness, java, epoch, members)
            harness.watch(8)
            print(f"\nrange epoch {converged} followed with the stale member after {took:.1f} s")

        beyond = [
            (round(s.t, 1), sorted(p for p, m in s.owners.items() if m == stale and p not in share))
            for s in harness.samples[joined:]
        ]
        beyond = [b for b in beyond if b[1]]
        assert beyond == [], f"{stale} owned partitions beyond its plan {sorted(share)}: {beyond}"
        assert converged is not None, "the group never converged on the new plan"
        log = java.log.read_text(errors="replace")
        ignored = len(re.findall(rf"policy incarnation {old_uid}, not {uid} of the plan", log))
        assert ignored > 0, java.tail()

        # the member's document is now the new incarnation's, at the same epoch
        temp = pinned.with_name(".assignment.json.tmp")
        temp.write_text(json.dumps(current))
        os.replace(temp, pinned)
        asked = wait_for_log(
            java, re.escape(f"asking the group to rebalance: new policy incarnation {uid}")
        )
        harness.watch(4)
        _converged(harness, java, epoch, members)
        report = ledger_verdict(harness)
        print(
            f"samples since the stale member joined: {len(harness.samples) - joined}, its "
            f"partitions beyond the plan: 0, old-incarnation claims ignored by the leader: "
            f"{ignored}, rebalance asked for the new incarnation after {asked:.1f} s, records "
            f"per member: {dict(sorted(report.per_member.items()))}"
        )
        assert report.per_member.get(stale), report.per_member


def wait_for_log(java: JavaMembers, pattern: str, timeout: float = 30) -> float:
    """Seconds until a line matching `pattern` shows in the Java members' log."""
    started = time.monotonic()
    while not re.search(pattern, java.log.read_text(errors="replace")):
        assert java.crashed() is None, java.crashed()
        assert time.monotonic() - started < timeout, f"no {pattern!r} in:\n{java.tail()}"
        time.sleep(0.2)
    return time.monotonic() - started
