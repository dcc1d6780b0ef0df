"""Secured Kafka against the real broker's SASL_PLAINTEXT, SSL and SASL_SSL listeners.

The operator side builds its client settings from a Secret-like mapping with `kafka_security`
and observes a group through `kafka_io`, exactly as a policy naming a Secret would; the sidecar
side is the `kafka-rebalance sidecar` command as a subprocess, given the new flags the way a pod
passes them (password in a mounted file or the environment, certificates as files). Records are
produced and the group's position read over PLAINTEXT, so what the secured client reports is
checked against an independent reading.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kafka_rebalance_common import wire
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo import ledger
from kafka_rebalance_dev.demo.cluster import wait_for
from kafka_rebalance_dev.devenv.kafka_secured import DEV_PASSWORD, DEV_USERNAME
from kafka_rebalance_operator.kafka.kafka_io import KafkaObserver, KafkaUnavailable
from kafka_rebalance_operator.kafka.kafka_security import client_settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2
PER_PARTITION = 20


# ---- helpers -------------------------------------------------------------------------------------


def _topic_with_records(bootstrap: str, prefix: str) -> str:
    """A fresh topic with PER_PARTITION records in each partition (written over PLAINTEXT)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for partition in range(PARTITIONS):
            for index in range(PER_PARTITION):
                producer.send(topic, value=f"r{index}".encode(), partition=partition)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    return topic


def _commit(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit `offsets` for `group` (a manual consumer: no join, just OffsetCommit)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, Any]:
    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        offsets = admin.list_group_offsets({group: None}).get(group) or {}
    finally:
        admin.close()
    return {tp.partition: om for tp, om in offsets.items() if tp.topic == topic}


def _sasl_secret(mechanism: str, password: str = DEV_PASSWORD) -> dict[str, str]:
    """The decoded `data` of a Secret a ConsumerGroupPolicy would name (docs/crd-reference.md)."""
    return {
        "securityProtocol": "SASL_PLAINTEXT",
        "saslMechanism": mechanism,
        "saslUsername": DEV_USERNAME,
        "saslPassword": password,
    }


def _observe(bootstrap: str, secret: dict[str, str], group: str, topic: str) -> Any:
    observer = KafkaObserver(bootstrap, client_settings(secret), timeout_s=10)
    try:
        return observer.observe(group, [topic], None, describe=True)
    finally:
        observer.close()


def _assert_lag(observation: Any, topic: str, committed: dict[int, int]) -> None:
    assert observation.topics == {topic: PARTITIONS}
    assert observation.errors == []
    for partition in range(PARTITIONS):
        offsets = observation.offsets[(topic, partition)]
        assert offsets.error is None
        assert (offsets.log_start, offsets.log_end) == (0, PER_PARTITION)
        assert offsets.committed == committed.get(partition)


# ---- (a) the operator's Kafka I/O through SASL ---------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_operator_observes_offsets_and_lag_through_sasl(kafka_broker_4, mechanism: str) -> None:
    cluster = kafka_broker_4.cluster
    topic = _topic_with_records(cluster.bootstrap_servers, "sasl-observe")
    group = f"sasl-observe-{uuid.uuid4().hex[:8]}"
    _commit(cluster.bootstrap_servers, group, {TopicPartition(topic, 0): 7})

    observation = _observe(cluster.sasl_bootstrap_servers, _sasl_secret(mechanism), group, topic)

    _assert_lag(observation, topic, {0: 7})  # partition 1: no commit, so None
    assert observation.group is not None and observation.group.get("group_state") == "Empty"


