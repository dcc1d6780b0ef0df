"""Spark's Kafka connector: the jars PySpark lacks, resolved from Maven Central."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import ProvisionError
from kafka_rebalance_dev.devenv.provision.maven import jar_artifact, maven_copy
from kafka_rebalance_dev.devenv.toolchain import Toolchain


def pyspark_jars_dir(tool: str, expected_version: str) -> Path:
    try:
        installed = metadata.version("pyspark")
    except metadata.PackageNotFoundError as exc:
        raise ProvisionError(
            f"{tool}: pyspark is not installed in this Python ({sys.executable}); "
            "run scripts/bootstrap (pip install -e '.[dev]') first"
        ) from exc
    if installed != expected_version:
        raise ProvisionError(
            f"{tool}: installed pyspark is {installed} but versions.toml [spark].version is "
            f"{expected_version}; make them equal (pyproject.toml pins pyspark)"
        )
    files = metadata.files("pyspark") or []
    for f in files:
        if f.name.endswith(".jar") and f.parent.name == "jars":
            return Path(str(f.locate())).parent
    raise ProvisionError(f"{tool}: cannot find pyspark's jars/ directory")


def build_spark_kafka(tc: Toolchain) -> Callable[[Path, Path], dict]:
    version = tc.spark_version

    def build(tmp: Path, log: Path) -> dict:
        tool = f"spark-kafka {version}"
        pyspark_jars = pyspark_jars_dir(tool, version)
        have = {jar_artifact(p.name)[0]: p.name for p in pyspark_jars.glob("*.jar")}
        staging = tmp / "all"
        coord = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"
        resolved = maven_copy(tool, f"spark-kafka-{version}", [coord], staging, log)
        jars = tmp / "jars"
        jars.mkdir()
        kept, skipped = [], []
        for name in resolved:
            artifact = jar_artifact(name)[0]
            if artifact in have:
                skipped.append(f"{name} (pyspark has {have[artifact]})")
            else:
                shutil.move(staging / name, jars / name)
                kept.append(name)
        shutil.rmtree(staging)
        if not any(n.startswith("spark-sql-kafka-0-10") for n in kept):
            raise ProvisionError(f"{tool}: the connector jar itself was not resolved")
        return {"jars": kept, "already_in_pyspark": skipped, "pyspark_jars_dir": str(pyspark_jars)}

    return build
