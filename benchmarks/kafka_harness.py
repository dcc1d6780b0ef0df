"""Build and run the Java harness (benchmarks/java) that times Kafka's own assignors.

The Kafka version has one source of truth, `[kafka].version` in versions.toml; it reaches Maven as
`-Dkafka.version`, so the jars timed here are the ones the project's broker runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JAVA_DIR = ROOT / "benchmarks" / "java"
TARGET = JAVA_DIR / "target"
MAIN_CLASS = "dev.kafkarebalance.bench.AssignorBench"
JVM_OPTIONS = ["-Xms2g", "-Xmx6g", "-XX:+UseParallelGC"]

KAFKA_NAMES = {
    # ours -> Kafka's, for the side-by-side table
    "cooperative-sticky": "cooperative-sticky",
    "sticky": "sticky",
    "range": "range",
}


class HarnessError(RuntimeError):
    """The Java side could not be built or run; the message says what to install or fix."""


def kafka_version() -> str:
    with (ROOT / "versions.toml").open("rb") as handle:
        return tomllib.load(handle)["kafka"]["version"]


def java_version() -> str:
    java = shutil.which("java")
    if java is None:
        return "not installed"
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "unknown"


def _stale(version: str) -> bool:
    stamp = TARGET / "kafka-version.txt"
    classpath = TARGET / "classpath.txt"
    jar_classes = TARGET / "classes" / "dev" / "kafkarebalance" / "bench" / "AssignorBench.class"
    if not (stamp.exists() and classpath.exists() and jar_classes.exists()):
        return True
    if stamp.read_text().strip() != version:
        return True
    built = jar_classes.stat().st_mtime
    sources = [JAVA_DIR / "pom.xml", *JAVA_DIR.glob("src/**/*.java")]
    return any(source.stat().st_mtime > built for source in sources)


def build(version: str, log: Path) -> str:
    """Compile the harness (if sources or the Kafka version changed); return its classpath."""
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise HarnessError("the Kafka side needs java (17+) and mvn on PATH")
    if _stale(version):
        TARGET.mkdir(parents=True, exist_ok=True)
        for goals in (
            ["package", "-DskipTests"],
            ["dependency:build-classpath", f"-Dmdep.outputFile={TARGET / 'classpath.txt'}"],
        ):
            with log.open("a") as handle:
                done = subprocess.run(
                    ["mvn", "-B", "-q", f"-Dkafka.version={version}", *goals],
                    cwd=JAVA_DIR,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    check=False,
                )
            if done.returncode != 0:
                raise HarnessError(f"mvn {' '.join(goals)} failed; see {log}")
        (TARGET / "kafka-version.txt").write_text(version + "\n")
    return f"{TARGET / 'classes'}{os.pathsep}{(TARGET / 'classpath.txt').read_text().strip()}"


def run_cases(
    classpath: str,
    jobs: list[tuple[Path, Path]],
    assignors: list[str],
    warmup: int,
    iterations: int,
    max_seconds: float,
    call_timeout: float,
    log: Path,
) -> list[dict[str, Any]]:
    """Run every (case file, result file) job in one JVM, in order; return the parsed results."""
    command = [
        "java",
        *JVM_OPTIONS,
        "-cp",
        classpath,
        MAIN_CLASS,
        "--assignors",
        ",".join(assignors),
        "--warmup",
        str(warmup),
        "--iterations",
        str(iterations),
        "--max-seconds",
        str(max_seconds),
        "--call-timeout",
        str(call_timeout),
        *[f"{case}:{result}" for case, result in jobs],
    ]
    with log.open("a") as handle:
        # Own process group, stopped with us: an interrupted benchmark must not leave a JVM
        # spinning on a minutes-long assignment.
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode = process.wait()
        except BaseException:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait()
            raise
    if returncode != 0:
        raise HarnessError(f"the Java harness exited with {returncode}; see {log}")
    results = []
    for _, result in jobs:
        with result.open() as handle:
            results.append(json.load(handle))
    return results
