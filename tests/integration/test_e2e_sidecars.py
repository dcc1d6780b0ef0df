"""End to end with everything real: broker, API server, the operator and one sidecar process per
KWOK pod, each sidecar writing a ledger of what it processed.

Every test drives the demo's own harness (`kafka_rebalance_dev.demo`), so what the tests prove is
what `kafka-rebalance demo` shows. "Nothing lost" means: every (topic, partition, offset) the
broker acknowledged to the producer appears in some member's ledger.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.demo.comparison import SlowConsumerSetup, compare_slow_consumer
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness
from kafka_rebalance_dev.demo.summary import comparison_table

from tests.integration.harnesses import group_harness, ledger_verdict

pytestmark = pytest.mark.integration


@pytest.fixture
def endpoints(kafka: str, k8s: Any) -> Endpoints:
    return Endpoints(bootstrap_servers=kafka, kubeconfig=k8s.kubeconfig, kubectl=k8s.tools.kubectl)


def group(endpoints: Endpoints, workdir: Path, **options: Any) -> Any:
    """A harness that shows the evidence (operator and sidecar logs) when the test fails."""
    return group_harness(endpoints, workdir, **options)


def _start(
    harness: GroupHarness, members: list[str], rate: float, strategy: str, mode: str, **policy: Any
) -> None:
    """Operator up, the policy applied, one sidecar per member, `rate` records/s per partition."""
    harness.operator.start()
    harness.apply_policy(strategy, mode, **policy)
    harness.start_sidecars(members)
    harness.produce({p: rate for p in range(harness.partitions)})


def _committed_progress(harness: GroupHarness, before: dict[int, int]) -> set[int]:
    """Partitions whose committed offset moved past `before`."""
    now = harness.sample().committed
    return {p for p, offset in now.items() if offset > before.get(p, -1)}


def test_nothing_lost_across_plan_changes_membership_and_an_operator_outage(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    with group(endpoints, tmp_path, prefix="e2e", partitions=8, replicas=3) as harness:
        members = harness.pods(3)
        _start(harness, members, 8.0, "lag-aware", "enforce", load={"model": "rate"})
        first = harness.wait_converged(1, members)

        # -- a plan change: the policy switches strategy; the group follows the new epoch
        harness.cluster.patch_policy(harness.policy, {"spec": {"strategy": "range"}})
        ranged = harness.wait_converged(first + 1, members)
        epochs, planned = harness.planned_owners()
        # Kafka's RangeAssignor: 8 partitions over 3 members -> 3, 3, 2 consecutive ones
        assert epochs == {ranged}
        assert planned == dict(enumerate([members[0]] * 3 + [members[1]] * 3 + [members[2]] * 2))

        # -- a member added: the StatefulSet scales up, its sidecar starts, the plan includes it
        harness.scale(4)
        harness.start_sidecars([harness.pods(4)[3]])
        grown = harness.wait_converged(ranged + 1, harness.pods(4))
        _, planned = harness.planned_owners()
        assert harness.pods(4)[3] in planned.values()

        # -- the operator stops; a member leaves meanwhile; the group keeps consuming
        harness.operator.stop()
        stopped_at = harness.sample()
        leaving = harness.pods(4)[3]
        orphaned = {p for p, m in stopped_at.owners.items() if m == leaving}
        assert orphaned
        harness.fleet.stop(leaving)
        harness.scale(3)
        harness.watch(12.0)  # six poll intervals of the (absent) operator
        after = harness.sample()
        assert harness.epoch() == grown, "nobody should have planned while the operator was down"
        assert set(after.owners) == set(range(8)), "the fallback must cover the orphans"
        assert set(after.owners.values()) <= set(members)
        moved = _committed_progress(harness, stopped_at.committed)
        assert orphaned <= moved, f"orphaned partitions {orphaned} stalled; moved: {moved}"
        assert moved == set(range(8))

        # -- the operator is back: it plans for the three remaining pods
        harness.operator.start()
        harness.wait_converged(grown + 1, members)

        harness.drain(timeout=90)
        report = harness.reconcile()
        print(f"\nplan changes + membership + operator outage: {report.summary()}")
        assert report.produced > 1000
        assert report.lost == 0, report.lost_examples
        assert report.unexpected == 0
        # every hand-over here is graceful (a new epoch: the owner commits what it delivered
        # before revoking; a leaving member is stopped with SIGTERM and commits on the way out),
        # so at-least-once leaves no room for a duplicate: only a kill or an outage may cause one
        assert report.duplicates == 0, report.summary()
        assert set(report.per_member) == set(harness.pods(4))


def test_nothing_lost_across_a_broker_restart(
    endpoints: Endpoints, kafka_broker_4: Any, tmp_path: Path
) -> None:
    with group(endpoints, tmp_path, prefix="e2e-broker", partitions=4, replicas=2) as harness:
        members = harness.pods(2)
        _start(harness, members, 10.0, "lag-aware", "enforce", load={"model": "rate"})
        epoch = harness.wait_converged(1, members)
        harness.watch(5.0)
        node = kafka_broker_4.cluster.nodes[0].node_id
        kafka_broker_4.stop_node(node)
        time.sleep(5)
        kafka_broker_4.start_node(node)
        harness.watch(15.0)
        harness.drain(timeout=120)
        report = harness.reconcile()
        print(
            f"\nbroker restart: {report.summary()}; sends refused {harness.workload.failed_count}"
        )
        assert report.lost == 0, report.lost_examples
        assert report.produced > 300
        assert set(report.per_member) == set(members)
        # the sidecars survived the outage (watch() fails on a crashed one) and still follow
        # the plan of the same operator
        assert harness.wait_converged(epoch, members) >= epoch


def _generations(harness: GroupHarness, member: str) -> list[int]:
    """The group generations a sidecar has logged ("rebalance: generation N, ..."), in order."""
    log = harness.fleet.log_tail(member, lines=100_000)
    return [int(m.group(1)) for m in re.finditer(r"rebalance: generation (\d+),", log)]


def _settled(harness: GroupHarness, members: list[str]) -> tuple[int, Any, set[int]]:
    """Operator up, lag-aware plan converged, the group on one generation: (epoch, sample,
    {generation})."""
    _start(harness, members, 10.0, "lag-aware", "enforce", load={"model": "rate"})
    epoch = harness.wait_converged(1, members)
    # The first plan is made before any rate is measured and the next may follow the measured
    # rates: settled is an epoch unchanged for three polls (2 s each), consumed by the group.
    for _ in range(5):
        harness.watch(6.0)
        latest = harness.epoch()
        if latest == epoch:
            break
        epoch = harness.wait_converged(latest, members)
    else:
        raise AssertionError(f"the operator kept replanning: epoch {epoch}")
    before = harness.sample()
    generations = {m: _generations(harness, m) for m in members}
    assert all(generations.values()), generations
    settled = {g[-1] for g in generations.values()}
    assert len(settled) == 1, f"members disagree on the generation: {generations}"
    return epoch, before, settled


def _assert_no_rebalance(
    harness: GroupHarness,
    members: list[str],
    victim: str,
    epoch: int,
    before: Any,
    settled: set[int],
) -> None:
    """Every member, the restarted one included, is still on the settled generation, owners and
    the plan epoch did not move, and the victim's partitions progressed again."""
    after = harness.sample()
    for member in members:
        seen = _generations(harness, member)
        assert seen[-1] in settled, f"{member} rebalanced: generations {seen}"
    assert after.owners == before.owners
    assert harness.epoch() == epoch, "the operator replanned for a pod that never left"
    victims = {p for p, m in before.owners.items() if m == victim}
    assert victims <= _committed_progress(harness, before.committed)


