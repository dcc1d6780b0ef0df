"""The streams recompute trigger (operator kafka/streams_trigger.py) changes only its own tag, on a
real Kafka 4.4 broker that authorizes (StandardAuthorizer): a describe the broker refuses
for the group leaves the app's tags as they were and fails the trigger as Kafka being
unavailable (the poll's `TriggerFailed`); a writer racing the trigger keeps its tags; the
broker refuses list operations (APPEND) on group configs, which is why the trigger is a
compare-and-set loop. Marked `streams`.

The broker here is this module's own (one node, its own supervisor, stopped at the end): the
session brokers authorize nothing. PLAINTEXT clients are ANONYMOUS, a super user (the test's
own admin); the operator's client logs in over SASL as the development user `dev`, whom ACLs
allow to alter the group's configs but deny describing them: exactly the case in which the
old trigger, reading an empty answer, wrote the list back as the reserved tag alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    ResourcePattern,
    ResourceType,
)
from kafka_rebalance_common.kafka_retry import call_with_retry
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.devenv import kafka_broker
from kafka_rebalance_dev.devenv.kafka_secured import DEV_PASSWORD, DEV_USERNAME
from kafka_rebalance_dev.devenv.processes import StateFile
from kafka_rebalance_dev.devenv.supervisor import Supervisor
from kafka_rebalance_dev.devenv.toolchain import Toolchain
from kafka_rebalance_operator.kafka import streams_group, streams_trigger
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver, KafkaUnavailable

pytestmark = [pytest.mark.integration, pytest.mark.streams]

TAGS = streams_group.TRIGGER_CONFIG
APP_TAGS = "zone,cluster"  # the application's own rack-aware assignment tags


class Broker:
    """The module's authorizing broker: its PLAINTEXT and SASL_PLAINTEXT bootstraps."""

    def __init__(self, cluster: kafka_broker.KafkaCluster) -> None:
        self.plaintext = cluster.bootstrap_servers
        self.sasl = cluster.sasl_bootstrap_servers


@pytest.fixture(scope="module")
def broker(tools: Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root: Path = tmp_path_factory.mktemp("kafka-acl")
    supervisor = Supervisor(StateFile(root / "state.json"), die_with_parent=True)
    try:
        cluster = kafka_broker.start_cluster(
            "kafka-acl",
            root / "kafka-acl",
            tools,
            supervisor,
            heap="384m",
            overrides={
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:ANONYMOUS",  # PLAINTEXT: inter-broker, controller, the test
            },
        )
        yield Broker(cluster)
    finally:
        supervisor.stop(grace=10)


@pytest.fixture(scope="module")
def admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    client = call_with_retry(KafkaAdminClient, bootstrap_servers=broker.plaintext, what="admin")
    yield client
    client.close()


@pytest.fixture
def operator_client(broker: Broker) -> Iterator[KafkaObserver]:
    """The operator's Kafka client as the policy's Secret would configure it: user `dev`."""
    client = KafkaObserver(
        broker.sasl,
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": DEV_USERNAME,
            "sasl_plain_password": DEV_PASSWORD,
        },
        10.0,
    )
    yield client
    client.close()


