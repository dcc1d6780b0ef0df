"""`kubectl cgp`'s pure views: moves by the planner's own function, GitOps detection, rows."""

from __future__ import annotations

import json

import pytest

from kafka_rebalance import cgp_report


def test_moves_are_owner_changes_and_grants_are_not_moves() -> None:
    current = {"a": {"t": [0, 1, 2]}, "b": {"t": [3]}}
    proposed = {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}, "c": {"u": [0]}}  # u-0 was unowned
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