def test_scram_users_exist_on_both_broker_lines(any_kafka) -> None:
    """The dev user is created at `format` (--add-scram) on 3.9 and 4.x alike."""
    cluster = any_kafka.cluster
    topic = _topic_with_records(cluster.bootstrap_servers, "sasl-compat")
    group = f"sasl-compat-{uuid.uuid4().hex[:8]}"
    _commit(cluster.bootstrap_servers, group, {TopicPartition(topic, 1): 20})
    observation = _observe(
        cluster.sasl_bootstrap_servers, _sasl_secret("SCRAM-SHA-512"), group, topic
    )
    _assert_lag(observation, topic, {1: 20})


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_is_refused_without_leaking_it(
    kafka_broker_4, caplog: pytest.LogCaptureFixture, mechanism: str
) -> None:
    cluster = kafka_broker_4.cluster
    wrong = "not-the-password-" + uuid.uuid4().hex
    settings = client_settings(_sasl_secret(mechanism, password=wrong))
    caplog.set_level(logging.WARNING)
    with pytest.raises(KafkaUnavailable) as info:
        observer = KafkaObserver(cluster.sasl_bootstrap_servers, settings, timeout_s=2)
        try:  # kafka-python may defer the failure to the first request
            observer.topic_partitions(["anything"], None)
        finally:
            observer.close()
    message = str(info.value)
    assert cluster.sasl_bootstrap_servers in message
    assert wrong not in message and DEV_PASSWORD not in message
    # kafka-python retries the bootstrap until its timeout, so the exception only says the
    # bootstrap failed; refused attempts are logged (WARNING) with the broker's reason, and the
    # password is in neither. kafka-python often sees the broker close the socket before it
    # reads the error response (mostly with SCRAM, once in CI with PLAIN too), so the refused
    # attempt shows either as the broker's reason or as the socket the broker closed.
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert wrong not in logged
    assert (
        "Authentication failed: Invalid username or password" in logged
        or "socket disconnected" in logged
    ), logged


# ---- (c) the operator through TLS: client certificate, and SASL_SSL ------------------------------


def test_operator_observes_through_tls_with_a_client_certificate(kafka_broker_4) -> None:
    cluster = kafka_broker_4.cluster
    tls = cluster.tls
    topic = _topic_with_records(cluster.bootstrap_servers, "tls-observe")
    group = f"tls-observe-{uuid.uuid4().hex[:8]}"
    _commit(cluster.bootstrap_servers, group, {TopicPartition(topic, 0): 3})
    secret = {
        "securityProtocol": "SSL",
        "ca.crt": tls.ca.read_text(),
        "tls.crt": tls.client.cert.read_text(),
        "tls.key": tls.client.key.read_text(),
    }
    _assert_lag(_observe(cluster.ssl_bootstrap_servers, secret, group, topic), topic, {0: 3})

    # The listener demands the client certificate: the same CA without it gets nowhere.
    without_cert = {"securityProtocol": "SSL", "ca.crt": tls.ca.read_text()}
    with pytest.raises(KafkaUnavailable):
        observer = KafkaObserver(
            cluster.ssl_bootstrap_servers, client_settings(without_cert), timeout_s=2
        )
        try:
            observer.topic_partitions([topic], None)
        finally:
            observer.close()


def test_operator_observes_through_sasl_ssl(kafka_broker_4) -> None:
    cluster = kafka_broker_4.cluster
    topic = _topic_with_records(cluster.bootstrap_servers, "sasl-ssl-observe")
    group = f"sasl-ssl-observe-{uuid.uuid4().hex[:8]}"
    _commit(cluster.bootstrap_servers, group, {TopicPartition(topic, 1): 11})
    secret = {**_sasl_secret("SCRAM-SHA-512"), "securityProtocol": "SASL_SSL"}
    secret["ca.crt"] = cluster.tls.ca.read_text()
    observation = _observe(cluster.sasl_ssl_bootstrap_servers, secret, group, topic)
    _assert_lag(observation, topic, {1: 11})


# ---- (b) the sidecar command through the secured listeners ---------------------------------------


