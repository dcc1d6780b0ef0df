"""Kafka brokers (4.x and the 3.9 compat line) from Maven Central, with their logging set up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import ProvisionError
from kafka_rebalance_dev.devenv.provision.maven import jar_version, maven_copy
from kafka_rebalance_dev.devenv.toolchain import Toolchain

# Kafka 3.9's own distribution logs through reload4j behind slf4j 1.7; its POM names neither.
RELOAD4J_VERSION = "1.2.25"

LOG4J2_PROPERTIES = """\
# Written by kafka-rebalance dev provision: the broker logs INFO to stdout, the noisy request
# and state-change loggers only at WARN (enough to see why a broker did not start).
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""

# Command-line tools (StorageTool) print their answer on stdout: keep logging off it.
TOOLS_LOG4J2_PROPERTIES = """\
# Written by kafka-rebalance dev provision: Kafka's command-line tools log WARN+ to stderr only,
# so stdout carries just the tool's answer (e.g. `StorageTool random-uuid`).
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""

TOOLS_LOG4J1_PROPERTIES = """\
# Written by kafka-rebalance dev provision: Kafka's command-line tools log WARN+ to stderr only.
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

LOG4J1_PROPERTIES = """\
# Written by kafka-rebalance dev provision (reload4j, the log4j 1.x API Kafka 3.9 logs through).
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""


def build_kafka(tc: Toolchain, version: str) -> Callable[[Path, Path], dict]:
    major = int(version.split(".", 1)[0])

    def build(tmp: Path, log: Path) -> dict:
        libs = tmp / "libs"
        tool = f"kafka {version}"
        jars = maven_copy(
            tool, f"kafka-{version}", [f"org.apache.kafka:kafka_2.13:{version}"], libs, log
        )
        slf4j = jar_version(jars, "slf4j-api")
        if major >= 4:
            # 4.x brings log4j-core/api (via kafka-server) but no slf4j binding: without
            # log4j-slf4j-impl the broker prints SLF4J's NOP warning and logs nothing at all.
            log4j = jar_version(jars, "log4j-core")
            if log4j is None:
                raise ProvisionError(f"{tool}: its dependencies carry no log4j-core; cannot log")
            extras = [f"org.apache.logging.log4j:log4j-slf4j-impl:{log4j}"]
            configs = {
                "log4j2.properties": LOG4J2_PROPERTIES,
                "tools-log4j2.properties": TOOLS_LOG4J2_PROPERTIES,
            }
        else:
            if slf4j is None:
                raise ProvisionError(f"{tool}: its dependencies carry no slf4j-api")
            extras = [
                f"org.slf4j:slf4j-reload4j:{slf4j}",
                f"ch.qos.reload4j:reload4j:{RELOAD4J_VERSION}",
            ]
            configs = {
                "log4j.properties": LOG4J1_PROPERTIES,
                "tools-log4j.properties": TOOLS_LOG4J1_PROPERTIES,
            }
        extra_jars = maven_copy(tool, f"kafka-{version}-logging", extras, libs, log)
        for config_name, config_text in configs.items():
            (tmp / config_name).write_text(config_text)
        all_jars = sorted(set(jars) | set(extra_jars))
        return {
            "jars": all_jars,
            "logging": extras,
            "slf4j_api": slf4j,
            "log4j_config": config_name,
        }

    return build


def check_kafka(version: str) -> Callable[[Path], None]:
    def check(final: Path) -> None:
        libs = final / "libs"
        core = libs / f"kafka_2.13-{version}.jar"
        if not core.is_file():
            raise ProvisionError(f"kafka {version}: {core} missing after provisioning")

    return check
