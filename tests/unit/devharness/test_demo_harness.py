"""The demo harness's contracts with the parts it drives: the sidecar's command line (the flags
the interfaces file fixes) and the policy it creates (the CRD's vocabulary)."""

from __future__ import annotations

from pathlib import Path

import yaml
from kafka_rebalance_dev.demo.cluster import CRD_FILE, policy_body
from kafka_rebalance_dev.demo.fleet import LEDGER_HANDLER, SidecarSettings, sidecar_command

from kafka_rebalance.cli import build_parser


def settings(**overrides: object) -> SidecarSettings:
    base: dict[str, object] = {
        "bootstrap": "127.0.0.1:9092",
        "group": "g",
        "topic": "orders",
        "policy": "demo",
        "namespace": "ns",
        "kubeconfig": Path("/tmp/kubeconfig"),
        "ledger_dir": Path("/tmp/ledger"),
        "log_dir": Path("/tmp/logs"),
    }
    base.update(overrides)
    return SidecarSettings(**base)  # type: ignore[arg-type]


def test_the_sidecar_command_is_accepted_by_the_real_sidecar_parser() -> None:
    command = sidecar_command(settings(apply_mode="assign", max_poll_records=7), "consumer-1")
    assert command[1:4] == ["-m", "kafka_rebalance.cli", "sidecar"]
    args = build_parser("sidecar").parse_args(command[3:])
    assert args.member == "consumer-1"
    assert args.assignment_configmap == "demo.consumer-1"  # <policy>.<pod>, the operator's name
    assert args.namespace == "ns" and args.kubeconfig == "/tmp/kubeconfig"
    assert args.group == "g" and args.topics == "orders"
    assert args.apply_mode == "assign"
    assert args.handler_spec == LEDGER_HANDLER == "kafka_rebalance_dev.demo.ledger:record"
    assert args.max_poll_records == 7
    assert args.auto_offset_reset == "earliest"


def test_the_policy_uses_only_values_the_crd_allows() -> None:
    crd = yaml.safe_load(CRD_FILE.read_text())
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props = spec_schema["properties"]
    for strategy in props["strategy"]["enum"]:
        body = policy_body(
            "demo",
            group="g",
            bootstrap="127.0.0.1:9092",
            topic="orders",
            app="consumer",
            strategy=strategy,
            mode="observe",
            weight_from="adaptive",
            rebalance={"maxMovesPerRound": 2},
        )
        spec = body["spec"]
        assert spec["strategy"] == strategy
        members = props["members"]["properties"]
        assert spec["members"]["weightFrom"] in members["weightFrom"]["enum"]
        rebalance = props["rebalance"]["properties"]
        assert spec["rebalance"]["mode"] in rebalance["mode"]["enum"]
        assert set(spec["rebalance"]) <= set(rebalance)
        assert spec["load"]["model"] in props["load"]["properties"]["model"]["enum"]
        assert spec["apply"]["mode"] in props["apply"]["properties"]["mode"]["enum"]
        assert set(spec) <= set(props)