@contextlib.contextmanager
def _sidecar(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kafka_rebalance.cli", "sidecar", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _secured_flags(kind: str, cluster: Any, secrets: Path) -> tuple[str, list[str], dict[str, str]]:
    """(bootstrap, flags, extra environment) for one way of reaching the broker."""
    tls = cluster.tls
    if kind == "sasl-scram-password-file":
        password_file = secrets / "password"
        password_file.write_text(DEV_PASSWORD + "\n")  # as `kubectl create secret` files often end
        flags = [
            "--security-protocol=SASL_PLAINTEXT",
            "--sasl-mechanism=SCRAM-SHA-256",
            f"--sasl-username={DEV_USERNAME}",
            f"--sasl-password-file={password_file}",
        ]
        return cluster.sasl_bootstrap_servers, flags, {}
    if kind == "ssl-client-certificate":
        flags = [
            "--security-protocol=SSL",
            f"--ssl-cafile={tls.ca}",
            f"--ssl-certfile={tls.client.cert}",
            f"--ssl-keyfile={tls.client.key}",
        ]
        return cluster.ssl_bootstrap_servers, flags, {}
    assert kind == "sasl-ssl-password-env"
    flags = [
        "--security-protocol=SASL_SSL",
        "--sasl-mechanism=PLAIN",
        f"--sasl-username={DEV_USERNAME}",
        f"--ssl-cafile={tls.ca}",
        # kafka-python at DEBUG logs the raw PLAIN request (password in clear), which the
        # sidecar's log filter must mask
        "--verbose",
    ]
    return cluster.sasl_ssl_bootstrap_servers, flags, {"KAFKA_SASL_PASSWORD": DEV_PASSWORD}


@pytest.mark.parametrize(
    "kind", ["sasl-scram-password-file", "ssl-client-certificate", "sasl-ssl-password-env"]
)
@pytest.mark.parametrize(
    "engine",
    [("group", "kafka-python"), ("assign", "librdkafka")],
    ids=["group-kafka-python", "assign-librdkafka"],
)
def test_sidecar_consumes_and_commits_through_a_secured_listener(
    kafka_broker_4, tmp_path: Path, kind: str, engine: tuple[str, str]
) -> None:
    """Both client engines: librdkafka gets the same flags translated to its own settings."""
    mode, client = engine
    cluster = kafka_broker_4.cluster
    topic = _topic_with_records(cluster.bootstrap_servers, f"sidecar-{kind}")
    group = f"sidecar-{kind}-{uuid.uuid4().hex[:8]}"
    member = "secure-0"
    document = tmp_path / "assignment.json"
    document.write_text(
        json.dumps(
            {
                "group": group,
                "member": member,
                "epoch": 1,
                "partitions": {topic: list(range(PARTITIONS))},
                "revoking": {},
                "planHash": "test-1",
                "generatedAt": "2026-11-21T00:00:00Z",
            }
        )
    )
    (tmp_path / "ledger").mkdir()
    bootstrap, flags, extra_env = _secured_flags(kind, cluster, tmp_path)
    env = {
        **{k: v for k, v in os.environ.items() if k != "KAFKA_SASL_PASSWORD"},
        ledger.LEDGER_DIR_ENV: str(tmp_path / "ledger"),
        **extra_env,
    }
    args = [
        f"--bootstrap-servers={bootstrap}",
        f"--group={group}",
        f"--topics={topic}",
        f"--member={member}",
        f"--assignment={document}",
        "--handler=kafka_rebalance_dev.demo.ledger:record",  # on-poison dead-letter: a producer too
        f"--apply-mode={mode}",
        f"--engine={client}",
        *flags,
    ]
    log = tmp_path / "kafka_rebalance_sidecar.log"
    with _sidecar(args, env, log) as process:

        def done() -> dict[int, Any] | None:
            committed = _committed(cluster.bootstrap_servers, group, topic)
            offsets = {p: om.offset for p, om in committed.items()}
            return committed if offsets == dict.fromkeys(range(PARTITIONS), PER_PARTITION) else None

        def crashed() -> str | None:
            if process.poll() is not None:
                return f"sidecar exited {process.returncode}: {log.read_text()[-3000:]}"
            return None

        committed = wait_for("the sidecar to commit every record", done, timeout=60, abort=crashed)
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()[-3000:]

    for om in committed.values():
        assert wire.decode_commit_metadata(om.metadata) == wire.CommitMetadata(member, 1)
    produced = {(topic, p): PER_PARTITION for p in range(PARTITIONS)}
    report = ledger.reconcile(produced, tmp_path / "ledger")
    assert report.lost == 0 and report.produced == PARTITIONS * PER_PARTITION, report.summary()
    text = log.read_text()
    assert DEV_PASSWORD not in text
    if "--verbose" in flags:
        assert f"{DEV_USERNAME}\\x00***'" in text  # the raw PLAIN request was logged, masked
    assert f"kafka security: {flags[0].split('=', 1)[1]}" in text
    started = f"{mode} mode: member {member} in group {group} consuming {topic} (client {client})"
    assert started in text, text[-3000:]


# ---- restart: the listeners and the SCRAM users come back with the node --------------------------


def test_a_restarted_node_serves_its_secured_listeners_again(kafka_cluster) -> None:
    """SCRAM users live in the KRaft metadata (written at format), the listeners in the node's
    config: a node stopped and started on its old data must authenticate as before."""
    cluster = kafka_cluster.cluster
    node = cluster.nodes[-1]
    kafka_cluster.stop_node(node.node_id)
    kafka_cluster.start_node(node.node_id)

    topic = _topic_with_records(cluster.bootstrap_servers, "sasl-restart")
    group = f"sasl-restart-{uuid.uuid4().hex[:8]}"
    _commit(cluster.bootstrap_servers, group, {TopicPartition(topic, 0): 5})
    only_restarted = f"127.0.0.1:{node.sasl_port}"  # bootstrap through the restarted node only
    observation = _observe(only_restarted, _sasl_secret("SCRAM-SHA-256"), group, topic)
    _assert_lag(observation, topic, {0: 5})
    tls_secret = {
        "securityProtocol": "SSL",
        "ca.crt": cluster.tls.ca.read_text(),
        "tls.crt": cluster.tls.client.cert.read_text(),
        "tls.key": cluster.tls.client.key.read_text(),
    }
    observation = _observe(f"127.0.0.1:{node.ssl_port}", tls_secret, group, topic)
    _assert_lag(observation, topic, {0: 5})


# ---- Strimzi's Secrets, stored in the real API server, as they come ------------------------------

_P12 = bytes(range(256)) * 8  # a binary value, as Strimzi's user.p12 / ca.p12 keystores are


def _store_secret(core: Any, namespace: str, name: str, data: dict[str, str | bytes]) -> None:
    encoded = {
        k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()
        for k, v in data.items()
    }
    core.create_namespaced_secret(namespace, {"metadata": {"name": name}, "data": encoded})


@pytest.fixture
def strimzi_namespace(k8s) -> Iterator[tuple[Any, str]]:
    """A namespace on the real API server, with kube_io pointed at it (restored afterwards)."""
    from kafka_rebalance_operator.kube import kube_io
    from kubernetes import client

    api = k8s.api_client()
    core = client.CoreV1Api(api)
    namespace = f"strimzi-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    previous = kube_io._API
    kube_io.set_api(api)
    try:
        yield core, namespace
    finally:
        kube_io._API = previous
        core.delete_namespace(namespace)
        api.close()


def test_operator_uses_strimzi_secrets_with_binary_values(
    kafka_broker_4, strimzi_namespace
) -> None:
    """A Strimzi KafkaUser Secret (SCRAM: `password`, `sasl.jaas.config`; TLS: `user.crt`,
    `user.key` next to the binary `user.p12`) and the cluster CA Secret (`ca.crt` next to the
    binary `ca.p12`), read from the API server as the poll reads them, reach the broker's
    SASL_SSL and SSL listeners; nothing is decoded that the operator does not use."""
    from kafka_rebalance_operator.kube import kube_io

    core, namespace = strimzi_namespace
    cluster = kafka_broker_4.cluster
    tls = cluster.tls
    _store_secret(
        core,
        namespace,
        "my-cluster-cluster-ca-cert",
        {"ca.crt": tls.ca.read_text(), "ca.p12": _P12, "ca.password": "ca-p12-pw"},
    )
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{DEV_USERNAME}" password="{DEV_PASSWORD}";'
    )
    _store_secret(
        core, namespace, "scram-user", {"password": DEV_PASSWORD, "sasl.jaas.config": jaas}
    )
    _store_secret(
        core,
        namespace,
        "tls-user",
        {
            "ca.crt": tls.ca.read_text(),  # Strimzi puts the clients CA here
            "user.crt": tls.client.cert.read_text(),
            "user.key": tls.client.key.read_text(),
            "user.p12": _P12,
            "user.password": "user-p12-pw",
        },
    )
    cluster_ca = kube_io.read_secret(namespace, "my-cluster-cluster-ca-cert")
    assert "ca.p12" not in cluster_ca and cluster_ca["ca.password"] == "ca-p12-pw"

    topic = _topic_with_records(cluster.bootstrap_servers, "strimzi-observe")
    group = f"strimzi-observe-{uuid.uuid4().hex[:8]}"
    _commit(cluster.bootstrap_servers, group, {TopicPartition(topic, 0): 4})

    scram = kube_io.read_secret(namespace, "scram-user")
    settings = client_settings(scram, cluster_ca)
    assert (settings["security_protocol"], settings["sasl_mechanism"]) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
    )
    observer = KafkaObserver(cluster.sasl_ssl_bootstrap_servers, settings, timeout_s=10)
    try:
        _assert_lag(observer.observe(group, [topic], None, describe=True), topic, {0: 4})
    finally:
        observer.close()

    user = kube_io.read_secret(namespace, "tls-user")
    assert "user.p12" not in user
    observer = KafkaObserver(
        cluster.ssl_bootstrap_servers, client_settings(user, cluster_ca), timeout_s=10
    )
    try:
        _assert_lag(observer.observe(group, [topic], None, describe=True), topic, {0: 4})
    finally:
        observer.close()


