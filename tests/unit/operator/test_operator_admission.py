"""The bootstrap-server allowlist: a policy may only send credentials where the operator allows."""

from __future__ import annotations

import pytest
from kafka_rebalance_operator.kafka.admission import (
    AllowlistError,
    bootstrap_allowed,
    parse_allowlist,
)

ALLOW = parse_allowlist(["kafka.prod.svc:9093,kafka-0.kafka.prod.svc:9093", "*.kafka.shared"])


def test_no_allowlist_allows_everything() -> None:
    assert bootstrap_allowed("anywhere.example:9092", ()) is None
    assert bootstrap_allowed("anywhere.example:9092", None) is None


@pytest.mark.parametrize(
    "servers",
    [
        "kafka.prod.svc:9093",
        "KAFKA.prod.svc:9093,kafka-0.kafka.prod.svc:9093",
        "b1.kafka.shared:9092,b2.kafka.shared:19092",
    ],
)
def test_every_listed_server_allowed(servers: str) -> None:
    assert bootstrap_allowed(servers, ALLOW) is None


@pytest.mark.parametrize(
    ("servers", "named"),
    [
        ("attacker.example:9093", "attacker.example:9093"),
        ("kafka.prod.svc:9093,attacker.example:9093", "attacker.example:9093"),  # all must pass
        ("kafka.prod.svc:9094", "kafka.prod.svc:9094"),  # wrong port
        ("kafka.shared:9092", "kafka.shared:9092"),  # '*.' needs a subdomain
        ("evilkafka.shared:9092", "evilkafka.shared:9092"),  # not a suffix on a dot
    ],
)
def test_refusal_names_the_server(servers: str, named: str) -> None:
    refusal = bootstrap_allowed(servers, ALLOW)
    assert refusal is not None and named in refusal and "\n" not in refusal
    assert refusal.startswith("spec.kafka.bootstrapServers: ")


def test_flag_strings_are_accepted_directly() -> None:
    assert bootstrap_allowed("[::1]:9092", ["[::1]:9092"]) is None
    assert bootstrap_allowed("127.0.0.1:9092", ["127.0.0.1"]) is None  # any port
    assert bootstrap_allowed("127.0.0.2:9092", ["127.0.0.1"]) is not None


@pytest.mark.parametrize("entry", ["host:notaport", "host:70000", "a*b.example", "::1", "[::1"])
def test_bad_allowlist_entries_are_named(entry: str) -> None:
    with pytest.raises(AllowlistError, match="--allowed-bootstrap-servers"):
        parse_allowlist([entry])
