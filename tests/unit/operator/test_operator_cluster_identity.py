"""A group is (cluster id, group id): the pure verdict of `cluster_identity` on which policy may
manage a group, and the record of what each policy's polls learned."""

from __future__ import annotations

from kafka_rebalance_operator.kafka.cluster_identity import (
    CONFLICT_REASON,
    PENDING_REASON,
    ClusterIds,
    Rival,
    by_servers,
    servers_of,
    verdict,
)

A = servers_of("127.0.0.1:9092")
ALIAS = servers_of("localhost:9092")
OTHER = servers_of("kafka-us:9092")


def rival(namespace: str, name: str, created: str, servers: frozenset[str]) -> Rival:
    return Rival(created, namespace, name, servers)


def test_an_older_policy_on_the_same_cluster_under_an_alias_wins() -> None:
    ids = ClusterIds()
    first = rival("team-a", "orders", "2026-11-24T01:00:00Z", A)
    ids.learned(("team-a", "orders"), A, "cluster-1")
    found = verdict(ALIAS, "cluster-1", [first], ids.snapshot())
    assert found is not None and (found.reason, found.rival) == (CONFLICT_REASON, first)
    assert found.rival.shown_from("team-b") == "team-a/orders"
    assert found.rival.shown_from("team-a") == "orders"


def test_another_cluster_behind_other_servers_is_no_conflict() -> None:
    ids = ClusterIds()
    ids.learned(("a", "p"), OTHER, "cluster-us")
    assert verdict(A, "cluster-eu", [rival("a", "p", "t1", OTHER)], ids.snapshot()) is None


def test_servers_written_alike_conflict_before_anything_is_known() -> None:
    older = rival("a", "p", "t1", servers_of("KAFKA:9092, other:9092"))
    assert by_servers(servers_of("kafka:9092"), [older]) == older
    assert by_servers(ALIAS, [older]) is None
    found = verdict(servers_of("kafka:9092"), "any", [older], {})
    assert found is not None and found.reason == CONFLICT_REASON


def test_an_older_policy_not_polled_yet_holds_a_younger_back_until_it_is() -> None:
    ids = ClusterIds()
    older = rival("a", "p", "t1", OTHER)
    found = verdict(A, "cluster-1", [older], ids.snapshot())
    assert found is not None and (found.reason, found.rival) == (PENDING_REASON, older)
    ids.polled(("a", "p"), OTHER)  # polled, not identified (unreachable): holds nobody back
    assert verdict(A, "cluster-1", [older], ids.snapshot()) is None
    ids.learned(("a", "p"), OTHER, "cluster-1")  # reachable now: same cluster, it wins
    found = verdict(A, "cluster-1", [older], ids.snapshot())
    assert found is not None and found.reason == CONFLICT_REASON
    ids.polled(("a", "p"), OTHER)  # a later poll that did not learn it keeps what it learned
    assert verdict(A, "cluster-1", [older], ids.snapshot()) is not None


def test_what_was_learned_under_other_servers_does_not_count() -> None:
    ids = ClusterIds()
    ids.learned(("a", "p"), OTHER, "cluster-us")
    moved = rival("a", "p", "t1", ALIAS)  # its spec now names other servers: not polled yet
    found = verdict(A, "cluster-eu", [moved], ids.snapshot())
    assert found is not None and found.reason == PENDING_REASON
    ids.forget(("a", "p"))
    assert ids.snapshot() == {}


def test_the_oldest_conflicting_rival_is_named_and_wins_over_a_pending_one() -> None:
    ids = ClusterIds()
    pending = rival("z", "first", "t0", OTHER)
    second = rival("b", "second", "t2", ALIAS)
    third = rival("a", "third", "t2", ALIAS)  # same time as `second`: namespace decides
    ids.learned(("b", "second"), ALIAS, "c1")
    ids.learned(("a", "third"), ALIAS, "c1")
    found = verdict(A, "c1", [second, pending, third], ids.snapshot())
    assert found is not None and (found.reason, found.rival) == (CONFLICT_REASON, third)