# ---- SASL password rotation in the sidecar -------------------------------------------------------


def _set_scram_password(bootstrap: str, user: str, password: str) -> None:
    """Create or change a SCRAM-SHA-512 user through the Admin API (AlterUserScramCredentials),
    as Strimzi's User Operator or `kafka-configs --alter --add-config SCRAM-SHA-512=...` do."""
    from kafka.admin import UserScramCredentialUpsertion

    admin = RetryingAdmin(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        result = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, "SCRAM-SHA-512", password)]
        )
    finally:
        admin.close()
    errors = [r for r in (result.values() if isinstance(result, dict) else []) if r]
    assert not errors, errors


def _mount_secret(directory: Path, password: str) -> None:
    """Write the password the way the kubelet updates a mounted Secret: a new data directory and
    an atomic swap of the `..data` symlink the key's path goes through."""
    data = directory / f"..{uuid.uuid4().hex[:8]}"
    data.mkdir()
    (data / "password").write_text(password + "\n")
    (directory / "..data_tmp").symlink_to(data.name)
    os.replace(directory / "..data_tmp", directory / "..data")
    if not (directory / "password").is_symlink():
        (directory / "password").symlink_to("..data/password")


def _produce(bootstrap: str, topic: str, start: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for partition in range(PARTITIONS):
            for index in range(start, start + PER_PARTITION):
                producer.send(topic, value=f"r{index}".encode(), partition=partition)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)


