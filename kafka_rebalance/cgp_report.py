"""What `kubectl cgp` shows, from policy objects as the API server returns them. Pure.

Kept apart from the I/O in `kubectl_cgp` so each view is a function of plain dicts: the status
row of a policy, the moves of its waiting proposal (computed by the planner's own
`compute_moves`, so the table is what the operator would apply), and whether a GitOps tool
manages the object (then an approval made in the cluster alone is undone by the next sync).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kafka_rebalance_assignors import parse_request
from kafka_rebalance_assignors.context import prepare
from kafka_rebalance_assignors.planner import compute_moves
from kafka_rebalance_common import wire
from kafka_rebalance_common.assignment import Assignment

from kafka_rebalance.tables import grid

# Labels and annotations a GitOps controller puts on what it applies (Argo CD's annotation
# tracking and its legacy label, Flux's kustomize and helm controllers).
GITOPS_MARKS: dict[str, str] = {
    "argocd.argoproj.io/tracking-id": "Argo CD",
    "argocd.argoproj.io/instance": "Argo CD",
    "kustomize.toolkit.fluxcd.io/name": "Flux",
    "helm.toolkit.fluxcd.io/name": "Flux",
}
# Field managers of server-side apply by those controllers.
GITOPS_MANAGERS: dict[str, str] = {
    "argocd-controller": "Argo CD",
    "argocd-application-controller": "Argo CD",
    "kustomize-controller": "Flux",
    "helm-controller": "Flux",
}


class ReportError(ValueError):
    """The object cannot answer the question asked (no proposal, unreadable proposal)."""


def ready_condition(policy: Mapping[str, Any]) -> Mapping[str, Any]:
    conditions = (policy.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def status_row(policy: Mapping[str, Any]) -> dict[str, Any]:
    """One policy as `kubectl cgp status` lists it. `reason`/`message` are empty when Ready."""
    metadata = policy.get("metadata") or {}
    spec = policy.get("spec") or {}
    status = policy.get("status") or {}
    ready = ready_condition(policy)
    is_ready = ready.get("status") == "True"
    observed = status.get("observedGeneration")
    stale = observed is not None and observed != metadata.get("generation")
    reason = "" if is_ready else str(ready.get("reason") or "NotObserved")
    message = "" if is_ready else str(ready.get("message") or "the operator has not polled it")
    if stale and not reason:
        reason, message = "SpecNotObserved", "the operator has not processed the latest spec"
    proposal = status.get("proposal") or {}
    return {
        "namespace": metadata.get("namespace", ""),
        "name": metadata.get("name", ""),
        "group": spec.get("groupId", ""),
        "members": status.get("members"),
        "lag": status.get("totalLag"),
        "imbalance": status.get("maxLoadRatio"),
        "epoch": status.get("epoch"),
        "ready": ready.get("status", "Unknown"),
        "reason": reason,
        "message": message,
        "proposal": proposal.get("hash", ""),
    }


def proposal_assignment(policy: Mapping[str, Any]) -> tuple[str, Assignment]:
    """(hash, assignment) of the waiting proposal; ReportError when there is none."""
    name = (policy.get("metadata") or {}).get("name", "?")
    proposal = (policy.get("status") or {}).get("proposal")
    if not isinstance(proposal, Mapping) or not proposal.get("hash"):
        raise ReportError(f"policy {name} has no proposal waiting for approval")
    text = proposal.get("assignment")
    if not isinstance(text, str):
        raise ReportError(
            f"policy {name}: status.proposal.assignment is missing (written by an older "
            "operator); the hash alone can still be approved"
        )
    try:
        assignment = wire.decode_assignment(text)
    except wire.AssignmentError as error:
        raise ReportError(
            f"policy {name}: status.proposal.assignment is not readable: {error}"
        ) from None
    return str(proposal["hash"]), assignment


def proposal_moves(current: Assignment, proposed: Assignment) -> list[dict[str, Any]]:
    """Partitions that change owner from `current` (the applied ConfigMaps) to `proposed`,
    as the planner counts them (`compute_moves`: grants of unowned partitions are not moves)."""
    topics: dict[str, int] = {}
    for assignment in (current, proposed):
        for parts in assignment.values():
            for topic, ps in parts.items():
                if ps:
                    topics[topic] = max(topics.get(topic, 0), max(ps) + 1)
    members: dict[str, Any] = {}
    for member in sorted(set(current) | set(proposed)):
        entry: dict[str, Any] = {"topics": sorted(topics)}
        owned = {t: list(ps) for t, ps in current.partitions_of(member).items() if ps}
        if owned:
            entry["owned"] = owned
        members[member] = entry
    request = parse_request(
        {"strategy": "range", "topics": dict(sorted(topics.items())), "members": members}
    )
    group = request.group
    index = {m: i for i, m in enumerate(group.members)}
    offsets = group.offsets()
    target = [-1] * sum(group.topics.values())
    for member, parts in proposed.items():
        for topic, ps in parts.items():
            for p in ps:
                target[offsets[topic] + p] = index[member]
    context = prepare(group, request.options)
    return [
        {"topic": move.topic, "partition": move.partition, "from": move.from_member}
        | {"to": move.to_member}
        for move in compute_moves(context, context.ownership.owners, target)
    ]


def gitops_managers(policy: Mapping[str, Any]) -> list[str]:
    """The GitOps tools that manage this object (by their marks or field managers), sorted."""
    metadata = policy.get("metadata") or {}
    found = set()
    for key in (*(metadata.get("labels") or {}), *(metadata.get("annotations") or {})):
        if key in GITOPS_MARKS:
            found.add(GITOPS_MARKS[key])
    for entry in metadata.get("managedFields") or []:
        tool = GITOPS_MANAGERS.get(str(entry.get("manager", "")))
        if tool is not None:
            found.add(tool)
    return sorted(found)


def approval_patch(hash_: str) -> dict[str, Any]:
    return {"spec": {"approvedPlan": hash_}}


STREAMS_MEMBER_COLUMNS = [
    ("memberId", "MEMBER"),
    ("clientId", "CLIENT"),
    ("tasks", "TASKS"),
    ("lag", "LAG"),
    ("active", "ACTIVE"),
    ("standby", "STANDBY"),
]


def streams_members(policy: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int | None]:
    """A streams-group policy's tasks per member (status.streams.members, as the operator
    listed them) and how many tasks the group has; ([], None) for other policies."""
    streams = (policy.get("status") or {}).get("streams")
    if not isinstance(streams, Mapping):
        return [], None
    members = [dict(m) for m in streams.get("members") or [] if isinstance(m, Mapping)]
    tasks = streams.get("tasks")
    return members, tasks if isinstance(tasks, int) else None


SHARE_PARTITION_COLUMNS = [("topic", "TOPIC"), ("consumers", "CONSUMERS PER PARTITION")]


def share_summary(policy: Mapping[str, Any]) -> tuple[str, list[dict[str, str]]] | None:
    """A share-group policy's status.share as one line (assignor, backlog, triggers, the last
    plan's epoch bumps) and its consumers per partition, a row per topic (the operator writes
    them as `topic:3,1,1` separated by spaces; topic names hold no colon); None for other
    policies."""
    share = (policy.get("status") or {}).get("share")
    if not isinstance(share, Mapping):
        return None
    line = (
        f"share group: assignor {share.get('assignor') or '-'}, "
        f"backlog {_cell(share.get('backlog'))} records over "
        f"{_cell(share.get('partitions'))} partitions, {_cell(share.get('triggers'))} triggers"
    )
    if (bumps := share.get("lastPlanEpochBumps")) is not None:
        line += f" (last plan: {bumps} epoch bumps)"
    rows = []
    for entry in str(share.get("consumersPerPartition") or "").split():
        topic, _, counts = entry.rpartition(":")
        rows.append({"topic": topic or "-", "consumers": counts})
    return line, rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table_lines(
    rows: Iterable[Mapping[str, Any]],
    columns: list[tuple[str, str]],
    widths: list[int] | None = None,
) -> tuple[list[str], list[int]]:
    """The header and rows as kubectl aligns them (upper-case headers, two spaces apart), and the
    widths used. Given `widths` (a watch's later rows), a column is never narrower than before,
    so rows printed one at a time stay under the header they were first printed with."""
    body = [[_cell(row.get(key)) for key, _ in columns] for row in rows]
    return grid([title for _, title in columns], body, widths=widths)


def table(rows: Iterable[Mapping[str, Any]], columns: list[tuple[str, str]]) -> str:
    """Plain aligned columns in kubectl's style (upper-case headers, two spaces apart)."""
    return "\n".join(table_lines(rows, columns)[0])


def human_age(seconds: float) -> str:
    """A duration as kubectl prints ages: two units while the smaller one still matters (`5m30s`
    under 10 minutes, `3h15m` under 8 hours, `2d4h` under 8 days, `1y20d` under 8 years), one
    unit after that. A time slightly in the future (clock skew) is `0s`; far in the future,
    `<invalid>`, as kubectl says."""
    if int(seconds) < -1:  # truncated toward zero first, as kubectl does
        return "<invalid>"
    s = max(0, int(seconds))
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m" if s % 60 == 0 else f"{m}m{s % 60}s"
    if m < 180:
        return f"{m}m"
    if h < 8:
        return f"{h}h" if m % 60 == 0 else f"{h}h{m % 60}m"
    if h < 48:
        return f"{h}h"
    if h < 192:
        return f"{d}d" if h % 24 == 0 else f"{d}d{h % 24}h"
    if d < 730:
        return f"{d}d"
    y = d // 365
    if y < 8:
        return f"{y}y" if d % 365 == 0 else f"{y}y{d % 365}d"
    return f"{y}y"


def age(timestamp: Any, now: datetime | None = None) -> str:
    """The age of an RFC 3339 timestamp as the API server writes them; `-` when absent or
    unreadable (a table cell must never fail the whole listing)."""
    if not isinstance(timestamp, str) or not timestamp:
        return "-"
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return human_age(((now or datetime.now(UTC)) - then).total_seconds())