def _group(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _set(admin: KafkaAdminClient, group: str, value: str) -> None:
    resource = ConfigResource(
        ConfigResourceType.GROUP, group, configs={TAGS: (AlterConfigOp.SET, value)}
    )
    result = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    assert result == {"group": {group: "OK"}}


def _tags(admin: KafkaAdminClient, group: str) -> str | None:
    return streams_trigger.read_tags(admin, group)


def _acl(group: str, operation: ACLOperation, permission: ACLPermissionType) -> ACL:
    return ACL(
        f"User:{DEV_USERNAME}",
        "*",
        operation,
        permission,
        ResourcePattern(ResourceType.GROUP, group),
    )


def test_a_describe_the_broker_refuses_changes_nothing_and_fails_the_trigger(
    admin: KafkaAdminClient, operator_client: KafkaObserver
) -> None:
    group = _group("acl-denied")
    _set(admin, group, APP_TAGS)
    created = admin.create_acls(
        [
            _acl(group, ACLOperation.ALTER_CONFIGS, ACLPermissionType.ALLOW),
            _acl(group, ACLOperation.DESCRIBE_CONFIGS, ACLPermissionType.DENY),
        ]
    )
    assert not created["failed"], created

    def plain_describe() -> Any:
        return operator_client.admin.describe_configs(
            [ConfigResource(ConfigResourceType.GROUP, group, configs={TAGS: None})],
            config_filter="all",
        )

    # The premise: kafka-python's own describe drops the group's error and answers as if the
    # group had no configs at all (what the old trigger read as "no tags"). ACLs reach the
    # broker's authorizer through the metadata log: wait for the denial to apply.
    wait_for("the DENY applied", lambda: plain_describe() == {"group": {group: {}}}, 30)

    for attempt in (
        lambda: operator_client.trigger_streams_group(group),
        lambda: operator_client.clear_streams_trigger(group),
    ):
        with pytest.raises(KafkaUnavailable, match=r"GroupAuthorizationFailedError \(30\)"):
            attempt()
        assert _tags(admin, group) == APP_TAGS  # nothing written

    # Allowed to describe, the same client toggles the reserved tag and keeps the app's tags.
    admin.create_acls([_acl(group, ACLOperation.ALTER_CONFIGS, ACLPermissionType.ALLOW)])
    admin.delete_acls([_acl(group, ACLOperation.DESCRIBE_CONFIGS, ACLPermissionType.DENY)])
    tagged = f"{APP_TAGS},{streams_group.TRIGGER_TAG}"
    wait_for("the DENY removed", lambda: TAGS in plain_describe()["group"][group], 30)
    assert operator_client.trigger_streams_group(group) == tagged
    assert _tags(admin, group) == tagged
    assert operator_client.clear_streams_trigger(group) is True
    assert _tags(admin, group) == APP_TAGS


def test_the_broker_refuses_list_operations_on_group_configs(admin: KafkaAdminClient) -> None:
    """Why the trigger is a compare-and-set loop and not one APPEND/SUBTRACT: Kafka 4.4's
    controller validates list operations against broker and topic configs only."""
    group = _group("append")
    _set(admin, group, APP_TAGS)
    resource = ConfigResource(
        ConfigResourceType.GROUP,
        group,
        configs={TAGS: (AlterConfigOp.APPEND, streams_group.TRIGGER_TAG)},
    )
    result = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    assert "Can't APPEND" in str(result["group"][group])
    assert _tags(admin, group) == APP_TAGS


def test_a_writer_racing_the_trigger_keeps_its_tags(
    admin: KafkaAdminClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer (the app's owner) sets the tags right after the trigger's write: the
    writer's tags stay. When the read-back sees them, the trigger starts again from them and
    toggles the reserved tag on them."""
    group = _group("race")
    _set(admin, group, APP_TAGS)
    theirs = "zone,cluster,host"
    real_alter = streams_group.alter
    raced: list[str] = []

    def alter_then_race(client: Any, group_id: str, key: str, value: str | None) -> None:
        real_alter(client, group_id, key, value)
        if not raced:
            raced.append(str(value))
            _set(admin, group_id, theirs)  # lands between our write and our read-back

    monkeypatch.setattr(streams_group, "alter", alter_then_race)
    written = streams_trigger.trigger(admin, group)
    assert raced == [f"{APP_TAGS},{streams_group.TRIGGER_TAG}"]
    # Their tags stay whichever way the race went: seen by the read-back (the trigger starts
    # again from theirs: theirs plus the tag) or landing after it (theirs as they wrote it; a
    # change of the tags bumps the group epoch by itself).
    after = _tags(admin, group)
    assert written in (
        f"{theirs},{streams_group.TRIGGER_TAG}",
        f"{APP_TAGS},{streams_group.TRIGGER_TAG}",
    )
    assert after in (theirs, f"{theirs},{streams_group.TRIGGER_TAG}")
    assert (after == theirs) == (written == f"{APP_TAGS},{streams_group.TRIGGER_TAG}")
    monkeypatch.setattr(streams_group, "alter", real_alter)
    streams_trigger.remove(admin, group)
    assert _tags(admin, group) == theirs
