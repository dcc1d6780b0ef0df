"""examples/consumer-statefulset-secured.yaml: the sidecar's flags parse, and every file a flag
names is one the pod mounts from the Secret the paired policy uses.

The args go through the real `kafka-rebalance sidecar` parser and security rules, with the
mount directory swapped for a temporary one holding the example Secret's values, so a flag
renamed or a mount path changed in one place only fails here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kafka_rebalance.cli import build_parser
from kafka_rebalance.sidecar_command import _security_options

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def _load() -> tuple[dict, dict, dict]:
    (sts,) = list(yaml.safe_load_all((EXAMPLES / "consumer-statefulset-secured.yaml").read_text()))
    secret = yaml.safe_load((EXAMPLES / "kafka-client-secret.yaml").read_text())
    policy = yaml.safe_load((EXAMPLES / "policies" / "sticky.yaml").read_text())
    return sts, secret, policy


def test_pairs_with_the_sticky_policy_and_its_secret() -> None:
    sts, secret, policy = _load()
    pod = sts["spec"]["template"]["spec"]
    (sidecar,) = [c for c in pod["containers"] if c["name"] == "kafka-rebalance"]
    args = dict(a.removeprefix("--").split("=", 1) for a in sidecar["args"])
    assert args["group"] == policy["spec"]["groupId"]
    assert args["bootstrap-servers"] == policy["spec"]["kafka"]["bootstrapServers"]
    selector = policy["spec"]["members"]["selector"]["matchLabels"]
    assert selector.items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    # the operator and the sidecar use the same Secret and the same protocol and mechanism
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == policy["spec"]["kafka"]["secretRef"]["name"]
    assert secret["metadata"]["name"] == volume["secret"]["secretName"]
    assert args["security-protocol"] == secret["stringData"]["securityProtocol"]
    assert args["sasl-mechanism"] == secret["stringData"]["saslMechanism"]
    env = {e["name"]: e for e in sidecar["env"]}
    ref = env["KAFKA_SASL_USERNAME"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "kafka-client", "key": "saslUsername"}
    assert args["sasl-username"] == "$(KAFKA_SASL_USERNAME)"
    # the password is in no argument (the username here equals the group name, so only the
    # reference above shows it is not written into the args)
    assert not any(secret["stringData"]["saslPassword"] in a for a in sidecar["args"])


def test_flags_parse_and_name_mounted_files(tmp_path: Path) -> None:
    sts, secret, _policy = _load()
    pod = sts["spec"]["template"]["spec"]
    (sidecar,) = [c for c in pod["containers"] if c["name"] == "kafka-rebalance"]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    (mount,) = [m for m in sidecar["volumeMounts"] if m["name"] == volume["name"]]
    # materialise the Secret volume as the kubelet would: one file per listed item
    for item in volume["secret"]["items"]:
        (tmp_path / item["path"]).write_text(secret["stringData"][item["key"]])
    argv = [
        a.replace(mount["mountPath"], str(tmp_path))
        .replace("$(POD_NAME)", "inventory-sync-0")
        .replace("$(KAFKA_SASL_USERNAME)", secret["stringData"]["saslUsername"])
        for a in sidecar["args"]
    ]
    args = build_parser("sidecar").parse_args(["sidecar", *argv])
    options = _security_options(args)
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": secret["stringData"]["saslUsername"],
        "sasl_plain_password": secret["stringData"]["saslPassword"],
        "ssl_cafile": str(tmp_path / "ca.crt"),
    }