def test_sidecar_reconnects_with_a_rotated_sasl_password(kafka_broker_4, tmp_path: Path) -> None:
    """The user's SCRAM password is changed at the broker and in the mounted file while the
    sidecar runs: it notices the file, commits what it delivered, reconnects with the new
    password (a client still holding the old one could open no new connection) and goes on
    consuming; the ledger shows nothing lost across the change."""
    cluster = kafka_broker_4.cluster
    suffix = uuid.uuid4().hex[:8]
    user, first, second = f"rotating-{suffix}", f"first-{suffix}", f"second-{suffix}"
    _set_scram_password(cluster.bootstrap_servers, user, first)
    topic = _topic_with_records(cluster.bootstrap_servers, "sidecar-rotation")
    group = f"sidecar-rotation-{suffix}"
    member = "rotating-0"
    document = tmp_path / "assignment.json"
    document.write_text(
        json.dumps(
            {
                "group": group,
                "member": member,
                "epoch": 1,
                "partitions": {topic: list(range(PARTITIONS))},
                "revoking": {},
                "planHash": "test-1",
                "generatedAt": "2026-11-21T00:00:00Z",
            }
        )
    )
    secrets = tmp_path / "secret"
    secrets.mkdir()
    _mount_secret(secrets, first)
    (tmp_path / "ledger").mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "KAFKA_SASL_PASSWORD"},
        ledger.LEDGER_DIR_ENV: str(tmp_path / "ledger"),
    }
    args = [
        f"--bootstrap-servers={cluster.sasl_bootstrap_servers}",
        f"--group={group}",
        f"--topics={topic}",
        f"--member={member}",
        f"--assignment={document}",
        "--handler=kafka_rebalance_dev.demo.ledger:record",  # dead-letter producer rebuilt too
        "--security-protocol=SASL_PLAINTEXT",
        "--sasl-mechanism=SCRAM-SHA-512",
        f"--sasl-username={user}",
        f"--sasl-password-file={secrets / 'password'}",
    ]
    log = tmp_path / "kafka_rebalance_sidecar.log"
    with _sidecar(args, env, log) as process:

        def crashed() -> str | None:
            if process.poll() is not None:
                return f"sidecar exited {process.returncode}: {log.read_text()[-3000:]}"
            return None

        def committed_up_to(offset: int) -> Any:
            def check() -> dict[int, Any] | None:
                committed = _committed(cluster.bootstrap_servers, group, topic)
                offsets = {p: om.offset for p, om in committed.items()}
                return committed if offsets == dict.fromkeys(range(PARTITIONS), offset) else None

            return check

        wait_for("the first records", committed_up_to(PER_PARTITION), timeout=60, abort=crashed)

        _set_scram_password(cluster.bootstrap_servers, user, second)
        _mount_secret(secrets, second)
        wait_for(
            "the sidecar to reconnect with the rotated password",
            lambda: "reconnecting to Kafka with the rotated credentials" in log.read_text(),
            timeout=60,
            abort=crashed,
        )
        _produce(cluster.bootstrap_servers, topic, PER_PARTITION)
        wait_for(
            "the records after the rotation",
            committed_up_to(2 * PER_PARTITION),
            timeout=60,
            abort=crashed,
        )
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()[-3000:]

    # the old password is really gone at the broker: only the reconnect explains the second half
    with pytest.raises(KafkaUnavailable):
        stale = {"securityProtocol": "SASL_PLAINTEXT", "saslMechanism": "SCRAM-SHA-512"}
        stale |= {"saslUsername": user, "saslPassword": first}
        observer = KafkaObserver(cluster.sasl_bootstrap_servers, client_settings(stale), 2)
        try:
            observer.topic_partitions([topic], None)
        finally:
            observer.close()

    produced = {(topic, p): 2 * PER_PARTITION for p in range(PARTITIONS)}
    report = ledger.reconcile(produced, tmp_path / "ledger")
    assert report.lost == 0 and report.produced == 2 * PARTITIONS * PER_PARTITION, report.summary()
    text = log.read_text()
    assert first not in text and second not in text
    assert text.count("reconnecting to Kafka with the rotated credentials") == 1
