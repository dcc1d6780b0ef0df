"""One groupId on one Kafka cluster, one policy: which policy wins, across watched namespaces.
The index (`handlers`) names the older policies for the group; the cluster ids their polls
learned decide which of them manage it on the same cluster (`cluster_identity.verdict`)."""

from __future__ import annotations

from typing import Any

from kafka_rebalance_operator.handlers import _rivals, policies_by_namespace
from kafka_rebalance_operator.kafka.cluster_identity import ClusterIds, servers_of, verdict

# what the brokers behind each spelling report (one cluster under three names, and another)
CLUSTER_IDS = {
    "kafka:9092": "eu",
    "other:9092": "eu",
    "kafka.example:9092": "eu",
    "10.0.0.5:9092": "eu",
    "kafka-eu:9092": "eu",
    "kafka-us:9092": "us",
}


def _conflict(namespace: str, name: str, spec: Any, index: dict[str, list]) -> str | None:
    """The winner as a poll of (namespace, name) names it, once every policy was polled."""
    ids = ClusterIds()
    for other_namespace, stored in index.items():
        for _, other, _, servers in stored:
            ids.learned((other_namespace, other), frozenset(servers), CLUSTER_IDS[servers[0]])
    mine = next(e for e in index[namespace] if e[1] == name)
    found = verdict(
        frozenset(mine[3]),
        CLUSTER_IDS[mine[3][0]],
        _rivals(namespace, name, spec, index),
        ids.snapshot(),
    )
    return None if found is None else found.rival.shown_from(namespace)


def _valid(group: str, servers: str) -> dict:
    return {
        "groupId": group,
        "kafka": {"bootstrapServers": servers},
        "topics": ["orders"],
        "members": {"selector": {"matchLabels": {"app": "c"}}},
    }


def _entry(
    namespace: str, name: str, created: str, group: str, servers: str, **extra: object
) -> dict:
    spec = {**_valid(group, servers), **extra}
    return policies_by_namespace(namespace, name, spec, {"creationTimestamp": created})


def _index(*entries: dict) -> dict[str, list]:
    index: dict[str, list] = {}
    for entry in entries:
        for namespace, value in entry.items():
            index.setdefault(namespace, []).append(value)
    return index


def _spec(group: str) -> dict:
    return {"groupId": group}


def test_the_older_policy_in_another_namespace_wins_and_is_named_with_its_namespace() -> None:
    index = _index(
        _entry("team-a", "orders", "2026-11-24T01:00:00Z", "g", "kafka:9092"),
        _entry("team-b", "orders-copy", "2026-11-24T02:00:00Z", "g", "Kafka:9092, other:9092"),
    )
    assert _conflict("team-b", "orders-copy", _spec("g"), index) == "team-a/orders"
    assert _conflict("team-a", "orders", _spec("g"), index) is None


def test_the_same_namespace_names_the_policy_alone() -> None:
    index = _index(
        _entry("ns", "first", "2026-11-24T01:00:00Z", "g", "kafka:9092"),
        _entry("ns", "second", "2026-11-24T01:00:01Z", "g", "kafka:9092"),
    )
    assert _conflict("ns", "second", _spec("g"), index) == "first"


def test_another_cluster_or_another_group_is_no_conflict() -> None:
    index = _index(
        _entry("a", "p", "2026-11-24T01:00:00Z", "g", "kafka-eu:9092"),
        _entry("b", "q", "2026-11-24T02:00:00Z", "g", "kafka-us:9092"),
        _entry("c", "r", "2026-11-24T03:00:00Z", "h", "kafka-eu:9092"),
    )
    assert _conflict("b", "q", _spec("g"), index) is None
    assert _conflict("c", "r", _spec("h"), index) is None


def test_equal_creation_times_are_ordered_by_namespace_then_name_on_both_sides() -> None:
    index = _index(
        _entry("b", "x", "2026-11-24T01:00:00Z", "g", "kafka:9092"),
        _entry("a", "y", "2026-11-24T01:00:00Z", "g", "kafka:9092"),
    )
    assert _conflict("b", "x", _spec("g"), index) == "a/y"
    assert _conflict("a", "y", _spec("g"), index) is None


def test_an_invalid_policy_holds_no_group() -> None:
    invalid = _entry(
        "a", "broken", "2026-11-24T01:00:00Z", "g", "kafka:9092", topics=None, topicPattern="(?=x)"
    )
    assert invalid == {}, "an InvalidSpec policy is not indexed"
    index = _index(invalid, _entry("b", "good", "2026-11-24T02:00:00Z", "g", "kafka:9092"))
    assert _conflict("b", "good", _spec("g"), index) is None


def test_host_aliases_of_one_cluster_are_one_cluster() -> None:
    index = _index(
        _entry("a", "p", "2026-11-24T01:00:00Z", "g", "kafka.example:9092"),
        _entry("b", "q", "2026-11-24T02:00:00Z", "g", "10.0.0.5:9092"),
    )
    assert _conflict("b", "q", _spec("g"), index) == "a/p"
    assert _conflict("a", "p", _spec("g"), index) is None


def test_the_index_names_only_older_policies_for_the_same_group_oldest_first() -> None:
    index = _index(
        _entry("c", "young", "2026-11-24T03:00:00Z", "g", "kafka:9092"),
        _entry("b", "old", "2026-11-24T01:00:00Z", "g", "kafka-us:9092"),
        _entry("a", "older", "2026-11-24T00:00:00Z", "g", "Kafka:9092"),
        _entry("a", "other-group", "2026-11-24T00:00:00Z", "h", "kafka:9092"),
    )
    rivals = _rivals("c", "young", _spec("g"), index)
    assert [(r.namespace, r.name) for r in rivals] == [("a", "older"), ("b", "old")]
    assert rivals[0].servers == servers_of("kafka:9092")
    assert _rivals("a", "older", _spec("g"), index) == ()
    assert _rivals("z", "not-indexed", _spec("g"), index) == ()
