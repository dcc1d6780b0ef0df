"""A group is (cluster id, group id): which policy may manage it.

Policies name their cluster by bootstrap servers, and one cluster has many spellings (another
DNS alias, an IP address, another listener's port). So the servers only say which cluster a
policy *may* name; the brokers say which one it does: each policy's poll learns its cluster id
(DescribeCluster, cached per connection by `kafka_io.KafkaObserver.cluster_id`) and records it
in the operator's `ClusterIds`; a poll then compares its cluster id with those of the older
policies for the same group id (`verdict`), in every namespace the operator watches.

Invariants:
- Which policy wins is as before: the oldest (creationTimestamp, then namespace, then name)
  policy for the group, in any watched namespace; every younger one is Stalled
  (ConflictingPolicy), publishes nothing and writes no ConfigMap.
- Servers written alike (lower-cased, in any order) are one cluster even before either policy
  is identified: such a duplicate is refused before any Kafka call.
- A policy whose cluster id is unknown is not active (its poll stops before planning).
- An older policy for the group that has not finished a poll under its current servers since
  this operator started holds a younger one back (ClusterIdentityPending) until it has: so
  which policy runs does not depend on which poll ran first. An older policy that was polled
  and could not be identified (cluster unreachable, a bad Secret, ...) holds nobody back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PENDING_REASON = "ClusterIdentityPending"
CONFLICT_REASON = "ConflictingPolicy"
UNKNOWN_REASON = "ClusterUnknown"

PolicyKey = tuple[str, str]  # (namespace, name)


def servers_of(text: str) -> frozenset[str]:
    """Bootstrap servers as written, lower-cased, without blanks: the string rule's terms."""
    return frozenset(s.strip().lower() for s in text.split(",") if s.strip())


@dataclass(frozen=True, order=True)
class Rival:
    """An older policy for the same group id (the index entry of `handlers`). Ordered as the
    winner is chosen: creationTimestamp, then namespace, then name."""

    created: str
    namespace: str
    name: str
    servers: frozenset[str]

    def shown_from(self, namespace: str) -> str:
        """Its name as a policy in `namespace` names it: alone in the same namespace."""
        return self.name if self.namespace == namespace else f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Identity:
    """What a policy's last finished poll learned: under which servers, which cluster id
    (None: not identified)."""

    servers: frozenset[str]
    cluster_id: str | None


class ClusterIds:
    """The cluster id of every policy as its polls learn it (thread-safe: polls run in worker
    threads). A policy absent here has not finished a poll since this process started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[PolicyKey, Identity] = {}

    def learned(self, policy: PolicyKey, servers: frozenset[str], cluster_id: str) -> None:
        with self._lock:
            self._known[policy] = Identity(servers, cluster_id)

    def polled(self, policy: PolicyKey, servers: frozenset[str]) -> None:
        """A poll of `policy` under `servers` ended: unless it learned the cluster id under
        them, the policy is known to be unidentified (it holds no younger policy back)."""
        with self._lock:
            known = self._known.get(policy)
            if known is None or known.servers != servers:
                self._known[policy] = Identity(servers, None)

    def forget(self, policy: PolicyKey) -> None:
        with self._lock:
            self._known.pop(policy, None)

    def snapshot(self) -> dict[PolicyKey, Identity]:
        with self._lock:
            return dict(self._known)


@dataclass(frozen=True)
class Verdict:
    reason: str  # CONFLICT_REASON or PENDING_REASON
    rival: Rival


def by_servers(servers: frozenset[str], rivals: Iterable[Rival]) -> Rival | None:
    """The oldest rival that writes a server as this policy does (no Kafka call needed)."""
    return min((r for r in rivals if r.servers & servers), default=None)


def verdict(
    servers: frozenset[str],
    cluster_id: str,
    rivals: Iterable[Rival],
    known: Mapping[PolicyKey, Identity],
) -> Verdict | None:
    """None when this policy (on `cluster_id`, named by `servers`) may manage its group;
    else the oldest rival that manages the group on the same cluster (ConflictingPolicy), or,
    when none does, the oldest whose cluster is not known yet (ClusterIdentityPending). Pure:
    `known` is a `ClusterIds.snapshot()`."""
    pending: Rival | None = None
    for rival in sorted(rivals):
        identity = known.get((rival.namespace, rival.name))
        if rival.servers & servers:
            return Verdict(CONFLICT_REASON, rival)
        if identity is None or identity.servers != rival.servers:
            pending = pending or rival  # not polled under its current servers yet
        elif identity.cluster_id == cluster_id:
            return Verdict(CONFLICT_REASON, rival)
    return Verdict(PENDING_REASON, pending) if pending is not None else None
