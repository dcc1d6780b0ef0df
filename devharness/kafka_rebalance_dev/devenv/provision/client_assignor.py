"""The Java client-side assignor (`client-assignor/`, docs/java-assignor.md) and the Spring Kafka
jars its integration test runs a listener app with.

The assignor is built with Maven against the pinned Kafka (versions.toml [kafka].version), its
JUnit tests (including the user_data vectors shared with the Python wire module,
tests/data/wire/user_data_vectors.json) run as part of the build, and the jar is kept with its
runtime dependencies in `lib/`. Like the broker plug-in's, its cache key is a digest of its
sources and of the vectors (`toolchain.client_assignor_version`), so a changed source is a new
version and two worktrees never replace each other's jar. Spring Kafka ([spring_kafka].version)
is resolved with its runtime closure by Maven's own resolver; its kafka-clients is dropped, so
the broker's pinned one is the only one on a classpath.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import ProvisionError, run
from kafka_rebalance_dev.devenv.provision.maven import (
    MAVEN_DEPENDENCY_PLUGIN,
    TEMPLATES,
    maven_copy,
)
from kafka_rebalance_dev.devenv.toolchain import CLIENT_ASSIGNOR_SOURCE, WIRE_VECTORS, Toolchain

SPRING_KAFKA = "org.springframework.kafka:spring-kafka"


def _settings() -> list[str]:
    if (Path.home() / ".m2" / "settings.xml").exists():
        return []
    return ["-s", str(TEMPLATES / "maven-settings.xml")]


def build_client_assignor(tc: Toolchain) -> Callable[[Path, Path], dict]:
    def build(tmp: Path, log: Path) -> dict:
        tool = f"client-assignor {tc.kafka_version}"
        source = tmp / "src"
        shutil.copytree(
            CLIENT_ASSIGNOR_SOURCE, source, ignore=shutil.ignore_patterns("target", ".*")
        )
        common = [
            *_settings(),
            f"-Dkafka.version={tc.kafka_version}",
            f"-Dwire.vectors={WIRE_VECTORS}",
        ]
        run(tool, ["mvn", "-B", "-q", *common, "package"], cwd=source, log=log)
        built = sorted((source / "target").glob("kafka-rebalance-client-assignor-*.jar"))
        if len(built) != 1:
            raise ProvisionError(f"{tool}: expected one jar under target/, found {built}")
        shutil.move(built[0], tmp / tc.client_assignor_jar.name)
        copy = f"{MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies"
        lib = f"-DoutputDirectory={tmp / 'lib'}"
        run(
            tool,
            ["mvn", "-B", "-q", *common, copy, "-DincludeScope=runtime", lib],
            cwd=source,
            log=log,
        )
        reports = sorted((source / "target" / "surefire-reports").glob("*.txt"))
        tests = [
            line for r in reports for line in r.read_text().splitlines() if "Tests run" in line
        ]
        shutil.rmtree(source)
        return {"jar": tc.client_assignor_jar.name, "kafka": tc.kafka_version, "junit": tests}

    return build


def build_spring_kafka(tc: Toolchain) -> Callable[[Path, Path], dict]:
    def build(tmp: Path, log: Path) -> dict:
        version = tc.spring_kafka_dir.name
        lib = tmp / "lib"
        coords = [f"{SPRING_KAFKA}:{version}"]
        jars = maven_copy(f"spring-kafka {version}", "spring-kafka", coords, lib, log)
        for jar in lib.glob("kafka-clients-*.jar"):
            jar.unlink()  # the broker's pinned kafka-clients is used
        return {"jars": [j for j in jars if not j.startswith("kafka-clients-")]}

    return build
