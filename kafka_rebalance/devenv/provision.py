"""Provision the pinned toolchain into the cache (`kafka-rebalance dev provision`).

Everything the tests and demo run (Kafka brokers, a real Kubernetes control plane, etcd, KWOK,
helm, kubeconform, Spark's Kafka connector) is built or fetched from the package registries this
project may reach (Maven Central, the Go module proxy) rather than from release downloads, and
pinned in versions.toml.

Why the shape: a fresh CI machine pays for this once per run under a 90-minute budget, and a
developer's machine keeps it for months. So each tool is built in a temp dir beside its final
place and renamed into `<cache>/<tool>/<version>/` only when complete (an interrupted run leaves
nothing that looks finished), a second run only checks markers and returns in well under a
second per tool, and Go and Maven keep their own default caches, which survive between runs.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import yaml

from kafka_rebalance.devenv.toolchain import (
    KUBE_BINARIES,
    MARKER,
    REPO_ROOT,
    Toolchain,
    is_provisioned,
    toolchain,
)

TEMPLATES = REPO_ROOT / "scripts" / "provision"
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# Kafka 3.9's own distribution logs through reload4j behind slf4j 1.7; its POM names neither.
RELOAD4J_VERSION = "1.2.25"
# A fixed date keeps rebuilt binaries byte-identical; /version shows it, nothing checks it.
BUILD_DATE = "1970-01-01T00:00:00Z"


class ProvisionError(RuntimeError):
    """A tool could not be provisioned; the message names the tool and the failing command."""

    def __init__(self, message: str, failed: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.failed = list(failed)  # labels ('spark-kafka 4.3.0') of the tools that failed


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Maven's closing advice lines, identical for every failure: noise in an error message.
MAVEN_BOILERPLATE = re.compile(
    r"^\[ERROR\]\s*$|Re-run Maven|To see the full stack trace|For more information about the "
    r"errors|^\[ERROR\] \[Help 1\]"
)


def failure_tail(output: str, lines: int = 25) -> str:
    """The informative end of a failed command's output (colour codes and boilerplate dropped)."""
    kept = [
        line
        for line in ANSI_ESCAPE.sub("", output).splitlines()
        if line.strip() and not MAVEN_BOILERPLATE.search(line)
    ]
    return "\n".join(kept[-lines:])


def say(message: str) -> None:
    print(f"[provision] {message}", file=sys.stderr, flush=True)


