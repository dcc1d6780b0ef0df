"""The per-pod ConfigMap: rendering the desired ones and reading back the current ones.

The ConfigMaps are the source of truth for "what is applied now": the operator re-reads them on
every poll, so a restart, a lost status write or a hand-deleted ConfigMap is noticed and
repaired rather than remembered wrongly. The document is the shared wire type
(`kafka_rebalance_common.wire.AssignmentDocument`), held compactly (`held`), and its text the
shared wire format, which the sidecar decodes with the same code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from kafka_rebalance_common import wire
from kafka_rebalance_common.assignment import Assignment
from kafka_rebalance_common.wire import AssignmentDocument

from kafka_rebalance_operator import names
from kafka_rebalance_operator.partition_sets import TopicPartitions


def held(document: AssignmentDocument) -> AssignmentDocument:
    """`document` as the operator holds it: its partitions and revoking as `TopicPartitions`
    (compact and read-only: a thousand members' documents are held for every poll and between
    polls), topic names interned (those documents share one string per topic)."""
    return replace(
        document,
        partitions=TopicPartitions({sys.intern(t): p for t, p in document.partitions.items()}),
        revoking=TopicPartitions({sys.intern(t): p for t, p in document.revoking.items()}),
    )


def document_text(document: AssignmentDocument) -> str:
    """The text the sidecar reads: version 1 while it fits a ConfigMap, else version 2."""
    return wire.encode_document(document)


@dataclass(frozen=True)
class CurrentConfigMap:
    name: str
    document: AssignmentDocument | None  # None: unreadable, will be rewritten
    resource_version: str = ""
    # the ConsumerGroupPolicy names in its ownerReferences (None: not known, e.g. built in tests)
    owners: tuple[str, ...] | None = None

    def owned_by(self, policy: str) -> bool:
        """Whether a policy of this name owns it (an earlier incarnation counts): only such a
        ConfigMap is ever written over (`ForeignConfigMap` otherwise)."""
        return self.owners is None or policy in self.owners


@dataclass(frozen=True)
class CurrentState:
    """What the policy's ConfigMaps say is applied."""

    configmaps: dict[str, CurrentConfigMap]  # ConfigMap name -> content
    by_member: dict[str, AssignmentDocument]

    @cached_property
    def epoch(self) -> int:
        """The highest epoch any document carries (computed once: a poll asks per member)."""
        return max((d.epoch for d in self.by_member.values()), default=0)

    def applied_hash(self) -> str | None:
        """The plan hash every readable ConfigMap agrees on at the top epoch, else None."""
        top = [d for d in self.by_member.values() if d.epoch == self.epoch]
        hashes = {d.plan_hash for d in top}
        return hashes.pop() if len(hashes) == 1 else None

    def owned(self, members: Iterable[str]) -> Assignment:
        """What the documents of `members` give them (no copy: the documents are read-only)."""
        wanted = set(members)
        return Assignment({m: d.partitions for m, d in self.by_member.items() if m in wanted})


def parse_document(text: str | None) -> AssignmentDocument | None:
    """An `assignment.json` (any version the wire module reads) back into a document; None when
    it is not one (the ConfigMap is then rewritten)."""
    if not text:
        return None
    try:
        return held(wire.decode_document(text))
    except wire.DocumentError:
        return None


def read_current(configmaps: Iterable[Mapping[str, Any]]) -> CurrentState:
    """CurrentState from ConfigMap bodies (as listed by the policy's label)."""
    current: dict[str, CurrentConfigMap] = {}
    by_member: dict[str, AssignmentDocument] = {}
    for body in configmaps:
        metadata = body.get("metadata") or {}
        name = metadata.get("name", "")
        document = parse_document((body.get("data") or {}).get(names.DATA_KEY))
        owners = tuple(
            str(o.get("name"))
            for o in metadata.get("ownerReferences") or []
            if isinstance(o, Mapping)
            and o.get("kind") == names.KIND
            and o.get("apiVersion") == names.API_VERSION
        )
        current[name] = CurrentConfigMap(
            name, document, metadata.get("resourceVersion", ""), owners
        )
        if document is not None:
            by_member[document.member] = document
    return CurrentState(current, by_member)


def render_documents(
    group: str,
    assignment: Assignment,
    epoch: int,
    plan_hash: str,
    generated_at: str,
    revoking: Assignment | None = None,
    policy_uid: str = "",
    leader_term: int | None = None,
) -> dict[str, AssignmentDocument]:
    """Member -> the document it should read (`revoking`: assign mode's first hand-over step),
    stamped with the incarnation of the policy and the leadership term of the operator that
    writes it; held as `held` holds documents read back."""
    revoking = revoking or Assignment()
    return {
        member: AssignmentDocument(
            group=group,
            member=member,
            epoch=epoch,
            partitions=TopicPartitions({t: sorted(p) for t, p in sorted(topics.items()) if p}),
            plan_hash=plan_hash,
            generated_at=generated_at,
            revoking=TopicPartitions(
                {t: sorted(p) for t, p in sorted(revoking.partitions_of(member).items()) if p}
            ),
            policy_uid=policy_uid,
            leader_term=leader_term,
        )
        for member, topics in sorted(assignment.items())
    }


def configmap_body(
    policy: str,
    policy_uid: str,
    namespace: str,
    document: AssignmentDocument,
    resource_version: str = "",
) -> dict[str, Any]:
    """The full ConfigMap, owned by the policy so that deleting the policy deletes it.
    `resource_version`: the version this write replaces (the API server refuses the write with
    409 Conflict if the ConfigMap changed since); "" creates it."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": names.configmap_name(policy, document.member),
            "namespace": namespace,
            "labels": {
                names.LABEL_POLICY: names.label_value(policy),
                names.LABEL_MEMBER: names.label_value(document.member),
                names.LABEL_MANAGED_BY: names.MANAGER,
            },
            "ownerReferences": [
                {
                    "apiVersion": names.API_VERSION,
                    "kind": names.KIND,
                    "name": policy,
                    "uid": policy_uid,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "data": {names.DATA_KEY: document_text(document)},
    }
    if resource_version:
        body["metadata"]["resourceVersion"] = resource_version
    return body


@dataclass(frozen=True)
class Writes:
    """The ConfigMap writes that take the current state to the desired one."""

    upserts: list[AssignmentDocument]
    deletes: list[str]  # ConfigMap names

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)


def diff(policy: str, current: CurrentState, desired: Mapping[str, AssignmentDocument]) -> Writes:
    """Only the ConfigMaps whose plan differs are written; ConfigMaps of non-members go."""
    upserts = []
    wanted_names = set()
    for member, document in desired.items():
        name = names.configmap_name(policy, member)
        wanted_names.add(name)
        existing = current.configmaps.get(name)
        # equal documents are the same plan: generatedAt, policyUid and leaderTerm are not
        # part of a document's equality
        if existing is None or existing.document is None or existing.document != document:
            upserts.append(document)
    deletes = sorted(name for name in current.configmaps if name not in wanted_names)
    return Writes(upserts, deletes)


def older_terms(current: CurrentState, term: int | None) -> list[str]:
    """ConfigMaps whose document an operator of an older leadership term (or one without leader
    election) wrote: the new leader stamps its term on them before it grants anything, so that
    every later write of the deposed leader, conditioned on a version it read, is refused."""
    if term is None:
        return []
    return sorted(
        name
        for name, shown in current.configmaps.items()
        if shown.document is not None
        and (shown.document.leader_term is None or shown.document.leader_term < term)
    )
