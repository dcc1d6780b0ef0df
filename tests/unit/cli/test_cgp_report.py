"""`kubectl cgp`'s pure views: moves by the planner's own function, GitOps detection, rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance import cgp_report


def test_moves_are_owner_changes_and_grants_are_not_moves() -> None:
    current = Assignment({"a": {"t": [0, 1, 2]}, "b": {"t": [3]}})
    proposed = Assignment({"a": {"t": [0, 1]}, "b": {"t": [2, 3]}, "c": {"u": [0]}})  # u-0 unowned
    assert cgp_report.proposal_moves(current, proposed) == [
        {"topic": "t", "partition": 2, "from": "a", "to": "b"}
    ]
    assert cgp_report.proposal_moves(current, current) == []


def test_proposal_assignment_is_read_back_or_refused_in_one_line() -> None:
    policy = {
        "metadata": {"name": "p"},
        "status": {"proposal": {"hash": "h", "assignment": json.dumps({"a": {"t": [1, 0]}})}},
    }
    assert cgp_report.proposal_assignment(policy) == ("h", {"a": {"t": [0, 1]}})
    with pytest.raises(cgp_report.ReportError, match="policy p has no proposal waiting"):
        cgp_report.proposal_assignment({"metadata": {"name": "p"}, "status": {}})
    policy["status"]["proposal"]["assignment"] = "{not json"
    with pytest.raises(cgp_report.ReportError, match="is not readable"):
        cgp_report.proposal_assignment(policy)
    policy["status"]["proposal"]["assignment"] = '{"a": {"t": [0, "1"]}}'
    with pytest.raises(cgp_report.ReportError, match=r"is not readable: a\.t\[1\]: not an integer"):
        cgp_report.proposal_assignment(policy)


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, []),
        ({"labels": {"app.kubernetes.io/instance": "x"}}, []),  # Helm sets it too: not a mark
        ({"annotations": {"argocd.argoproj.io/tracking-id": "a:g/K:ns/n"}}, ["Argo CD"]),
        ({"labels": {"kustomize.toolkit.fluxcd.io/name": "apps"}}, ["Flux"]),
        ({"managedFields": [{"manager": "kubectl-client-side-apply"}]}, []),
        (
            {"managedFields": [{"manager": "argocd-controller"}, {"manager": "helm-controller"}]},
            ["Argo CD", "Flux"],
        ),
    ],
)
def test_gitops_managers(metadata: dict, expected: list[str]) -> None:
    assert cgp_report.gitops_managers({"metadata": metadata}) == expected


def test_status_row_says_why_not_ready_and_nothing_when_ready() -> None:
    ready = {
        "metadata": {"name": "a", "namespace": "n", "generation": 2},
        "spec": {"groupId": "g"},
        "status": {
            "observedGeneration": 2,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Balanced"}],
        },
    }
    row = cgp_report.status_row(ready)
    assert (row["ready"], row["reason"], row["message"]) == ("True", "", "")
    ready["status"]["observedGeneration"] = 1
    assert cgp_report.status_row(ready)["reason"] == "SpecNotObserved"
    stalled = {
        "metadata": {"name": "b"},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "NoMembers", "message": "m"}
            ]
        },
    }
    row = cgp_report.status_row(stalled)
    assert (row["ready"], row["reason"], row["message"]) == ("False", "NoMembers", "m")


def test_table_aligns_columns_and_marks_missing_values() -> None:
    text = cgp_report.table(
        [{"a": "x", "b": None}, {"a": "longer", "b": 1.5}], [("a", "A"), ("b", "B")]
    )
    assert text.splitlines() == ["A       B", "x       -", "longer  1.500"]


def test_a_streams_policy_shows_its_tasks_per_member_and_others_show_none() -> None:
    member = {"memberId": "m-0", "clientId": "app-0", "tasks": 3, "lag": 12, "active": "0:0-2"}
    policy = {"status": {"streams": {"tasks": 6, "members": [member]}}}
    members, tasks = cgp_report.streams_members(policy)
    assert (members, tasks) == ([member], 6)
    shown = cgp_report.table(members, cgp_report.STREAMS_MEMBER_COLUMNS).splitlines()
    assert shown[0].split() == ["MEMBER", "CLIENT", "TASKS", "LAG", "ACTIVE", "STANDBY"]
    assert shown[1].split() == ["m-0", "app-0", "3", "12", "0:0-2", "-"]
    assert cgp_report.streams_members({"status": {"epoch": 1}}) == ([], None)


def test_a_share_policy_shows_its_consumers_per_partition_and_others_show_none() -> None:
    share = {
        "assignor": "kafka-rebalance-plan",
        "backlog": 170,
        "partitions": 5,
        "triggers": 2,
        "lastPlanEpochBumps": 2,
        "consumersPerPartition": "jobs:3,1,1,1 jobs.retry:1",
    }
    summary = cgp_report.share_summary({"status": {"share": share}})
    assert summary is not None
    line, rows = summary
    assert line == (
        "share group: assignor kafka-rebalance-plan, backlog 170 records over 5 partitions, "
        "2 triggers (last plan: 2 epoch bumps)"
    )
    shown = cgp_report.table(rows, cgp_report.SHARE_PARTITION_COLUMNS).splitlines()
    assert [r.split() for r in shown] == [
        ["TOPIC", "CONSUMERS", "PER", "PARTITION"],
        ["jobs", "3,1,1,1"],
        ["jobs.retry", "1"],
    ]
    assert cgp_report.share_summary({"status": {"streams": {}}}) is None
    first_poll = cgp_report.share_summary({"status": {"share": {"assignor": "simple"}}})
    assert first_poll == (
        "share group: assignor simple, backlog - records over - partitions, - triggers",
        [],
    )


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (-1.5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (330, "5m30s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 15 * 60, "3h15m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (2 * 86400, "2d"),
        (2 * 86400 + 4 * 3600, "2d4h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (365 * 86400 * 3 + 20 * 86400, "3y20d"),
        (365 * 86400 * 9, "9y"),
    ],
)
def test_human_age_reads_like_kubectl(seconds: float, shown: str) -> None:
    assert cgp_report.human_age(seconds) == shown


def test_age_of_api_timestamps() -> None:
    now = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    assert cgp_report.age("2026-01-01T00:55:00Z", now) == "5m"
    assert cgp_report.age("2025-12-30T01:00:00+00:00", now) == "2d"
    assert cgp_report.age(None, now) == "-"
    assert cgp_report.age("yesterday", now) == "-"
