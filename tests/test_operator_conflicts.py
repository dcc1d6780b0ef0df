"""One groupId on one Kafka cluster, one policy: which policy wins, across watched namespaces."""

from __future__ import annotations

from kafka_rebalance_operator.handlers import _conflict, policies_by_namespace


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


def test_host_aliases_of_one_cluster_are_not_recognised() -> None:
    # documented (docs/troubleshooting.md, ConflictingPolicy): servers compare as written
    index = _index(
        _entry("a", "p", "2026-11-24T01:00:00Z", "g", "kafka.example:9092"),
        _entry("b", "q", "2026-11-24T02:00:00Z", "g", "10.0.0.5:9092"),
    )
    assert _conflict("b", "q", _spec("g"), index) is None
