"""One tenant's mistake stays in its own policy: the operator process against the real API server
and broker, with policies that ordinary tenants produce next to each other.

- a Strimzi KafkaUser Secret (TLS: `user.crt`/`user.key`, a binary `user.p12`) works as it comes;
- a policy pointing at a server outside `--allowed-bootstrap-servers` is Stalled
  BootstrapNotAllowed before its Secret is read (it names a Secret that does not exist);
- a topicPattern with a backreference is Stalled InvalidSpec naming the construct (lookarounds
  are already refused by the API server's CEL rule);
- the catastrophic `([a-z]+-?)*x` next to a 36-character topic name is matched in linear time:
  the policy gets its status and /healthz keeps answering within 2 s throughout.
"""

from __future__ import annotations

import base64
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from kafka_rebalance.demo.cluster import Cluster, install_crd
from kafka_rebalance.demo.operator_process import OperatorProcess

pytestmark = pytest.mark.integration

P12 = bytes(range(256)) * 8  # binary, as a PKCS#12 keystore


def _policy(name: str, bootstrap: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "groupId": f"tenancy-{name}-{uuid.uuid4().hex[:6]}",
        "kafka": {"bootstrapServers": bootstrap},
        "members": {"selector": {"matchLabels": {"app": "nobody-here"}}},
        "rebalance": {"pollInterval": "5s"},
        **spec,
    }
    return {
        "apiVersion": "kafka-rebalance.io/v1alpha1",
        "kind": "ConsumerGroupPolicy",
        "metadata": {"name": name},
        "spec": body,
    }


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def _healthz(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
        return int(response.status)


def test_each_policys_mistake_stays_in_that_policy(kafka_broker_4, k8s, tmp_path: Path) -> None:
    cluster = kafka_broker_4.cluster
    tls = cluster.tls
    install_crd(k8s.tools.kubectl, k8s.kubeconfig)
    namespace = f"tenancy-{uuid.uuid4().hex[:6]}"
    api = Cluster(k8s.kubeconfig, namespace)
    api.create_namespace()
    # a 36-character name of letters and dashes, no 'x': the catastrophic pattern's worst case
    letters = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex * 2)
    long_topic = f"{letters[:12]}-{letters[12:23]}-{letters[23:34]}"
    assert len(long_topic) == 36
    topic = f"tenancy-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(long_topic, 1, 1), NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    api.core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "tls-user"},
            "data": {
                k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()
                for k, v in {
                    "ca.crt": tls.ca.read_text(),
                    "user.crt": tls.client.cert.read_text(),
                    "user.key": tls.client.key.read_text(),
                    "user.p12": P12,
                    "user.password": "p12-password",
                }.items()
            },
        },
    )
    allowed = f"{cluster.bootstrap_servers},{cluster.ssl_bootstrap_servers}"
    operator = OperatorProcess(
        k8s.kubeconfig,
        namespace,
        tmp_path,
        interval_scale=0.4,
        extra=["--allowed-bootstrap-servers", allowed],
    )
    operator.start()
    try:
        policies = {
            "strimzi": _policy(
                "strimzi",
                cluster.ssl_bootstrap_servers,
                topics=[topic],
                kafka={
                    "bootstrapServers": cluster.ssl_bootstrap_servers,
                    "secretRef": {"name": "tls-user"},
                },
            ),
            "elsewhere": _policy(
                "elsewhere",
                "kafka.attacker.example:9092",
                topics=[topic],
                kafka={
                    "bootstrapServers": "kafka.attacker.example:9092",
                    "secretRef": {"name": "no-such-secret"},
                },
            ),
            "backref": _policy(
                "backref", cluster.bootstrap_servers, topicPattern=r"(tenancy)-.*-\1"
            ),
            "catastrophic": _policy(
                "catastrophic", cluster.bootstrap_servers, topicPattern="([a-z]+-?)*x"
            ),
        }
        for body in policies.values():
            api.apply_policy(body)

        expected = {
            "strimzi": "NoMembers",  # the Secret and TLS worked: Kafka was read, no pod selected
            "elsewhere": "BootstrapNotAllowed",
            "backref": "InvalidSpec",
            # every topic name matched; the broker is shared with other tests, so a topic of
            # theirs ending in 'x' would make it NoMembers: either way the pattern ran
            "catastrophic": "TopicsNotFound",
        }
        either = {"catastrophic": {"TopicsNotFound", "NoMembers"}}
        reasons: dict[str, str | None] = {}
        slowest = 0.0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            started = time.monotonic()
            assert _healthz(operator.health_port) == 200
            slowest = max(slowest, time.monotonic() - started)
            reasons = {n: _ready(api.policy_status(n)).get("reason") for n in policies}
            if reasons.get("catastrophic") in either["catastrophic"]:
                reasons["catastrophic"] = expected["catastrophic"]
            if reasons == expected:
                break
            time.sleep(1.0)
        assert reasons == expected, reasons
        assert slowest < 2.0

        messages = {n: _ready(api.policy_status(n)).get("message", "") for n in policies}
        assert "kafka.attacker.example:9092" in messages["elsewhere"]
        assert "backreference" in messages["backref"]
        log = operator.log.read_text(errors="replace") if operator.log else ""
        assert "UnicodeDecodeError" not in log and "Traceback" not in log, log[-3000:]
    finally:
        operator.stop()
        api.delete_namespace()
        api.close()
