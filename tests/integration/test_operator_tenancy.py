"""One tenant's mistake stays in its own policy: the operator process against the real API server
and broker, with policies that ordinary tenants produce next to each other.

- a Strimzi KafkaUser Secret (TLS: `user.crt`/`user.key`, a binary `user.p12`) works as it comes;
- a policy pointing at a server outside `--allowed-bootstrap-servers` is Stalled
  BootstrapNotAllowed before its Secret is read (it names a Secret that does not exist);
- a topicPattern with a backreference is Stalled InvalidSpec naming the construct (lookarounds
  are already refused by the API server's CEL rule);
- the catastrophic `([a-z]+-?)*x` next to a 36-character topic name is matched in linear time:
  the policy gets its status;
- and the ordinary mistakes beside a healthy policy with pods: a topicPattern that matches
  nothing yet, a Secret that does not exist, a second policy for the healthy one's group;
- a policy in another watched namespace, with pods of the same names, for the healthy one's
  group on the same broker spelt `localhost:PORT` (the healthy one wrote `127.0.0.1:PORT`):
  Stalled ConflictingPolicy naming the healthy one (the brokers' cluster id says it is one
  cluster), and it writes no ConfigMap: only the healthy policy's plan exists for the group.

For 40 s, /healthz answers 200 within 2 s, the healthy policy keeps polling and stays Ready, and
every other policy carries its own Stalled reason (the Strimzi one works).
"""

from __future__ import annotations

import base64
import time
import urllib.request
import uuid
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import NewTopic
from kafka_rebalance_common.kafka_retry import RetryingAdmin
from kafka_rebalance_dev.demo.cluster import POLICY_LABEL, Cluster, install_crd
from kafka_rebalance_dev.demo.operator_process import OperatorProcess

pytestmark = pytest.mark.integration

P12 = bytes(range(256)) * 8  # binary, as a PKCS#12 keystore


