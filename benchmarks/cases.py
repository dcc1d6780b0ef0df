"""Benchmark inputs, written as plan-contract documents so both sides read the very same case.

The shapes follow Kafka's own: the JMH assignor grid (members x partitions-per-member x topics,
homogeneous or heterogeneous subscriptions, full or incremental assignment), the 1M-partition
scale test of AbstractStickyAssignorTest, and skewed lag workloads for plan quality.

Incremental cases differ from Kafka's JMH on purpose: ClientSideAssignorBenchmark builds the
incremental subscriptions but never passes them to the measured call, so its "incremental" figures
are really fresh assignments (research note, section 5.1). Here the owned partitions are in the
document and both sides decode them.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any

Document = dict[str, Any]

SUBSCRIPTIONS = ("homogeneous", "heterogeneous")
EVENTS = ("full", "join", "leave")
HETEROGENEOUS_BUCKETS = 5  # Kafka's JMH: min(5, members) disjoint member buckets


@dataclass
class Case:
    """One benchmark input plus what the report needs to describe it."""

    name: str
    document: Document
    identical: bool  # identical subscriptions (Kafka's constrained / homogeneous path)
    previous: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # owned, for moves
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return sum(self.document["topics"].values())

    @property
    def members(self) -> int:
        return len(self.document["members"])


def names(prefix: str, count: int) -> list[str]:
    """Zero-padded ids, so Python's and Java's string orders agree."""
    width = len(str(max(count - 1, 0)))
    return [f"{prefix}{i:0{width}d}" for i in range(count)]


def balanced_previous(
    topics: dict[str, int], subscriptions: dict[str, list[str]]
) -> dict[str, dict[str, list[int]]]:
    """A valid, count-balanced previous assignment: topics with the fewest subscribers first (as
    Kafka's general path orders them), each partition to the subscriber holding fewest so far. It
    stands for "the group was settled before the event" and is fed to every assignor alike, so no
    side starts from its own favourite layout."""
    member_ids = sorted(subscriptions)
    if len({tuple(t) for t in subscriptions.values()}) == 1:
        # Identical subscriptions: deal round robin, the rotation running on across topics.
        dealt: dict[str, dict[str, list[int]]] = {member: {} for member in member_ids}
        index = 0
        for topic in sorted(subscriptions[member_ids[0]]):
            for partition in range(topics.get(topic, 0)):
                member = member_ids[index % len(member_ids)]
                dealt[member].setdefault(topic, []).append(partition)
                index += 1
        return dealt
    subscribers: dict[str, list[str]] = {}
    for member, member_topics in subscriptions.items():
        for topic in member_topics:
            subscribers.setdefault(topic, []).append(member)
    counts = dict.fromkeys(subscriptions, 0)
    result: dict[str, dict[str, list[int]]] = {member: {} for member in subscriptions}
    for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        if topic not in topics:
            continue
        heap = [(counts[m], m) for m in subscribers[topic]]
        heapq.heapify(heap)
        for partition in range(topics[topic]):
            count, member = heap[0]
            result[member].setdefault(topic, []).append(partition)
            heapq.heapreplace(heap, (count + 1, member))
        for count, member in heap:
            counts[member] = count
    return result


def _document(
    topics: dict[str, int],
    subscriptions: dict[str, list[str]],
    owned: dict[str, dict[str, list[int]]] | None,
) -> Document:
    members: dict[str, Any] = {}
    for member, member_topics in subscriptions.items():
        spec: dict[str, Any] = {"topics": member_topics}
        if owned and owned.get(member):
            spec["owned"] = owned[member]
            spec["generation"] = 1
        members[member] = spec
    return {"topics": topics, "members": members}


def _subscriptions(member_ids: list[str], topic_ids: list[str], kind: str) -> dict[str, list[str]]:
    if kind == "homogeneous":
        return {member: topic_ids for member in member_ids}
    buckets = min(HETEROGENEOUS_BUCKETS, len(member_ids))
    result: dict[str, list[str]] = {}
    for index, member in enumerate(member_ids):
        bucket = index * buckets // len(member_ids)
        lo = bucket * len(topic_ids) // buckets
        hi = (bucket + 1) * len(topic_ids) // buckets
        result[member] = topic_ids[lo:hi] or topic_ids[-1:]
    return result


def jmh_case(
    members: int, ratio: int, topic_count: int, subscription: str, event: str
) -> Case | None:
    """One cell of Kafka's assignor JMH grid; None when integer division leaves no partitions
    (as Kafka's grid does for e.g. 100 members x 5 / 1000 topics)."""
    per_topic = members * ratio // topic_count
    if per_topic == 0:
        return None
    topic_ids = names("t", topic_count)
    topics = dict.fromkeys(topic_ids, per_topic)
    member_ids = names("m", members)
    subs = _subscriptions(member_ids, topic_ids, subscription)
    previous: dict[str, dict[str, list[int]]] = {}
    if event == "join":
        # Kafka's INCREMENTAL: members-1 settled, one more (same topics as its neighbour) joins.
        settled = {m: subs[m] for m in member_ids[:-1]}
        previous = balanced_previous(topics, settled)
        subs = dict(subs)
        subs[member_ids[-1]] = subs[member_ids[-2]]
    elif event == "leave":
        previous = balanced_previous(topics, subs)
        gone = member_ids[len(member_ids) // 2]
        del previous[gone]
        subs = {m: t for m, t in subs.items() if m != gone}
    name = f"{members}m x{ratio} {topic_count}t {subscription[:6]} {event}"
    return Case(
        name=name,
        document=_document(topics, subs, previous),
        identical=subscription == "homogeneous",
        previous=previous,
        meta={
            "members": members,
            "ratio": ratio,
            "topics": topic_count,
            "subscription": subscription,
            "event": event,
        },
    )


def large_case(
    general: bool, owned: bool, topic_count: int = 500, per_topic: int = 2000, members: int = 2000
) -> Case:
    """AbstractStickyAssignorTest's 1M-partition cases: 500 topics x 2,000 partitions, 2,000
    members. General: the last member subscribes to one topic only. Owned: the second round of
    the test (a settled assignment fed back, the first member owning nothing)."""
    topic_ids = names("t", topic_count)
    topics = dict.fromkeys(topic_ids, per_topic)
    member_ids = names("m", members)
    subs = dict.fromkeys(member_ids, topic_ids)
    if general:
        subs[member_ids[-1]] = topic_ids[:1]
    previous: dict[str, dict[str, list[int]]] = {}
    if owned:
        previous = balanced_previous(topics, subs)
        previous[member_ids[0]] = {}
    kind = "general" if general else "identical"
    name = f"{topic_count * per_topic // 1000}k x {members}m {kind} {'owned' if owned else 'fresh'}"
    return Case(
        name=name,
        document=_document(topics, subs, previous),
        identical=not general,
        previous=previous,
        meta={"members": members, "topics": topic_count, "kind": kind, "owned": owned},
    )


# ------------------------------------------------------------------------------ skewed workloads


def pareto_lags(rng: random.Random, count: int, alpha: float, scale: float) -> list[int]:
    """Heavy-tailed offset lags (Pareto, alpha 1.16 is the 80/20 rule)."""
    return [int(scale * rng.paretovariate(alpha)) for _ in range(count)]


def skewed_case(
    seed: int,
    topic_count: int,
    per_topic: int,
    members: int,
    alpha: float = 1.16,
    weights: tuple[float, ...] = (1.0, 2.0, 4.0),
) -> Case:
    """A group with Pareto lags and member weights drawn from `weights`; every member subscribes
    to every topic (KIP-169's setting)."""
    rng = random.Random(seed)
    topic_ids = names("t", topic_count)
    topics = dict.fromkeys(topic_ids, per_topic)
    lag = {topic: pareto_lags(rng, per_topic, alpha, 1000.0) for topic in topic_ids}
    member_docs = {
        member: {"topics": topic_ids, "weight": rng.choice(weights)}
        for member in names("m", members)
    }
    document = {"topics": topics, "members": member_docs, "lag": lag}
    tag = "/".join(f"{w:g}" for w in weights)
    return Case(
        name=f"{topic_count}t x {per_topic}p {members}m w{tag} s{seed}",
        document=document,
        identical=True,
        meta={"topics": topic_count, "per_topic": per_topic, "members": members, "seed": seed},
    )


def with_owned(document: Document, assignment: dict[str, dict[str, list[int]]]) -> Document:
    """The next round's input: `assignment` becomes every member's owned partitions."""
    members = {}
    for member, spec in document["members"].items():
        spec = dict(spec)
        owned = assignment.get(member, {})
        spec["owned"] = owned
        spec["generation"] = spec.get("generation", 0) + 1
        members[member] = spec
    return {**document, "members": members}


def perturbed_lags(document: Document, rng: random.Random, fraction: float) -> Document:
    """Lags moved by up to +-fraction each, as between two polls of a busy group."""
    lag = {
        topic: [max(0, int(v * (1 + rng.uniform(-fraction, fraction)))) for v in values]
        for topic, values in document["lag"].items()
    }
    return {**document, "lag": lag}