# ---- running commands -------------------------------------------------------------------------
def run(
    tool: str,
    cmd: Sequence[str],
    *,
    cwd: Path,
    log: Path,
    env: dict[str, str] | None = None,
) -> str:
    """Run one build command, appending its output to `log`; return its stdout+stderr.

    Output goes to a file, not the terminal, because Go and Maven print thousands of lines; on
    failure the tail is quoted in the error so nobody has to go looking for the log.
    """
    merged = {**os.environ, **(env or {})}
    with log.open("a") as fh:
        fh.write(f"\n$ {shlex.join(cmd)}\n")
        fh.flush()
        try:
            # Own process group, so an interrupted provision (Ctrl-C, SIGTERM from CI) can take
            # the whole build down with it (go build forks compilers) instead of leaving it
            # writing into a temp dir the next run is about to delete.
            proc = subprocess.Popen(
                list(cmd),
                cwd=cwd,
                env=merged,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise ProvisionError(
                f"{tool}: `{cmd[0]}` is not installed (needed for {tool})"
            ) from exc
        try:
            output, _ = proc.communicate()
        except BaseException:
            stop_group(proc)
            raise
        fh.write(output)
    if proc.returncode != 0:
        tail = failure_tail(output)
        raise ProvisionError(
            f"{tool}: command failed with exit code {proc.returncode}: {shlex.join(cmd)}\n"
            f"(in {cwd}; full output in {log})\n{tail}"
        )
    return output


def stop_group(proc: subprocess.Popen) -> None:
    """Terminate a build command's process group (by its own pgid), then kill what remains."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _raise_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP become SystemExit so cleanup (child groups, temp dirs) runs."""
    raise SystemExit(128 + signum)


def go_env() -> dict[str, str]:
    # Static binaries that run on any Linux box; never let Go fetch another toolchain silently.
    return {"CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}


def go_module_info(tool: str, module: str, version: str, work: Path, log: Path) -> dict:
    """`go mod download -json`: where a module's go.mod and source landed, and its VCS origin."""
    out = run(
        tool,
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=work,
        log=log,
        env={"GOTOOLCHAIN": "local", "GOFLAGS": ""},
    )
    return json.loads(out[out.index("{") :])


def go_version_line() -> str:
    """The installed Go's `go` directive (e.g. 1.26.8), for generated wrapper modules."""
    out = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=False)
    match = re.match(r"go(\d+\.\d+(?:\.\d+)?)", out.stdout.strip())
    if not match:
        raise ProvisionError(f"go: cannot read the Go version (`go env GOVERSION`: {out.stdout!r})")
    return match.group(1)


def ldflags(*pairs: tuple[str, str]) -> str:
    return " ".join(["-s", "-w", *(f"-X {k}={v}" for k, v in pairs)])


# ---- the atomic install frame -----------------------------------------------------------------
@dataclass(frozen=True)
class Component:
    """One cached tool: its name, pinned version, final directory and how to build it."""

    name: str
    version: str
    target: Path
    build: Callable[[Path, Path], dict]  # (temp dir, log file) -> facts for the marker
    check: Callable[[Path], None] | None = None  # smoke check of the built dir, before rename

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


@contextlib.contextmanager
def cache_lock(root: Path) -> Iterator[None]:
    """Serialise concurrent provision runs (two pytest sessions, CI retries) on one cache."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".provision.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def install(component: Component) -> tuple[str, float]:
    """Build `component` unless present; return ('reused'|'built', seconds)."""
    start = time.monotonic()
    final = component.target
    if is_provisioned(final):
        return "reused", time.monotonic() - start
    final.parent.mkdir(parents=True, exist_ok=True)
    # Callers hold the cache lock, so any temp dir of this tool is a leftover of an interrupted
    # run (killed CI job, Ctrl-C) and can go.
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    log = final.parent / f"{final.name}.build.log"
    log.write_text(f"# provisioning {component.label} into {final}\n")
    say(f"{component.label}: building (log: {log})")
    try:
        facts = component.build(tmp, log)
        if component.check is not None:  # on the temp dir: a failed check must not look done
            component.check(tmp)
        elapsed = time.monotonic() - start
        marker = {
            "tool": component.name,
            "version": component.version,
            "build_seconds": round(elapsed, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **facts,
        }
        (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        if final.exists():  # a leftover without marker (e.g. deleted by hand): replace it
            shutil.rmtree(final)
        os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return "built", time.monotonic() - start


# ---- Maven artifacts --------------------------------------------------------------------------
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


# ---- Kafka ------------------------------------------------------------------------------------
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


# ---- Kubernetes control plane -----------------------------------------------------------------
STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)
STAGING_REQUIRE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+v0\.0\.0\s*$", re.MULTILINE)


def kubernetes_wrapper_gomod(upstream_gomod: str, version: str, go_version: str) -> str:
    """A go.mod that can build k8s.io/kubernetes commands from the module proxy.

    k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging
    paths; replace directives of a dependency are ignored, so the wrapper (the main module)
    replaces each one with its published v0.<minor>.<patch> tag instead.
    """
    _, minor, patch = version.split(".")
    staging_version = f"v0.{minor}.{patch}"
    required = set(STAGING_REQUIRE.findall(upstream_gomod))
    replaced = set(STAGING_REPLACE.findall(upstream_gomod))
    needed = sorted(required & replaced)
    if not needed:
        raise ProvisionError("kubernetes: found no staging modules in k8s.io/kubernetes's go.mod")
    godebug = re.findall(r"^godebug .*$", upstream_gomod, re.MULTILINE)
    lines = [
        "// Generated by kafka-rebalance dev provision; see docs/provisioning.md.",
        "module kafka-rebalance.local/kubernetes-build",
        "",
        f"go {go_version}",
        "",
        *godebug,
        "",
        f"require k8s.io/kubernetes v{version}",
        "",
        "replace (",
        *(f"\t{m} => {m} {staging_version}" for m in needed),
        ")",
        "",
    ]
    return "\n".join(lines)


def version_ldflags(version: str, commit: str) -> str:
    """Make /version and `kubectl version` report the real release (not v0.0.0-master)."""
    major, minor, _ = version.split(".")
    pairs = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        pairs += [
            (f"{pkg}.gitVersion", f"v{version}"),
            (f"{pkg}.gitMajor", major),
            (f"{pkg}.gitMinor", minor),
            (f"{pkg}.gitCommit", commit),
            (f"{pkg}.gitTreeState", "clean"),
            (f"{pkg}.buildDate", BUILD_DATE),
        ]
    return ldflags(*pairs)


def build_kubernetes(tc: Toolchain) -> Callable[[Path, Path], dict]:
    version = tc.kubernetes_version

    def build(tmp: Path, log: Path) -> dict:
        tool = f"kubernetes {version}"
        src = tmp / "src"
        src.mkdir()
        info = go_module_info(tool, "k8s.io/kubernetes", f"v{version}", src, log)
        upstream = Path(info["GoMod"]).read_text()
        commit = (info.get("Origin") or {}).get("Hash", "")
        (src / "go.mod").write_text(kubernetes_wrapper_gomod(upstream, version, go_version_line()))
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        cmd = [
            "go",
            "build",
            "-trimpath",
            "-ldflags",
            version_ldflags(version, commit),
            "-o",
            f"{bin_dir}/",
            *(f"k8s.io/kubernetes/cmd/{b}" for b in KUBE_BINARIES),
        ]
        run(tool, cmd, cwd=src, log=log, env=go_env())
        shutil.copy(src / "go.mod", tmp / "wrapper.go.mod")
        shutil.rmtree(src)
        return {"binaries": list(KUBE_BINARIES), "git_commit": commit}

    return build


def check_binary_version(path_of: Callable[[Path], Path], args: Sequence[str], expect: str):
    def check(final: Path) -> None:
        binary = path_of(final)
        out = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, check=False, timeout=60
        )
        text = out.stdout + out.stderr
        if expect not in text:
            raise ProvisionError(
                f"{binary.name}: `{shlex.join([str(binary), *args])}` "
                f"did not report {expect}:\n{text}"
            )

    return check


# ---- etcd -------------------------------------------------------------------------------------
ETCD_SIBLINGS = ("api/v3", "client/pkg/v3", "client/v3", "pkg/v3")


def etcd_wrapper_gomod(version: str, go_version: str) -> str:
    """etcd's server module replaces its sibling modules with ../ paths; pin their tags instead."""
    lines = [
        "// Generated by kafka-rebalance dev provision; see docs/provisioning.md.",
        "module kafka-rebalance.local/etcd-build",
        "",
        f"go {go_version}",
        "",
        "require (",
        f"\tgo.etcd.io/etcd/server/v3 v{version}",
        *(f"\tgo.etcd.io/etcd/{m} v{version}" for m in ETCD_SIBLINGS),
        ")",
        "",
    ]
    return "\n".join(lines)


def build_etcd(tc: Toolchain) -> Callable[[Path, Path], dict]:
    version = tc.etcd_version

    def build(tmp: Path, log: Path) -> dict:
        tool = f"etcd {version}"
        src = tmp / "src"
        src.mkdir()
        info = go_module_info(tool, "go.etcd.io/etcd/server/v3", f"v{version}", src, log)
        commit = (info.get("Origin") or {}).get("Hash", "")[:9]
        (src / "go.mod").write_text(etcd_wrapper_gomod(version, go_version_line()))
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        flags = ldflags(("go.etcd.io/etcd/api/v3/version.GitSHA", commit or "unknown"))
        cmd = ["go", "build", "-trimpath", "-ldflags", flags, "-o", str(bin_dir / "etcd"),
               "go.etcd.io/etcd/server/v3"]  # fmt: skip
        run(tool, cmd, cwd=src, log=log, env=go_env())
        shutil.rmtree(src)
        return {"git_commit": commit}

    return build


# ---- plain `go install` tools -----------------------------------------------------------------
def build_go_install(
    tool: str, package: str, version: str, flags: str = "-s -w", after=None
) -> Callable[[Path, Path], dict]:
    def build(tmp: Path, log: Path) -> dict:
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        env = {**go_env(), "GOBIN": str(bin_dir), "GOFLAGS": ""}
        cmd = ["go", "install", "-trimpath", "-ldflags", flags, f"{package}@v{version}"]
        run(f"{tool} {version}", cmd, cwd=tmp, log=log, env=env)
        facts = {"package": package}
        if after is not None:
            facts.update(after(tmp, log))
        return facts

    return build


def kustomize_resources(directory: Path) -> list[Path]:
    """The files (or dirs) a kustomization.yaml lists under `resources`, resolved."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text()) or {}
    return [(directory / r).resolve() for r in spec.get("resources", [])]


def kwok_stages(tc: Toolchain) -> Callable[[Path, Path], dict]:
    """Copy KWOK's "fast" stage set out of its module for `kwok --config`.

    v0.8 no longer applies node/pod lifecycle stages by itself; kwokctl feeds it the set that
    kustomize/stage/fast names (node initialise, node heartbeat with lease, pod ready/complete/
    delete). Reading that kustomization keeps us in step if a release renames a stage.
    """

    def copy(tmp: Path, log: Path) -> dict:
        tool = f"kwok {tc.kwok_version}"
        info = go_module_info(tool, "sigs.k8s.io/kwok", f"v{tc.kwok_version}", tmp, log)
        fast = Path(info["Dir"]) / "kustomize" / "stage" / "fast"
        dest = tmp / "stages"
        dest.mkdir()
        copied = []
        for stage_dir in kustomize_resources(fast):
            for f in kustomize_resources(stage_dir):
                if f.suffix != ".yaml" or not f.is_file():
                    raise ProvisionError(f"{tool}: stage {f} listed in {stage_dir} is missing")
                shutil.copy(f, dest / f.name)
                os.chmod(dest / f.name, 0o644)  # the module cache is read-only
                copied.append(f.name)
        if not copied:
            raise ProvisionError(f"{tool}: no stages found under {fast}")
        return {"stages": sorted(copied)}

    return copy


def helm_build(tc: Toolchain) -> Callable[[Path, Path], dict]:
    """helm with the version facts its Makefile links in.

    Without them `helm version` says v3.22 and, worse, `.Capabilities.KubeVersion` in
    `helm template` defaults to v1.20, so charts with a kubeVersion constraint fail to render.
    The Makefile derives the Kubernetes version from helm's own k8s.io/client-go requirement
    (v0.Y.Z means Kubernetes 1.Y); so do we.
    """
    version = tc.helm_version

    def build(tmp: Path, log: Path) -> dict:
        tool = f"helm {version}"
        info = go_module_info(tool, "helm.sh/helm/v3", f"v{version}", tmp, log)
        gomod = Path(info["GoMod"]).read_text()
        match = re.search(r"^\s*k8s\.io/client-go v0\.(\d+)\.\d+", gomod, re.MULTILINE)
        if not match:
            raise ProvisionError(f"{tool}: cannot find k8s.io/client-go in {info['GoMod']}")
        kube_minor = match.group(1)
        flags = ldflags(
            ("helm.sh/helm/v3/internal/version.version", f"v{version}"),
            ("helm.sh/helm/v3/internal/version.gitTreeState", "clean"),
            ("helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor", "1"),
            ("helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor", kube_minor),
            ("helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor", "1"),
            ("helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor", kube_minor),
        )
        facts = build_go_install("helm", "helm.sh/helm/v3/cmd/helm", version, flags)(tmp, log)
        return {**facts, "default_kube_version": f"v1.{kube_minor}.0"}

    return build


# ---- Kubernetes JSON schemas for kubeconform -------------------------------------------------
SCHEMA_DEFS_PREFIXES = ("/api/_definitions.json#/$defs/", "#/$defs/")


def inline_schema_refs(node: object, defs: dict, seen: tuple[str, ...] = ()) -> object:
    """Replace every reference into the shared definitions by the definition itself.

    kubernetes-validate's schemas point into one `_definitions.json` with absolute-path refs
    that kubeconform's loader cannot follow (it reports "could not find schema"); kubeconform
    wants standalone files. A type that contains itself (only JSONSchemaProps does) is cut to
    `{}` at the second level, accepting anything there, as the usual standalone schemas do.
    """
    if isinstance(node, list):
        return [inline_schema_refs(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(SCHEMA_DEFS_PREFIXES):
        name = ref.split("/$defs/", 1)[1]
        if name in seen:
            return {}
        target = inline_schema_refs(defs[name], defs, (*seen, name))
        rest = {k: inline_schema_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **rest}
    return {k: inline_schema_refs(v, defs, seen) for k, v in node.items()}


def build_kube_schemas(tc: Toolchain) -> Callable[[Path, Path], dict]:
    """Strict standalone JSON schemas of our Kubernetes minor, from a PyPI package.

    kubeconform downloads schemas from GitHub at run time, which this project cannot reach;
    the `kubernetes-validate` package on PyPI ships them per Kubernetes minor (the `.0` patch
    stands for the whole minor: the API does not change within one).
    """
    package = tc.versions.get("kubeconform", {}).get("schemas_package", "")
    major, minor, _ = tc.kubernetes_version.split(".")
    flavour = f"v{major}.{minor}.0-local-strict"

    def build(tmp: Path, log: Path) -> dict:
        tool = f"kube-schemas {tc.kubernetes_version}"
        if not package:
            raise ProvisionError(f"{tool}: versions.toml lacks [kubeconform].schemas_package")
        download = tmp / "download"
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--quiet", "-d", str(download), package]  # fmt: skip
        run(tool, cmd, cwd=tmp, log=log)
        wheels = list(download.glob("*.whl"))
        if len(wheels) != 1:
            raise ProvisionError(f"{tool}: expected one wheel from `{shlex.join(cmd)}`")
        prefix = f"kubernetes_validate/kubernetes-json-schema/{flavour}/"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = {n[len(prefix) :]: n for n in wheel.namelist() if n.startswith(prefix)}
            if "_definitions.json" not in members:
                raise ProvisionError(f"{tool}: {wheels[0].name} has no {flavour} schemas")
            defs = json.loads(wheel.read(members.pop("_definitions.json")))["$defs"]
            members.pop("all.json", None)
            for name, member in members.items():
                schema = inline_schema_refs(json.loads(wheel.read(member)), defs)
                (tmp / name).write_text(json.dumps(schema, separators=(",", ":")))
        shutil.rmtree(download)
        return {"package": package, "flavour": flavour, "schemas": len(members)}

    return build


def check_kube_schemas(tc: Toolchain) -> Callable[[Path], None]:
    """kubeconform must accept a valid Deployment and reject a misspelt field with them."""

    def check(built: Path) -> None:
        kubeconform = tc.kubeconform
        if not kubeconform.exists():
            return  # kubeconform itself failed or was skipped; the schemas stand on their own
        location = str(built / "{{ .ResourceKind }}{{ .KindSuffix }}.json")
        good = (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: probe}\nspec:\n"
            "  selector: {matchLabels: {app: probe}}\n  template:\n"
            "    metadata: {labels: {app: probe}}\n"
            "    spec: {containers: [{name: c, image: busybox}]}\n"
        )
        bad = good.replace("  selector:", "  replicaz: 2\n  selector:")
        for text, expect_ok in ((good, True), (bad, False)):
            proc = subprocess.run(
                [str(kubeconform), "-strict", "-summary", "-schema-location", location, "-"],
                input=text, capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
            if (proc.returncode == 0) != expect_ok:
                raise ProvisionError(
                    f"kube-schemas {tc.kubernetes_version}: kubeconform "
                    f"{'rejected a valid' if expect_ok else 'accepted an invalid'} Deployment "
                    f"with these schemas:\n{proc.stdout}{proc.stderr}"
                )

    return check


# ---- Spark's Kafka connector ------------------------------------------------------------------
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


# ---- the plan ---------------------------------------------------------------------------------
def components(tc: Toolchain) -> list[Component]:
    """Cheap downloads first, long Go builds last, so a failure in one shows up early."""
    kube_bin = lambda name: lambda d: d / "bin" / name  # noqa: E731
    return [
        Component(
            "kafka",
            tc.kafka_version,
            tc.kafka_home(),
            build_kafka(tc, tc.kafka_version),
            check_kafka(tc.kafka_version),
        ),
        Component(
            "kafka",
            tc.kafka_compat_version,
            tc.kafka_home(tc.kafka_compat_version),
            build_kafka(tc, tc.kafka_compat_version),
            check_kafka(tc.kafka_compat_version),
        ),
        Component("spark-kafka", tc.spark_version, tc.spark_kafka_dir, build_spark_kafka(tc)),
        Component(
            "kubeconform",
            tc.kubeconform_version,
            tc.kubeconform_dir,
            build_go_install(
                "kubeconform",
                "github.com/yannh/kubeconform/cmd/kubeconform",
                tc.kubeconform_version,
                ldflags(("main.version", f"v{tc.kubeconform_version}")),
            ),
            check_binary_version(kube_bin("kubeconform"), ["-v"], tc.kubeconform_version),
        ),
        Component(
            "kube-schemas",
            tc.kubernetes_version,
            tc.kube_schemas_dir,
            build_kube_schemas(tc),
            check_kube_schemas(tc),
        ),
        Component(
            "helm",
            tc.helm_version,
            tc.helm_dir,
            helm_build(tc),
            check_binary_version(kube_bin("helm"), ["version"], f"v{tc.helm_version}"),
        ),
        Component(
            "kwok",
            tc.kwok_version,
            tc.kwok_dir,
            build_go_install(
                "kwok",
                "sigs.k8s.io/kwok/cmd/kwok",
                tc.kwok_version,
                ldflags(("sigs.k8s.io/kwok/pkg/consts.Version", f"v{tc.kwok_version}")),
                after=kwok_stages(tc),
            ),
            check_binary_version(kube_bin("kwok"), ["--version"], tc.kwok_version),
        ),
        Component(
            "etcd",
            tc.etcd_version,
            tc.etcd_dir,
            build_etcd(tc),
            check_binary_version(kube_bin("etcd"), ["--version"], tc.etcd_version),
        ),
        Component(
            "kubernetes",
            tc.kubernetes_version,
            tc.kubernetes_dir,
            build_kubernetes(tc),
            check_binary_version(
                kube_bin("kube-apiserver"), ["--version"], f"v{tc.kubernetes_version}"
            ),
        ),
    ]


def provision(
    only: Sequence[str] | None = None,
    tc: Toolchain | None = None,
    skip: Sequence[str] | None = None,
) -> Toolchain:
    """Provision every pinned tool (or only the named ones, minus skipped ones).

    A failing tool does not stop the others (a fresh CI machine should get as far as it can in
    one run); at the end a ProvisionError lists every failure with its tool and command. Tools
    already finished stay installed, so the next run resumes where this one stopped.
    """
    tc = tc or toolchain()
    plan = components(tc)
    names = {c.name for c in plan}
    unknown = (set(only or ()) | set(skip or ())) - names
    if unknown:
        raise ProvisionError(
            f"unknown tool(s): {', '.join(sorted(unknown))} (known: {', '.join(sorted(names))})"
        )
    plan = [c for c in plan if (not only or c.name in only) and c.name not in (skip or ())]
    say(f"cache: {tc.root}")
    total = time.monotonic()
    failures: dict[str, str] = {}
    with cache_lock(tc.root):
        for component in plan:
            try:
                outcome, seconds = install(component)
            except ProvisionError as exc:
                say(f"{component.label}: FAILED: {exc}")
                failures[component.label] = str(exc)
                continue
            say(f"{component.label}: {outcome} in {seconds:.1f}s ({component.target})")
    say(
        f"done in {time.monotonic() - total:.1f}s"
        + (f", {len(failures)} failed" if failures else "")
    )
    if failures:
        raise ProvisionError("\n\n".join(failures.values()), failed=list(failures))
    return tc


def main(argv: Sequence[str] | None = None) -> int:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_on_signal)
    parser = argparse.ArgumentParser(
        prog="kafka-rebalance dev provision",
        description="Build or fetch the pinned toolchain (versions.toml) into the cache.",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_from_args(args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Shared with the `dev provision` subcommand so both accept the same flags."""
    parser.add_argument(
        "--only",
        action="append",
        metavar="TOOL",
        help="provision only this tool (repeatable): kafka, spark-kafka, kubeconform, "
        "kube-schemas, helm, kwok, etcd, kubernetes",
    )
    parser.add_argument(
        "--skip",
        action="append",
        metavar="TOOL",
        help="leave this tool out (repeatable), e.g. when a registry lacks its pinned version",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not build; list what is missing and exit 1 if anything is",
    )


def run_from_args(args: argparse.Namespace) -> int:
    tc = toolchain()
    if args.check:
        gone = tc.missing()
        for name in gone:
            print(f"missing: {name}")
        if not gone:
            print(f"all provisioned under {tc.root}")
        return 1 if gone else 0
    try:
        provision(args.only, tc, args.skip)
    except ProvisionError as exc:
        if exc.failed:  # details were printed as each tool failed
            say(f"provisioning incomplete; failed: {', '.join(exc.failed)}")
        else:
            say(f"FAILED: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
