"""Shared Kafka clients (`clients.SharedObservers`): policies that name the same servers and
credentials share one client; a Secret rotation gives a new one and the old is closed once no
policy uses it; a client whose reads failed is not handed out again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kafka_rebalance_common.replanning import Action
from kafka_rebalance_operator.kafka.clients import SharedObservers
from kafka_rebalance_operator.memory import PolicyMemory

from tests.operator_ports import MemoryKafka, MemoryObserver, Policy, memory_ports, pods

SASL = {"securityProtocol": "SASL_PLAINTEXT", "saslMechanism": "PLAIN", "saslUsername": "u"}


def _fleet(count: int, secrets: list[str] | None = None) -> tuple[MemoryKafka, list[Policy]]:
    """`count` policies on one in-memory cluster, each over its own topic and pods, all with
    the same ports (one pool) and the Secret named in `secrets` (default: "creds")."""
    kafka = MemoryKafka(topics={f"t{i}": 2 for i in range(count)})
    for i in range(count):
        kafka.lag(f"t{i}", {0: 5, 1: 5})
    ports = replace(memory_ports(kafka), kafka=SharedObservers(kafka))
    ports.secrets.items[("ns", "creds")] = {**SASL, "saslPassword": "p1-long-enough"}
    ports.secrets.items[("ns", "other")] = {**SASL, "saslPassword": "p9-long-enough"}
    fleet = []
    for i in range(count):
        secret = (secrets or ["creds"] * count)[i]
        spec: dict[str, Any] = {
            "groupId": f"g{i}",
            "kafka": {"bootstrapServers": "kafka:9092", "secretRef": {"name": secret}},
            "topics": [f"t{i}"],
            "members": {"selector": {"matchLabels": {"app": f"a{i}"}}},
            "strategy": "lag-aware",
            "rebalance": {"mode": "enforce", "cooldown": "0s"},
        }
        policy = Policy(spec, pods(2, app=f"a{i}"), ports)
        policy.uid = f"uid-{i}"
        fleet.append(policy)
    return kafka, fleet


def _pool(policy: Policy) -> SharedObservers:
    pool = policy.ports.kafka
    assert isinstance(pool, SharedObservers)
    return pool


def test_policies_with_the_same_servers_and_secret_share_one_client() -> None:
    kafka, fleet = _fleet(5)
    for policy in fleet:
        assert policy.poll().action is Action.APPLY
    assert len(kafka.connections) == 1 and _pool(fleet[0]).open == 1
    shared = {id(p.memory.observer.observer) for p in fleet}  # type: ignore[union-attr]
    assert len(shared) == 1
    for policy in fleet:
        policy.poll()
    assert len(kafka.connections) == 1


def test_other_credentials_get_their_own_client() -> None:
    kafka, fleet = _fleet(3, secrets=["creds", "other", "creds"])
    for policy in fleet:
        policy.poll()
    assert sorted(c[1]["sasl_plain_password"] for c in kafka.connections) == [
        "p1-long-enough",
        "p9-long-enough",
    ]
    assert _pool(fleet[0]).open == 2


def test_a_secret_rotation_gives_a_new_client_and_closes_the_old_when_unused() -> None:
    kafka, fleet = _fleet(2)
    for policy in fleet:
        policy.poll()
    old = fleet[0].memory.observer.observer  # type: ignore[union-attr]
    assert isinstance(old, MemoryObserver)
    fleet[0].ports.secrets.items[("ns", "creds")] = {**SASL, "saslPassword": "p2-long-enough"}
    fleet[0].poll()
    assert [c[1]["sasl_plain_password"] for c in kafka.connections] == [
        "p1-long-enough",
        "p2-long-enough",
    ]
    assert not old.closed, "the other policy still uses the old client"
    assert _pool(fleet[0]).open == 2
    fleet[1].poll()  # it reads the rotated Secret too: onto the new client
    assert old.closed and _pool(fleet[0]).open == 1
    assert len(kafka.connections) == 2


def test_a_client_whose_reads_failed_is_not_handed_out_again() -> None:
    kafka, fleet = _fleet(2)
    for policy in fleet:
        policy.poll()
    kafka.reachable = False
    fleet[0].poll()
    assert fleet[0].condition("Stalled")["reason"] == "KafkaUnreachable"
    kafka.reachable = True
    fleet[0].poll()  # a fresh client, as a policy with its own would get
    assert len(kafka.connections) == 2
    fleet[1].poll()  # still on the old one, which works again
    assert len(kafka.connections) == 2
    fleet[1].memory.close()
    assert _pool(fleet[0]).open == 1


def test_a_policy_deleted_lets_go_of_its_lease() -> None:
    _kafka, fleet = _fleet(2)
    for policy in fleet:
        policy.poll()
    for policy in fleet:
        policy.memory.close()
        policy.memory.close()  # closing twice lets go once
    assert _pool(fleet[0]).open == 0


def test_polls_are_spread_over_the_interval() -> None:
    """After its first poll (at once), each policy's second comes at a point of the interval
    fixed by its uid, so policies created together do not poll together ever after."""
    interval = 30.0
    seconds = []
    for i in range(200):
        memory = PolicyMemory()
        assert memory.poll_due(0.0, 1, interval, f"uid-{i}")  # the first poll: at once
        t = 1.0
        while not memory.poll_due(t, 1, interval, f"uid-{i}"):
            t += 1.0
        assert t <= interval  # never later than the interval
        seconds.append(t % interval)
        assert not memory.poll_due(t + interval - 1, 1, interval, f"uid-{i}")
        assert memory.poll_due(t + interval, 1, interval, f"uid-{i}")
    counts = [seconds.count(float(s)) for s in range(30)]
    assert max(counts) <= 20, counts  # 200 policies over 30 one-second slots: about 7 each


def test_a_lease_offers_every_observer_method_with_the_observers_signature() -> None:
    """A lease stands in for the `Observer` port: each of the port's methods must take exactly
    the port's parameters, or a caller written against the port fails only at run time."""
    import inspect

    from kafka_rebalance_operator.kafka.clients import Lease
    from kafka_rebalance_operator.ports import Observer

    port_methods = {
        name
        for name, value in vars(Observer).items()
        if callable(value) and not name.startswith("_")
    }
    assert {"observe", "publish_plan", "nudge", "close"} <= port_methods
    for name in sorted(port_methods):
        port = inspect.signature(getattr(Observer, name))
        lease = inspect.signature(getattr(Lease, name))
        assert list(lease.parameters) == list(port.parameters), name