def _policy(name: str, bootstrap: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "groupId": f"tenancy-{name}-{uuid.uuid4().hex[:6]}",
        "kafka": {"bootstrapServers": bootstrap},
        "members": {"selector": {"matchLabels": {"app": "nobody-here"}}},
        "rebalance": {"mode": "enforce", "pollInterval": "2s"},
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


def _documents(api: Cluster) -> list[str]:
    """The names of the namespace's ConfigMaps that any policy wrote (its label on them)."""
    items = api.core.list_namespaced_config_map(api.namespace, label_selector=POLICY_LABEL).items
    return sorted(item.metadata.name for item in items)


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
    admin = RetryingAdmin(bootstrap_servers=cluster.bootstrap_servers)
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
    api.create_statefulset("consumer", 2)
    # another tenant's namespace with pods of the same names, naming the broker by an alias
    other_namespace = f"{namespace}-b"
    other = Cluster(k8s.kubeconfig, other_namespace)
    other.create_namespace()
    other.create_statefulset("consumer", 2)
    api.wait_pods("consumer", ["consumer-0", "consumer-1"])
    other.wait_pods("consumer", ["consumer-0", "consumer-1"])
    assert cluster.bootstrap_servers.startswith("127.0.0.1:")
    alias = cluster.bootstrap_servers.replace("127.0.0.1:", "localhost:")
    healthy_group = f"tenancy-healthy-{uuid.uuid4().hex[:6]}"
    allowed = f"{cluster.bootstrap_servers},{cluster.ssl_bootstrap_servers},{alias}"
    operator = OperatorProcess(
        k8s.kubeconfig,
        namespace,
        tmp_path,
        extra=["--allowed-bootstrap-servers", allowed, "--namespace", other_namespace],
    )
    operator.start()
    try:
        healthy_spec = {
            "groupId": healthy_group,
            "topics": [topic],
            "members": {"selector": {"matchLabels": {"app": "consumer"}}},
        }
        policies = {
            "healthy": _policy("healthy", cluster.bootstrap_servers, **healthy_spec),
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
            "no-topics": _policy(
                "no-topics", cluster.bootstrap_servers, topicPattern="not-yet-created-.*"
            ),
            "no-secret": _policy(
                "no-secret",
                cluster.bootstrap_servers,
                topics=[topic],
                kafka={
                    "bootstrapServers": cluster.bootstrap_servers,
                    "secretRef": {"name": "absent"},
                },
            ),
            "duplicate": _policy("duplicate", cluster.bootstrap_servers, **healthy_spec),
        }
        api.apply_policy(policies["healthy"])  # first: the duplicate is the younger one
        time.sleep(1.5)  # creationTimestamp has one-second resolution
        for name, body in policies.items():
            if name != "healthy":
                api.apply_policy(body)
        aliased = _policy("aliased", alias, **healthy_spec)
        aliased["spec"]["kafka"] = {"bootstrapServers": alias}
        other.apply_policy(aliased)

        expected = {
            "strimzi": "NoMembers",  # the Secret and TLS worked: Kafka was read, no pod selected
            "elsewhere": "BootstrapNotAllowed",
            "backref": "InvalidSpec",
            # every topic name matched; the broker is shared with other tests, so a topic of
            # theirs ending in 'x' would make it NoMembers: either way the pattern ran
            "catastrophic": "TopicsNotFound",
            "no-topics": "TopicsNotFound",
            "no-secret": "SecretNotFound",
            "duplicate": "ConflictingPolicy",
        }
        either = {"catastrophic": {"TopicsNotFound", "NoMembers"}}
        reasons: dict[str, str | None] = {}
        slowest, answered, settled_at = 0.0, [], None
        healthy_polls: list[str] = []
        started_run = time.monotonic()
        while time.monotonic() - started_run < 40:
            started = time.monotonic()
            assert _healthz(operator.health_port) == 200
            slowest = max(slowest, time.monotonic() - started)
            answered.append(time.monotonic() - started_run)
            reasons = {
                n: _ready(api.policy_status(n)).get("reason") for n in policies if n != "healthy"
            }
            if reasons.get("catastrophic") in either["catastrophic"]:
                reasons["catastrophic"] = expected["catastrophic"]
            if reasons == expected and settled_at is None:
                settled_at = time.monotonic() - started_run
            healthy_polls.append(api.policy_status("healthy").get("lastPollTime", ""))
            time.sleep(1.0)
        assert reasons == expected, reasons
        assert slowest < 2.0
        # liveness answered all along: asked about once a second (the loop's pace follows the
        # machine's load), never a gap of 5 s without an answer, the last near the end
        gaps = [b - a for a, b in pairwise(answered)]
        assert max(gaps) < 5.0 and answered[-1] > 36, (max(gaps), len(answered))
        late = [t for t in healthy_polls[len(healthy_polls) // 2 :] if t]
        assert len(set(late)) >= 5, "the healthy policy keeps polling through the second half"
        stalled = {
            n: next(
                (c for c in api.policy_status(n).get("conditions") or [] if c["type"] == "Stalled"),
                {},
            )
            for n in policies
        }
        assert stalled["healthy"].get("status") != "True"
        assert _ready(api.policy_status("healthy")).get("status") == "True"
        for name in ("elsewhere", "backref", "no-secret", "duplicate"):
            assert stalled[name].get("status") == "True", (name, stalled[name])
        print(
            f"\nsix-policy run: {len(answered)} /healthz answers over 40 s, "
            f"slowest {slowest:.3f} s; "
            f"every reason as expected after {settled_at:.1f} s"
        )

        messages = {n: _ready(api.policy_status(n)).get("message", "") for n in policies}
        assert "kafka.attacker.example:9092" in messages["elsewhere"]
        # the aliased copy in the other namespace: refused by cluster id, wrote nothing
        aliased_status = other.policy_status("aliased")
        aliased_ready = _ready(aliased_status)
        assert aliased_ready.get("reason") == "ConflictingPolicy", aliased_status
        assert f"policy {namespace}/healthy (older)" in aliased_ready.get("message", "")
        assert not any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in aliased_status.get("conditions") or []
        )
        assert _documents(other) == [], "the aliased policy wrote a ConfigMap"
        assert _documents(api) == ["healthy.consumer-0", "healthy.consumer-1"]
        assert "backreference" in messages["backref"]
        log = operator.log.read_text(errors="replace") if operator.log else ""
        assert "UnicodeDecodeError" not in log and "Traceback" not in log, log[-3000:]
    finally:
        operator.stop()
        api.delete_namespace()
        api.close()
        other.delete_namespace()
        other.close()
