"""The broker plug-in's streams task assignor on a real Kafka 4.4 broker (the `kafka_plans`
broker: `kafka_broker.plan_plugin_overrides()` registers both plan-following task assignors
ahead of `sticky`). Marked `streams`.

One Java program (tests/integration/java/StreamsPluginCheck.java: two Kafka Streams instances,
`group.protocol=streams`, a stateless one-subtopology topology over 4 partitions) reports, as
JSON lines: the group epoch around each switch of the group config `streams.assignor.name`
between the two plan-following names (accepted, but no bump in 4.4.0), around adding and
removing the reserved rack-aware tag key `kafka-rebalance-trigger` in
`streams.rack.aware.assignment.tags` (the recompute trigger: one bump each, KAFKA-19765), the
error for a name no assignor has, and how a signed streams plan that sticky would never choose
(3 tasks on one member, 1 on the other) becomes the members' assignment after one trigger.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.devenv import java_classes
from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.toolchain import Toolchain

from tests.conftest import KafkaHandle

pytestmark = [pytest.mark.integration, pytest.mark.streams]

CHECK = Path(__file__).parent / "java" / "StreamsPluginCheck.java"
NAME, ALT = "kafka-rebalance-plan", "kafka-rebalance-plan-alt"


def _classpath(tools: Toolchain) -> str:
    streams_lib = tools.root / "kafka-streams" / tools.kafka_version / "lib"
    if not any(streams_lib.glob("kafka-streams-*.jar")):
        pytest.fail(f"Kafka Streams jars not provisioned in {streams_lib} (scripts/bootstrap)")
    jars = [*sorted(tools.kafka_libs().glob("*.jar")), *sorted(streams_lib.glob("*.jar"))]
    return ":".join(str(j) for j in jars)


def test_only_the_trigger_tag_bumps_the_epoch_and_a_streams_plan_is_followed(
    tools: Toolchain, kafka_plans: KafkaHandle, plan_keys: Path, tmp_path: Path
) -> None:
    classpath = _classpath(tools)
    classes = java_classes.compiled(CHECK, classpath, tools.java_classes_cache)
    log = tmp_path / "check.log"
    with open(log, "wb") as out:
        done = subprocess.run(
            [
                java_binary(),
                "-Xmx192m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{classes}:{classpath}",
                CHECK.stem,
                kafka_plans.bootstrap_servers,
                "plugin-check",
                "kafka-rebalance-plans",
                str(plan_keys),
                str(tmp_path / "state"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
            check=False,
        )
    text = log.read_text(errors="replace")
    assert done.returncode == 0, text[-4000:]
    results: dict[str, list[dict[str, Any]]] = {}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            results.setdefault(result["step"], []).append(result)
            print(line)

    assert results["initial"][0]["assignorName"] == NAME  # the broker's default: first in the list
    names = results["name"]
    assert [n["name"] for n in names] == [ALT, NAME, ALT]
    # accepted and shown, but no bump (4.4.0: "the new assignor takes effect on the next rebalance")
    for switch in names:
        assert switch["assignorName"] == switch["name"], switch
        assert switch["epochAfter"] == switch["epochBefore"], switch
    for step in ("add", "remove"):  # the reserved rack-aware tag key: one bump per change
        bump = results[step][0]
        assert bump["epochAfter"] == bump["epochBefore"] + 1, bump

    unknown = results["unknown"][0]
    print("unknown assignor name:", unknown["error"])
    assert unknown["error"] != "accepted", unknown
    assert unknown["epochAfter"] == unknown["epochBefore"], unknown

    plan = results["plan"][0]
    assert plan["assignorName"] == ALT
    assert sorted(plan["members"].values()) == ["{0=[0, 1, 2]}", "{0=[3]}"], plan

    broker_log = kafka_plans.cluster.nodes[0].log.read_text(errors="replace")
    assert f"{ALT}: following streams plan for group 'plugin-check'" in broker_log
