"""The operator's plan credentials go only to its plan cluster: plan flags without one are
refused at start with one line (exit 2), and an empty --allowed-bootstrap-servers is said once."""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_rebalance import operator_command


def _args(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    operator_command.register(parser.add_subparsers())
    return parser.parse_args(["operator", *flags])


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    path = tmp_path / "plan-keys"
    path.write_text("plan-key-0123456789abcdef\n")
    return path


def test_plan_flags_without_a_plan_cluster_exit_2_with_one_line(keys: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "operator", "--plan-key-file", str(keys)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    (line,) = [text for text in done.stderr.splitlines() if "ERROR" in text]
    assert "name no plan cluster: set --plan-bootstrap-servers" in line
    assert "Traceback" not in done.stderr


def test_the_plan_cluster_comes_from_the_flag_or_the_client_config(
    keys: Path, tmp_path: Path
) -> None:
    config = tmp_path / "plan-client.json"
    config.write_text(json.dumps({"security_protocol": "SASL_SSL"}))
    with pytest.raises(ValueError, match="name no plan cluster"):
        operator_command._settings(_args("--plan-client-config", str(config)))
    settings = operator_command._settings(
        _args(
            "--plan-client-config",
            str(config),
            "--plan-key-file",
            str(keys),
            "--plan-bootstrap-servers",
            "plans:9093",
        )
    )
    assert settings.plan_client == {
        "security_protocol": "SASL_SSL",
        "bootstrap_servers": "plans:9093",
    }
    config.write_text(json.dumps({"bootstrap_servers": ["plans-0:9093", "plans-1:9093"]}))
    settings = operator_command._settings(_args("--plan-client-config", str(config)))
    assert settings.plan_client["bootstrap_servers"] == ["plans-0:9093", "plans-1:9093"]
    config.write_text(json.dumps({"bootstrap_servers": ""}))
    with pytest.raises(ValueError, match="non-empty host:port"):
        operator_command._settings(_args("--plan-client-config", str(config)))
    # no plan flag at all: the operator starts; broker-mode policies are Stalled instead
    assert operator_command._settings(_args()).plan_client == {}


def test_an_empty_allowlist_is_said_once_at_start(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        operator_command._settings(_args())
    said = [r.getMessage() for r in caplog.records if "allowed-bootstrap-servers" in r.getMessage()]
    assert said == [
        "--allowed-bootstrap-servers is empty: any tenant may name any server in "
        "spec.kafka.bootstrapServers, and the operator connects there with that tenant's "
        "Secret (docs/security.md)"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        operator_command._settings(_args("--allowed-bootstrap-servers", "kafka:9092"))
    assert not [r for r in caplog.records if "allowed-bootstrap-servers" in r.getMessage()]
