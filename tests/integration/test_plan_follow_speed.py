"""How fast a published plan is followed, on a real 4.4 broker with the plug-in (`kafka_plans`,
signed plans required): a KIP-848 consumer group (three Java consumers) and a Kafka Streams
group (two Kafka Streams 4.4 instances). Each plan is the mirror of the one before, so every
plan moves partitions or tasks between members: two plans at two phases of the members'
default 5 s heartbeat (`RESTS_S`), then, after the group set its own heartbeat interval to 1 s
(`group_heartbeat.set_heartbeat_interval`; the plug-in brokers allow down to 1 s), five plans
at five phases of that (`FAST_RESTS_S`).

Each round does what the operator does, with the operator's own code: `KafkaObserver`
publishes the signed record (`publish_plan`, as the operator calls it for the kind) and
triggers the group (`nudge` for KIP-848, `trigger_streams_group` for streams); then, every
`POLL_S`, the operator's own rule decides whether the last trigger missed and another is due
(`verify.target_differs` and `verify.recompute_pending` for KIP-848, as phases/publish.py;
`groups.plan_topic.recompute_missed` with `groups.streams.TRIGGER_PENDING_S` for streams). The
group is described every 50 ms.

Printed per plan: seconds from the start of the publish call to the coordinator's target being
the plan, to every member holding its planned partitions or tasks, and to the group being
Stable at its assignment epoch; the publish call alone; how long after the acknowledged write
the broker's plan reader logged the record; the triggers sent (with the group epoch at each)
and the group-epoch bumps. Asserted: every plan is followed (within a generous bound) and costs
at most 2 triggers; at the 1 s heartbeat every plan is followed within `GOAL_S` (5 s) of the
publish (at the default 5 s heartbeat the protocol's own floor is 5-10 s, so only printed). A
heartbeat interval under the brokers' minimum is refused with their reason. The figures are in
docs/kip848.md, "How fast a plan is followed".
"""

from __future__ import annotations

import re
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_common.kafka_retry import RetryingAdmin, ensure_topic
from kafka_rebalance_common.wire import plan_record
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.devenv.toolchain import Toolchain
from kafka_rebalance_operator.groups import plan_topic
from kafka_rebalance_operator.groups.streams import TRIGGER_PENDING_S
from kafka_rebalance_operator.kafka import group_heartbeat, kip848, streams_group
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver
from kafka_rebalance_operator.kafka.verify import recompute_pending, target_differs
from kafka_rebalance_operator.memory import PolicyMemory

from tests.conftest import PLAN_KEY
from tests.integration.streams_apps import StreamsApps, compile_app, end_offsets
from tests.integration.test_broker_mode import JavaMembers

pytestmark = [pytest.mark.integration]

PLAN_TOPIC = "kafka-rebalance-plans"
# Before each plan the group rests this long after it settled on the last one. Members
# heartbeat every 5 s and a settled group's members heartbeat about together, so these rests
# put the publish at two phases of the heartbeat interval: the first heartbeat after it comes
# about 4.5 and 2.0 s later (the 1 s rounds below are the speed goal; these count triggers).
RESTS_S = (0.5, 3.0)
DEFAULT_HEARTBEAT_S = 5.0  # the brokers' default group heartbeat interval (Kafka's)
FAST_HEARTBEAT_MS = 1000  # the group's own interval in the second half (the brokers' minimum)
FAST_RESTS_S = (0.1, 0.3, 0.5, 0.7, 0.9)  # five phases of the 1 s heartbeat
GOAL_S = 5.0  # publish -> Stable on the plan, at the 1 s heartbeat
POLL_S = 2.0  # the operator's poll interval in these rounds (the broker-mode tests use 2 s)
FOLLOW_BOUND_S = 60.0  # a behaviour bound (the plan is followed at all), not a speed goal
INCARNATION = "follow-speed"
Plan = dict[str, dict[str, list[int]]]


