"""The KIP-848 broker plug-in (`broker-plugin/`, docs/kip848.md): built with Maven against the
pinned Kafka, its JUnit tests run as part of the build, and only the jar kept."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import ProvisionError, run
from kafka_rebalance_dev.devenv.provision.maven import TEMPLATES
from kafka_rebalance_dev.devenv.toolchain import (
    BROKER_PLUGIN_SOURCE,
    SHARE_PLAN_VECTORS,
    STREAMS_PLAN_VECTORS,
    Toolchain,
)

JAR = "kafka-rebalance-broker-plugin.jar"


def build_broker_plugin(tc: Toolchain) -> Callable[[Path, Path], dict]:
    def build(tmp: Path, log: Path) -> dict:
        tool = f"broker-plugin {tc.kafka_version}"
        source = tmp / "src"
        shutil.copytree(BROKER_PLUGIN_SOURCE, source, ignore=shutil.ignore_patterns("target", ".*"))
        settings = []
        if not (Path.home() / ".m2" / "settings.xml").exists():
            settings = ["-s", str(TEMPLATES / "maven-settings.xml")]
        run(
            tool,
            [
                "mvn",
                "-B",
                "-q",
                *settings,
                f"-Dkafka.version={tc.kafka_version}",
                f"-Dwire.vectors={STREAMS_PLAN_VECTORS}",
                f"-Dwire.share.vectors={SHARE_PLAN_VECTORS}",
                "package",
            ],
            cwd=source,
            log=log,
        )
        built = sorted((source / "target").glob("kafka-rebalance-broker-plugin-*.jar"))
        if len(built) != 1:
            raise ProvisionError(f"{tool}: expected one jar under target/, found {built}")
        shutil.move(built[0], tmp / JAR)
        reports = sorted((source / "target" / "surefire-reports").glob("*.txt"))
        tests = [
            line for r in reports for line in r.read_text().splitlines() if "Tests run" in line
        ]
        shutil.rmtree(source)
        return {"jar": JAR, "kafka": tc.kafka_version, "junit": tests}

    return build
