"""Who may be consuming which partition: the ConfigMaps, corrected by what only the operator and
Kafka still know.

The ConfigMaps are what the operator reads back every poll, but a member's sidecar acts on the
last document it *accepted*, which a ConfigMap can stop showing:
- deleted by hand: the sidecar keeps its last good document;
- made unreadable, or rewritten at the same or a lower epoch: the sidecar refuses it and keeps
  its last good document.
In assign mode nothing fences a consumer, so a partition such a member still holds must be
revoked and acknowledged before anyone else is given it. Three sources say what a member holds,
in this order:
1. its ConfigMap, when the sidecar would accept it (readable, and not older than what this
   operator last wrote for the member);
2. the document this operator last wrote or read for it (`PolicyMemory.documents`);
3. after an operator restart with neither: the partitions whose latest commit names the member
   in its metadata (a sidecar commits what it consumes, with its member and epoch).

A pod that still runs but is no longer a member (it stopped matching the selector, or is
terminating) may also still consume what its document gives it: it *lingers* until it has
acknowledged giving everything up, or its pod stops running.

Pure: ConfigMap bodies, pods and offsets in, documents out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from kafka_rebalance_common import wire
from kafka_rebalance_common.assignment import WireAssignment
from kafka_rebalance_common.wire import AssignmentDocument

from kafka_rebalance_operator import names
from kafka_rebalance_operator.kube.assignment_doc import CurrentState, held
from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.lag import PartitionOffsets, PolicyOffsets
from kafka_rebalance_operator.partition_key import PartitionKey


def accepted_by_sidecar(shown: AssignmentDocument | None, written: AssignmentDocument) -> bool:
    """Would a sidecar that holds `written` act on `shown`? On a document of another
    incarnation of the policy (another `policyUid`: the sidecar takes a new incarnation whatever
    its epoch, and then refuses the one it replaced), on a later epoch, the same plan again, or
    the same epoch re-written by a newer operator leader (a higher `leaderTerm`); everything
    else it refuses (the sidecar tracker's rules). Where the sidecar might act on `shown`, the
    member counts as holding what `shown` gives it."""
    if shown is None:
        return False
    if shown.policy_uid and written.policy_uid and shown.policy_uid != written.policy_uid:
        return True
    if shown.epoch > written.epoch or shown == written:
        return True
    return (
        shown.epoch == written.epoch
        and shown.leader_term is not None
        and written.leader_term is not None
        and shown.leader_term > written.leader_term
    )


def outside_group(
    apply_mode: str,
    group: Mapping[str, Any] | None,
    current: CurrentState,
    members: Collection[str],
    committers: Mapping[PartitionKey, wire.CommitMetadata],
) -> tuple[str, ...]:
    """`group` mode: the members that consume outside the consumer group. Such a member's
    document gives it partitions, it is not in the group as describe_groups shows it
    (`group_instance_id` = pod name), and the latest commit of one of those partitions names it:
    it consumes them with manual `assign()` (its sidecar still runs in assign mode, after
    `apply.mode` was switched to group). No rebalance fences it, so a partition moves away from
    it only through a revoke it acknowledges, as in assign mode. A member that has never
    committed (no sidecar running yet) is not counted: it consumes nothing. Empty in the other
    modes and when the group could not be described (then nothing is known)."""
    if apply_mode != "group" or group is None:
        return ()
    joined = in_group(group)
    committed_by = {(key, m.member) for key, m in committers.items()}
    outside = []
    for member in sorted(members):
        document = current.by_member.get(member)
        if member in joined or document is None:
            continue
        held = {
            (topic, p)
            for topic, parts in (*document.partitions.items(), *document.revoking.items())
            for p in parts
        }
        if any((key, member) in committed_by for key in held):
            outside.append(member)
    return tuple(outside)


def in_group(group: Mapping[str, Any] | None) -> frozenset[str]:
    """The members describe_groups shows in the consumer group (empty when not described)."""
    if group is None:
        return frozenset()
    return frozenset(str(m.get("group_instance_id") or "") for m in group.get("members") or [])


def with_memory(
    current: CurrentState, remembered: Mapping[str, AssignmentDocument]
) -> CurrentState:
    """`current` with each remembered member's document put back where its ConfigMap is gone,
    unreadable or one its sidecar would refuse. The ConfigMaps themselves stay as read, so the
    poll's diff rewrites them (the repair)."""
    by_member = dict(current.by_member)
    changed = False
    for member, written in remembered.items():
        if not accepted_by_sidecar(by_member.get(member), written):
            by_member[member] = written
            changed = True
    if not changed:
        return current
    return CurrentState(dict(current.configmaps), by_member)


def last_committers(
    offsets: Mapping[PartitionKey, PartitionOffsets],
) -> dict[PartitionKey, wire.CommitMetadata]:
    """The sidecar metadata of each partition's latest commit (other clients' commits left out)."""
    found: dict[PartitionKey, wire.CommitMetadata] = {}
    if isinstance(offsets, PolicyOffsets):  # columnar: only the partitions with metadata
        notes: Iterable[tuple[PartitionKey, str | None]] = offsets.with_metadata()
    else:
        notes = ((key, read.metadata) for key, read in offsets.items())
    decoded: dict[str, wire.CommitMetadata | None] = {}  # one decode per distinct text
    for key, text in notes:
        if not text:
            continue
        if text not in decoded:
            try:
                decoded[text] = wire.decode_commit_metadata(text)
            except wire.MetadataError:
                decoded[text] = None
        metadata = decoded[text]
        if metadata is not None:
            found[key] = metadata
    return found


def with_commits(
    current: CurrentState,
    group: str,
    members: Collection[str],
    committers: Mapping[PartitionKey, wire.CommitMetadata],
) -> CurrentState:
    """For each member with no document at all, the partitions its own commits were last made
    by, as long as no other document claims them: an operator that lost its memory still does
    not hand those to someone else without a revoke. The document's epoch is the highest such
    commit's, so the next epoch written is above it."""
    candidates = {
        key: metadata
        for key, metadata in committers.items()
        if metadata.member not in current.by_member and metadata.member in members
    }
    if not candidates:  # the usual poll: every committing member has its document
        return current
    claimed = {
        (topic, p)
        for document in current.by_member.values()
        for topic, parts in (*document.partitions.items(), *document.revoking.items())
        for p in parts
    }
    from_commits: WireAssignment = {}
    epochs: dict[str, int] = {}
    for (topic, p), metadata in sorted(candidates.items()):
        member = metadata.member
        if (topic, p) in claimed:
            continue
        from_commits.setdefault(member, {}).setdefault(topic, []).append(p)
        epochs[member] = max(epochs.get(member, 0), metadata.epoch)
    if not from_commits:
        return current
    by_member = dict(current.by_member)
    for member, partitions in from_commits.items():
        by_member[member] = held(
            AssignmentDocument(
                group=group, member=member, epoch=epochs[member], partitions=partitions
            )
        )
    return CurrentState(dict(current.configmaps), by_member)


def lingering(
    current: CurrentState, members: Collection[str], pods: Iterable[PodSummary]
) -> dict[str, AssignmentDocument]:
    """Documents of pods that are not members but still run (terminating, or no longer matching
    the selector) and still hold or are giving up partitions: their sidecars may consume those."""
    running = {pod.name for pod in pods if pod.phase == "Running"}
    return {
        member: document
        for member, document in sorted(current.by_member.items())
        if member not in members
        and member in running
        and (document.partitions or document.revoking)
    }


def unwritten(current: CurrentState, policy: str) -> list[str]:
    """Members whose ConfigMap does not show the document they act on (restored from memory or
    read off their commits): the plan in place has to be written again, as if a member had
    joined."""
    missing = []
    for member, document in sorted(current.by_member.items()):
        shown = current.configmaps.get(names.configmap_name(policy, member))
        if shown is None or shown.document is None or shown.document != document:
            missing.append(member)
    return missing


def remember_read(remembered: dict[str, AssignmentDocument], current: CurrentState) -> None:
    """Adopt what the ConfigMaps show where a sidecar would act on it (a later epoch written by
    another replica of the operator, or by hand): the memory never lags what members may hold."""
    for member, document in current.by_member.items():
        kept = remembered.get(member)
        if kept is None or accepted_by_sidecar(document, kept):
            remembered[member] = replace(document, generated_at="")


def remember_written(
    remembered: dict[str, AssignmentDocument], documents: Mapping[str, AssignmentDocument]
) -> None:
    """After a successful write of the whole desired state: exactly these documents are what
    the members act on from now (members without one had their ConfigMap deleted)."""
    remembered.clear()
    remembered.update({m: replace(d, generated_at="") for m, d in documents.items()})