@dataclass
class Round:
    """One plan's timeline, in seconds from the start of the publish call."""

    publish_s: float  # the publish call (write, acknowledgement, any settle)
    acked_at: float  # wall clock (time.time()) when the publish call returned
    target_s: float | None = None  # the coordinator's target is the plan
    held_s: float | None = None  # every member holds its planned partitions or tasks
    stable_s: float = 0.0  # ... and the group is Stable at its assignment epoch
    triggers: int = 0
    bumps: int = 0
    trail: list[str] = field(default_factory=list)  # the group epoch at each trigger
    reader_ms: float | None = None  # acknowledged write -> the broker's reader logged it

    def line(self) -> str:
        def at(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f} s"

        reader = "-" if self.reader_ms is None else f"{self.reader_ms:.0f} ms"
        return (
            f"target {at(self.target_s)}, held {at(self.held_s)}, Stable {at(self.stable_s)} "
            f"after the publish (publish call {self.publish_s:.2f} s, reader {reader} after "
            f"the ack); {self.triggers} trigger(s) [{', '.join(self.trail)}], "
            f"{self.bumps} group-epoch bump(s)"
        )


def _summary(kind: str, rounds: list[Round]) -> str:
    def spread(values: list[float]) -> str:
        middle = statistics.median(values)
        return f"median {middle:.2f} s (min {min(values):.2f}, max {max(values):.2f})"

    held = [r.held_s for r in rounds if r.held_s is not None]
    readers = [r.reader_ms for r in rounds if r.reader_ms is not None]
    handover = [
        f"{r.held_s - r.target_s:.2f}"
        for r in rounds
        if r.held_s is not None and r.target_s is not None
    ]
    return (
        f"{kind}: {len(rounds)} plans; publish -> held {spread(held)}; publish -> Stable "
        f"{spread([r.stable_s for r in rounds])}; target -> held {handover} s; reader after "
        f"the ack {[round(ms) for ms in readers]} ms; triggers per plan "
        f"{[r.triggers for r in rounds]}; epoch bumps per plan {[r.bumps for r in rounds]}"
    )