def test_a_sidecar_killed_and_restarted_within_the_session_timeout_loses_nothing(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    """Static membership (KIP-345) with the operator running: a sidecar killed with SIGKILL and
    started again under the same name before its session times out (10 s) gets its partitions
    back without a rebalance; its uncommitted batch is processed again (counted, allowed by
    at-least-once), nothing is lost and the operator does not replan (the pod stayed Ready)."""
    with group(endpoints, tmp_path, prefix="e2e-kill", partitions=6, replicas=3) as harness:
        members = harness.pods(3)
        epoch, before, settled = _settled(harness, members)
        victim = members[1]
        harness.fleet.kill(victim)
        time.sleep(2.0)
        harness.fleet.start(victim)
        harness.watch(12.0)  # longer than the 10 s session timeout
        _assert_no_rebalance(harness, members, victim, epoch, before, settled)

        report = ledger_verdict(harness, "SIGKILL + restart", same_epoch=False, timeout=90)
        assert report.unexpected == 0
        assert set(report.per_member) == set(members)


def _leader(harness: GroupHarness, members: list[str]) -> str:
    """The member that composed the group's assignments (the plan-following assignor logs
    "composed assignment for N members" on the leader only)."""
    leaders = [
        m for m in members if "composed assignment for" in harness.fleet.log_tail(m, 100_000)
    ]
    assert len(leaders) == 1, f"expected one leader, found {leaders}"
    return leaders[0]


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_a_sidecar_terminated_and_restarted_within_the_session_timeout_causes_no_rebalance(
    endpoints: Endpoints, tmp_path: Path, role: str
) -> None:
    """A deleted pod: its sidecar gets SIGTERM (finishes its batch, commits, closes without a
    LeaveGroup: a static member) and the StatefulSet starts a new one under the same name a few
    seconds later, a fresh process reading its document again. KIP-345: the group must not
    rebalance (no new generation on any member), whether the victim is the group's leader or
    not, and the operator must not replan."""
    with group(endpoints, tmp_path, prefix=f"e2e-term-{role[0]}", partitions=6, replicas=3) as h:
        members = h.pods(3)
        epoch, before, settled = _settled(h, members)
        leader = _leader(h, members)
        victim = leader if role == "leader" else next(m for m in members if m != leader)
        terminated = time.monotonic()
        assert h.fleet.stop(victim) == 0, h.fleet.log_tail(victim, 40)
        stopped_in = time.monotonic() - terminated
        time.sleep(max(0.0, 3.0 - stopped_in))
        h.fleet.start(victim)
        restarted_in = time.monotonic() - terminated
        h.watch(12.0)  # longer than the 10 s session timeout
        print(
            f"\nSIGTERM to the {role} {victim}: exited in {stopped_in:.1f}s, restarted "
            f"{restarted_in:.1f}s after the signal; generations "
            + ", ".join(f"{m} {_generations(h, m)}" for m in members)
        )

        _assert_no_rebalance(h, members, victim, epoch, before, settled)

        report = ledger_verdict(h, f"SIGTERM + restart ({role})", same_epoch=False, timeout=90)
        assert report.unexpected == 0
        # graceful: the victim committed everything it delivered before it exited
        assert report.duplicates == 0, report.summary()
        assert set(report.per_member) == set(members)


@pytest.mark.parametrize("engine", ["kafka-python", "librdkafka"])
def test_assign_mode_hands_partitions_over_without_loss_or_double_processing(
    endpoints: Endpoints, tmp_path: Path, engine: str
) -> None:
    """assign mode: no broker fencing, so the operator revokes first, waits for the old owner's
    commit acknowledging the epoch, then grants. The ledger must show every record processed
    and no partition processed by two members under the same epoch. Both client engines."""
    with group(
        endpoints,
        tmp_path,
        prefix="e2e-assign",
        partitions=6,
        replicas=3,
        apply_mode="assign",
        engine=engine,
    ) as harness:
        members = harness.pods(3)
        _start(harness, members, 8.0, "roundrobin", "enforce")
        first, planned = harness.wait_plan(1, members)
        assert planned == {p: members[p % 3] for p in range(6)}
        harness.watch(4.0)

        # -- four of six partitions change owner: each goes through revoke, ack, grant
        harness.cluster.patch_policy(harness.policy, {"spec": {"strategy": "range"}})
        ranged, planned = harness.wait_plan(first + 1, members)
        assert planned == {p: members[p // 2] for p in range(6)}
        assert ranged >= first + 2, "a hand-over takes a revoke epoch and a grant epoch"

        # -- a member added
        harness.scale(4)
        newcomer = harness.pods(4)[3]
        harness.start_sidecars([newcomer])
        _, planned = harness.wait_plan(ranged + 1, harness.pods(4))
        assert newcomer in planned.values()
        harness.watch(4.0)

        harness.drain(timeout=90)
        report = harness.reconcile()
        print(f"\nassign mode hand-overs: {report.summary()}")
        assert report.lost == 0, report.lost_examples
        assert report.conflicts == (), report.conflicts
        assert report.duplicates == 0, report.summary()
        assert newcomer in report.per_member


KIP794 = SlowConsumerSetup()


def test_kip794_slow_consumer_lag_aware_keeps_up_where_count_based_plans_fall_behind(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    """One consumer sleeps 80 ms per record (about 12 records/s) while every partition gets
    5 records/s: a plan that gives it a third of the partitions (20 records/s) leaves it behind
    for good. lag-aware with adaptive weights must keep total throughput at production (the
    other members have capacity to spare), bound the lag, and stop changing the plan."""
    rows = compare_slow_consumer(
        endpoints, tmp_path, ("range", "cooperative-sticky", "lag-aware"), KIP794
    )
    table = comparison_table(rows)
    over_time = "\n".join(
        f"{row['strategy']}: lag every 10 s {row['lag_over_time']}; slow member ends with "
        f"partitions {row['slow_partitions']}; epochs first seen at (s) {row['epoch_seen_at']}; "
        f"plans by epoch {row['plans']}"
        for row in rows
    )
    text = (
        f"KIP-794 slow consumer: {KIP794.members} members, {KIP794.partitions} partitions at "
        f"{KIP794.rate_per_partition:g} rec/s each, one member at {KIP794.slow_ms} ms/record; "
        f"throughput and lag trend over the final {KIP794.window_s:g} s of "
        f"{KIP794.duration:g} s\n\n{table}\n\n{over_time}\n"
    )
    (tmp_path / "kip794.md").write_text(text)
    print("\n" + text)
    by = {row["strategy"]: row for row in rows}
    production = KIP794.production
    for row in rows:
        assert row["lost"] == 0, row
    # the problem exists: a count-based plan leaves the slow member behind
    for name in ("range", "cooperative-sticky"):
        assert by[name]["lag_trend"] > 0.25 * (production / KIP794.members - KIP794.slow_capacity)
        assert by[name]["throughput"] < production * 0.95
    lag_aware = by["lag-aware"]
    # lag-aware keeps up with production (the group's capacity exceeds it) ...
    assert lag_aware["throughput"] >= production * 0.9
    assert lag_aware["throughput"] > max(
        by[n]["throughput"] for n in ("range", "cooperative-sticky")
    )
    # ... with bounded lag that is not growing ...
    assert lag_aware["lag_trend"] < 0.1 * production
    assert lag_aware["final_lag"] < by["range"]["final_lag"]
    assert lag_aware["final_lag"] <= 10 * production  # at most ten seconds of production behind
    # ... and without flapping: a handful of plans, settled by the end, and no partition ever
    # handed back to a member a plan took it from (KIP-794: load-following that undoes itself).
    # Plans wait for a measured capacity (MeasuringCapacity), so none is made on the weights of
    # 1 that mean "not measured yet".
    assert lag_aware["epochs"] <= 6
    assert lag_aware["plan_reversals"] == 0, lag_aware["plans"]
    assert lag_aware["plan_changes_in_final_window"] <= 1, lag_aware["plans"]
