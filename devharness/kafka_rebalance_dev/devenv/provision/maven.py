"""Maven artifacts: resolve coordinates and their runtime closure with Maven's own resolver."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import run
from kafka_rebalance_dev.devenv.toolchain import REPO_ROOT

TEMPLATES = REPO_ROOT / "scripts" / "provision"
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


def maven_coordinates_xml(coords: Sequence[str]) -> str:
    lines = []
    for coord in coords:
        group, artifact, version = coord.split(":")
        lines.append(
            f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return "\n".join(lines)


def maven_copy(tool: str, name: str, coords: Sequence[str], dest: Path, log: Path) -> list[str]:
    """Resolve `coords` and their runtime closure into `dest`; return the jar file names.

    A generated POM plus maven-dependency-plugin, so Maven's own resolver and ~/.m2 do the work
    (and the mirror/proxy settings of ~/.m2/settings.xml apply, as for any Maven build).
    """
    project = dest.parent / f"{dest.name}-pom"
    project.mkdir(parents=True, exist_ok=True)
    template = (TEMPLATES / "maven-lib.pom.in").read_text()
    pom = template.replace("@ARTIFACT_ID@", name).replace(
        "@DEPENDENCIES@", maven_coordinates_xml(coords)
    )
    (project / "pom.xml").write_text(pom)
    settings = []
    if not (Path.home() / ".m2" / "settings.xml").exists():
        settings = ["-s", str(TEMPLATES / "maven-settings.xml")]
    run(
        tool,
        [
            "mvn",
            "-B",
            "-q",
            "-U",  # retry artifacts an earlier run found missing (Maven caches misses)
            *settings,
            f"{MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={dest}",
        ],
        cwd=project,
        log=log,
    )
    shutil.rmtree(project)
    return sorted(p.name for p in dest.glob("*.jar"))


# The version is the tail from the first "-<digits>." on: so "-0-10_2.13" in
# spark-sql-kafka-0-10_2.13-4.0.0 stays in the artifact, while "-10" in zstd-jni-1.5.6-10 and
# classifiers such as "-linux-x86_64" stay in the version.
JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+\..*)\.jar$")


def jar_artifact(filename: str) -> tuple[str, str]:
    """('log4j-core', '2.25.4') from 'log4j-core-2.25.4.jar'."""
    match = JAR_NAME.match(filename)
    if not match:
        return filename.removesuffix(".jar"), ""
    return match.group("artifact"), match.group("version")


def jar_version(jars: Sequence[str], artifact: str) -> str | None:
    for jar in jars:
        name, version = jar_artifact(jar)
        if name == artifact:
            return version
    return None