def _reader_delays(broker_log: Path, group: str, rounds: list[Round]) -> None:
    """Fill each round's reader_ms from the broker log's `cached ... plan for group ... epoch
    N` line (the plug-in's reader handed the record to its store); left None when absent."""
    pattern = re.compile(
        r"^\[(?P<ts>[\d-]+ [\d:,]+)\] INFO .*cached (?:\w+ )?plan for group "
        rf"'{re.escape(group)}' epoch (?P<epoch>\d+)"
    )
    seen: dict[int, float] = {}
    for line in broker_log.read_text(errors="replace").splitlines():
        if (found := pattern.match(line)) is not None:
            stamp = datetime.strptime(found["ts"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            seen.setdefault(int(found["epoch"]), stamp)
    for epoch, done in enumerate(rounds, start=1):
        if epoch in seen:
            done.reader_ms = (seen[epoch] - done.acked_at) * 1000


def _publish(
    observer: KafkaObserver,
    bootstrap: str,
    group: str,
    epoch: int,
    plan: Plan,
    member_ids: list[str],
    kind: str,
) -> None:
    value = plan_record.encode_plan(
        group,
        epoch,
        f"h{epoch}",
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        plan,
        incarnation=INCARNATION,
        member_ids=member_ids,
        kind=kind,
    )
    signature = plan_record.sign(PLAN_KEY.encode(), group, value)
    client = {"bootstrap_servers": bootstrap}
    headers = [(plan_record.SIGNATURE_HEADER, signature)]
    observer.publish_plan(PLAN_TOPIC, group, value, headers, client)


@dataclass(frozen=True)
class Kind:
    """How one group kind is read, judged and triggered in these rounds."""

    describe: Callable[[], Any]
    holds: Callable[[Any, Plan], bool]  # every member holds the plan
    targets: Callable[[Any, Plan], bool]  # the coordinator's target is the plan
    trigger: Callable[[float], None]  # (now, monotonic)
    missed: Callable[[Any, Plan, float], bool]  # the operator's rule, at `now`


def _follow(kind: Kind, plan: Plan, publish: Callable[[], None]) -> Round:
    """One plan: publish, trigger, then watch until the group is Stable on it, triggering
    again when the operator's rule says the last trigger missed (checked every POLL_S)."""
    before = kind.describe().group_epoch
    began = time.monotonic()
    publish()
    done = Round(publish_s=time.monotonic() - began, acked_at=time.time())
    done.trail.append(f"{done.publish_s:.2f} s: epoch {before}")
    kind.trigger(time.monotonic())
    done.triggers, last_check = 1, time.monotonic()
    while True:
        group = kind.describe()
        now = time.monotonic()
        if done.target_s is None and kind.targets(group, plan):
            done.target_s = now - began
        if done.held_s is None and kind.holds(group, plan):
            done.held_s = now - began
        if (
            group.state == "Stable"
            and group.assignment_epoch == group.group_epoch
            and kind.holds(group, plan)
        ):
            done.stable_s, done.bumps = now - began, group.group_epoch - before
            return done
        assert now - began < FOLLOW_BOUND_S, f"plan not followed in {FOLLOW_BOUND_S} s: {group}"
        if now - last_check >= POLL_S:
            last_check = now
            if kind.missed(group, plan, now):
                done.trail.append(f"{now - began:.2f} s: epoch {group.group_epoch}")
                kind.trigger(now)
                done.triggers += 1
        time.sleep(0.05)


def _rounds(
    kind: Kind,
    rests: tuple[float, ...],
    first_epoch: int,
    plan_for: Callable[[int], tuple[Plan, Callable[[], None]]],
) -> list[Round]:
    """One plan per rest, plan epochs counting from `first_epoch`: rest, then follow the plan
    `plan_for(epoch)` gives, published with the call it gives."""
    rounds = []
    for epoch, rest in enumerate(rests, start=first_epoch):
        time.sleep(rest)
        plan, publish = plan_for(epoch)
        rounds.append(_follow(kind, plan, publish))
    return rounds


def _speed_up(admin: Any, group: str, kind: str, settled: Callable[[], Any]) -> None:
    """Give the group the 1 s heartbeat (after checking that the brokers refuse one under
    their minimum, with their reason), and wait until its members heartbeat at it: they take
    the new interval from the answer to their next heartbeat, at most the old interval away."""
    too_short = FAST_HEARTBEAT_MS // 2
    with pytest.raises(group_heartbeat.HeartbeatConfigRefused) as refused:
        group_heartbeat.set_heartbeat_interval(admin, group, kind, too_short)
    print(f"\n{too_short} ms refused: {refused.value}")
    assert group_heartbeat.heartbeat_config(kind) in str(refused.value)
    group_heartbeat.set_heartbeat_interval(admin, group, kind, FAST_HEARTBEAT_MS)
    time.sleep(DEFAULT_HEARTBEAT_S + 0.5)
    wait_for("the group Stable at the 1 s heartbeat", settled, 60, 0.2)


def _report(label: str, rounds: list[Round], first_epoch: int) -> None:
    for epoch, done in enumerate(rounds, start=first_epoch):
        print(f"\n{label} plan {epoch}: {done.line()}")
    print("\n" + _summary(label, rounds))


def _check(slow: list[Round], fast: list[Round]) -> None:
    """Every plan costs at most 2 triggers; at the 1 s heartbeat each is Stable within GOAL_S."""
    lines = [r.line() for r in slow + fast]
    assert all(r.triggers <= 2 for r in slow + fast), lines
    late = [r.line() for r in fast if r.stable_s > GOAL_S]
    assert not late, f"plans not followed within {GOAL_S} s at the 1 s heartbeat: {late}"


@pytest.fixture
def observer(kafka_plans: Any) -> Iterator[KafkaObserver]:
    made = KafkaObserver(kafka_plans.bootstrap_servers, {}, 30.0)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.kip848
def test_kip848_plans_are_followed_with_one_nudge_each(
    kafka_plans: Any,
    plan_keys: Path,
    tools: Toolchain,
    tmp_path: Path,
    observer: KafkaObserver,
) -> None:
    bootstrap = kafka_plans.bootstrap_servers
    group, topic = f"follow-{uuid.uuid4().hex[:6]}", f"follow-{uuid.uuid4().hex[:6]}"
    admin = RetryingAdmin(bootstrap_servers=bootstrap)
    ensure_topic(bootstrap, topic, 6)
    members = ["consumer-0", "consumer-1", "consumer-2"]
    java = JavaMembers(tools, bootstrap, group, topic, tmp_path)
    try:
        for member in members:
            java.start(member, tmp_path / "ledger")

        def settled() -> Any:
            crashed = java.crashed()
            assert crashed is None, crashed
            found = kip848.describe(admin, group)
            if found is None or found.state != "Stable" or len(found.members) != 3:
                return None
            return found

        wait_for("three consumers in a Stable group", settled, 120, 0.5)

        def missed(g: kip848.ConsumerGroup, plan: Plan, at: float) -> bool:
            # phases/publish.py's drift rule: the target differs, no recompute pending
            described = g.as_describe_groups()
            return target_differs(described, plan) and not recompute_pending(described)

        kind = Kind(
            describe=lambda: kip848.describe(admin, group),
            holds=lambda g, plan: not g.members_off_plan(plan),
            targets=lambda g, plan: not target_differs(g.as_describe_groups(), plan),
            trigger=lambda at: observer.nudge(group),
            missed=missed,
        )
        mirrored = [
            {members[0]: [0], members[1]: [1], members[2]: [2, 3, 4, 5]},
            {members[0]: [2, 3, 4, 5], members[1]: [0], members[2]: [1]},
        ]

        def plan_for(epoch: int) -> tuple[Plan, Callable[[], None]]:
            plan = {m: {topic: p} for m, p in mirrored[epoch % 2].items()}
            ids = [m.member_id for m in kip848.describe(admin, group).members]
            return plan, partial(_publish, observer, bootstrap, group, epoch, plan, ids, "consumer")

        slow = _rounds(kind, RESTS_S, 1, plan_for)
        _speed_up(admin, group, "consumer", settled)
        fast = _rounds(kind, FAST_RESTS_S, len(slow) + 1, plan_for)
        _reader_delays(kafka_plans.cluster.nodes[0].log, group, slow + fast)
        _report("KIP-848 consumer group, 5 s heartbeat", slow, 1)
        _report("KIP-848 consumer group, 1 s heartbeat", fast, len(slow) + 1)
        _check(slow, fast)
    finally:
        java.stop_all()
        admin.close()


@pytest.mark.streams
def test_streams_plans_are_followed_with_one_trigger_each(
    kafka_plans: Any,
    plan_keys: Path,
    tools: Toolchain,
    tmp_path: Path,
    observer: KafkaObserver,
) -> None:
    bootstrap = kafka_plans.bootstrap_servers
    app_id = f"follow-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app_id}-in", f"{app_id}-out"
    admin = RetryingAdmin(bootstrap_servers=bootstrap)
    for name in (source, sink):
        ensure_topic(bootstrap, name, 4)
    wait_for("input leaders", lambda: len(end_offsets(admin, source, 4)) == 4, 30, 0.25)
    apps = StreamsApps(
        tools, bootstrap, app_id, "stateless", source, sink, tmp_path, compile_app(tools)
    )
    try:
        for instance in ("app-0", "app-1"):
            apps.start(instance)

        def settled() -> Any:
            crashed = apps.crashed()
            assert crashed is None, crashed
            found = streams_group.describe(admin, app_id)
            if found is None or found.state != "Stable" or len(found.members) != 2:
                return None
            return found

        wait_for("two instances in a Stable streams group", settled, 180, 0.5)
        memory = PolicyMemory()

        def describe() -> streams_group.StreamsGroup:
            found = streams_group.describe(admin, app_id)
            assert found is not None, f"streams group {app_id} is gone"
            return found

        def trigger(at: float) -> None:
            # as plan_topic._trigger remembers it
            memory.triggered_group_epoch, memory.triggered_at = describe().group_epoch, at
            observer.trigger_streams_group(app_id)

        kind = Kind(
            describe=describe,
            holds=lambda g, plan: not g.members_off_plan(plan),
            targets=lambda g, plan: all(
                {s: p for s, p in g.targets().get(m, {}).items() if p} == tasks
                for m, tasks in plan.items()
            ),
            trigger=trigger,
            missed=lambda g, plan, at: plan_topic.recompute_missed(
                g, memory, at, TRIGGER_PENDING_S
            ),
        )

        def plan_for(epoch: int) -> tuple[Plan, Callable[[], None]]:
            first, second = sorted(m.member_id for m in describe().members)
            if epoch % 2:
                first, second = second, first
            plan = {first: {"0": [0, 1, 2]}, second: {"0": [3]}}
            return plan, partial(
                _publish, observer, bootstrap, app_id, epoch, plan, sorted(plan), "streams"
            )

        slow = _rounds(kind, RESTS_S, 1, plan_for)
        _speed_up(admin, app_id, "streams", settled)
        fast = _rounds(kind, FAST_RESTS_S, len(slow) + 1, plan_for)
        _reader_delays(kafka_plans.cluster.nodes[0].log, app_id, slow + fast)
        _report("streams group, 5 s heartbeat", slow, 1)
        _report("streams group, 1 s heartbeat", fast, len(slow) + 1)
        _check(slow, fast)
    finally:
        apps.stop_all()
        observer.clear_streams_trigger(app_id)
        admin.close()
