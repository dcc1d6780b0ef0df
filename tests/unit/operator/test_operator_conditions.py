"""kstatus conditions and the liveness and verification logic."""

from __future__ import annotations

from kafka_rebalance_operator.conditions import Health, build
from kafka_rebalance_operator.health import Liveness
from kafka_rebalance_operator.kafka.verify import verify


def by_type(conditions):
    return {c["type"]: c for c in conditions}


def test_kstatus_shape_for_ready_and_stalled() -> None:
    ready = by_type(build(Health(True, "Balanced", "ok"), None, 3, "T1"))
    assert ready["Ready"]["status"] == "True" and ready["Ready"]["reason"] == "Balanced"
    assert ready["Stalled"]["status"] == "False" and ready["Reconciling"]["status"] == "False"
    assert all(c["observedGeneration"] == 3 for c in ready.values())
    stalled = by_type(
        build(
            Health(False, "KafkaUnreachable", "down", stalled=True), list(ready.values()), 3, "T2"
        )
    )
    assert stalled["Stalled"]["status"] == "True"
    assert stalled["Stalled"]["reason"] == "KafkaUnreachable"
    assert stalled["Ready"]["status"] == "False"


def test_transition_time_changes_only_with_status() -> None:
    first = build(Health(True, "Balanced", "ok"), None, 1, "T1")
    second = by_type(build(Health(True, "PlanApplied", "new plan"), first, 2, "T2"))
    assert second["Ready"]["lastTransitionTime"] == "T1"  # still True
    third = by_type(build(Health(False, "NoMembers", "none"), list(second.values()), 2, "T3"))
    assert third["Ready"]["lastTransitionTime"] == "T3"
    again = build(Health(True, "Balanced", "ok"), first, 1, "T9")
    assert again == first  # an unchanged poll renders identical conditions


def test_liveness_fails_when_a_timer_stops_waking_not_when_polls_fail() -> None:
    live = Liveness(max_age_s=60)
    assert live.check(now=0)[0]  # no policies: alive
    live.woke("ns/failing", now=0)
    for t in range(0, 300, 10):  # its polls fail every time, but they return
        live.woke("ns/failing", now=t)
        live.poll_started("ns/failing", now=t)
        live.poll_finished("ns/failing", now=t + 2)
        assert live.check(now=t + 5)[0]
    assert not live.check(now=290 + 2 + 61)[0]  # the timer stopped waking: the loop is stuck
    live.forget("ns/failing")
    assert live.check(now=1000)[0]


def test_liveness_fails_while_one_poll_does_not_return() -> None:
    live = Liveness(max_age_s=60)
    live.woke("ns/a", now=0)
    live.woke("ns/b", now=0)
    live.poll_started("ns/a", now=0)
    for t in range(0, 60, 5):
        live.woke("ns/b", now=t)
    alive, ages = live.check(now=59)
    assert alive and ages["ns/a"] == 59
    live.woke("ns/b", now=61)
    alive, ages = live.check(now=61)
    assert not alive and ages == {"ns/a": 61, "ns/b": 0}
    live.poll_finished("ns/a", now=62)
    assert live.check(now=63)[0]


def test_verify_compares_static_members_to_the_plan() -> None:
    group = {
        "group_state": "Stable",
        "members": [
            {
                "group_instance_id": "p-0",
                "member_assignment": {
                    "assigned_partitions": [{"topic": "t", "partitions": [1, 0]}]
                },
            },
            {
                "group_instance_id": "p-1",
                "member_assignment": {"assigned_partitions": [{"topic": "t", "partitions": [2]}]},
            },
        ],
    }
    assert verify(group, {"p-0": {"t": [0, 1]}, "p-1": {"t": [2]}}).state == "converged"
    result = verify(group, {"p-0": {"t": [0]}, "p-1": {"t": [1, 2]}})
    assert result.state == "converging" and "p-0" in result.message
    assert verify({"group_state": "Empty", "members": []}, {}).state == "no-consumers"
    assert verify(None, {}).state == "unknown"
