"""The librdkafka engine's settings: every kafka-python option the sidecar sets is translated,
anything else is refused by name, and the engine is refused outside assign mode. (That it
consumes, hands over and loses nothing is proven on a real broker: test_sidecar_kafka.py and
test_e2e_sidecars.py run their assign-mode hand-over tests with both engines.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kafka_rebalance_sidecar.librdkafka_engine import EngineError, librdkafka_config
from kafka_rebalance_sidecar.runner import SidecarConfig

ROOT = Path(__file__).resolve().parents[3]


def test_the_sidecars_own_options_and_its_security_settings_are_translated() -> None:
    config = librdkafka_config(
        {
            "bootstrap_servers": ["a:9092", "b:9092"],
            "group_id": "g",
            "client_id": "kafka-rebalance-sidecar-m-0",
            "enable_auto_commit": False,
            "auto_offset_reset": "latest",
            "max_poll_records": 50,  # the poll loop's, not the client's
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "u",
            "sasl_plain_password": "p",
            "ssl_cafile": "/ca.crt",
            "ssl_certfile": "/tls.crt",
            "ssl_keyfile": "/tls.key",
            "ssl_password": "kp",
        }
    )
    assert config == {
        "bootstrap.servers": "a:9092,b:9092",
        "group.id": "g",
        "client.id": "kafka-rebalance-sidecar-m-0",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "check.crcs": True,  # kafka-python checks CRCs; librdkafka does not by default
        "fetch.queue.backoff.ms": 20,
        "auto.offset.reset": "latest",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.crt",
        "ssl.certificate.location": "/tls.crt",
        "ssl.key.location": "/tls.key",
        "ssl.key.password": "kp",
    }


def test_a_setting_without_a_translation_is_refused_by_name() -> None:
    with pytest.raises(EngineError, match="ssl_check_hostname, ssl_crlfile"):
        librdkafka_config({"group_id": "g", "ssl_crlfile": "/crl", "ssl_check_hostname": False})


def test_the_engine_is_refused_outside_assign_mode() -> None:
    with pytest.raises(ValueError, match="assign mode only"):
        SidecarConfig("b:9092", "g", ("t",), "m-0", apply_mode="group", engine="librdkafka")
    with pytest.raises(ValueError, match="--engine 'rdkafka'"):
        SidecarConfig("b:9092", "g", ("t",), "m-0", apply_mode="assign", engine="rdkafka")
    assert SidecarConfig("b:9092", "g", ("t",), "m-0", apply_mode="assign", engine="librdkafka")


def test_cli_refuses_group_mode_with_librdkafka_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "sidecar", "--bootstrap-servers=b:1",
         "--group=g", "--topics=t", "--member=m-0", f"--assignment={tmp_path / 'a.json'}",
         "--deliver-to=http://127.0.0.1:1/", "--engine=librdkafka"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "--engine librdkafka works in assign mode only" in result.stderr
