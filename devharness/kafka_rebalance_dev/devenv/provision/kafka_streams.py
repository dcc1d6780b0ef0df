"""Kafka Streams (and RocksDB) for the streams-group tests' Java applications.

Apache's binary distribution ships kafka-streams and rocksdbjni in libs/; the broker provisioned
here is resolved from `kafka_2.13` alone, which does not depend on them. This component resolves
`org.apache.kafka:kafka-streams` at the broker's version into lib/, keeping only the jars the
broker's libs/ lacks, so an application's classpath is the broker's libs/ plus this lib/ with no
artifact twice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import ProvisionError
from kafka_rebalance_dev.devenv.provision.maven import jar_artifact, maven_copy
from kafka_rebalance_dev.devenv.toolchain import Toolchain

KAFKA_STREAMS = "org.apache.kafka:kafka-streams"


def build_kafka_streams(tc: Toolchain) -> Callable[[Path, Path], dict]:
    def build(tmp: Path, log: Path) -> dict:
        version = tc.kafka_version
        tool = f"kafka-streams {version}"
        lib = tmp / "lib"
        jars = maven_copy(
            tool, f"kafka-streams-{version}", [f"{KAFKA_STREAMS}:{version}"], lib, log
        )
        broker = {jar_artifact(p.name)[0] for p in tc.kafka_libs().glob("*.jar")}
        kept = []
        for name in jars:
            if jar_artifact(name)[0] in broker:
                (lib / name).unlink()  # the broker's libs/ has it, at the same pinned version
            else:
                kept.append(name)
        if f"kafka-streams-{version}.jar" not in kept:
            raise ProvisionError(f"{tool}: kafka-streams-{version}.jar was not resolved")
        return {"jars": kept}

    return build
