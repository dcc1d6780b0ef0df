"""Provision the pinned toolchain into the cache (`kafka-rebalance dev provision`).

Everything the tests and demo run (Kafka brokers, a real Kubernetes control plane and kubelet,
etcd, KWOK, helm, kubeconform, Spark's Kafka connector, the Debian base of the image) is built or
fetched from the package registries this project may reach (Maven Central, the Go module proxy,
PyPI, Debian's archive) rather than from release downloads, and pinned in versions.toml.

Why the shape: a fresh CI machine pays for this once per run under a 90-minute budget, and a
developer's machine keeps it for months. So each tool is built in a temp dir beside its final
place and renamed into `<cache>/<tool>/<version>/` only when complete (an interrupted run leaves
nothing that looks finished), a second run only checks markers and returns in well under a
second per tool, and Go and Maven keep their own default caches, which survive between runs.

One module per tool family: `frame` (commands, the atomic install), `maven`, `kafka`,
`broker_plugin`,
`client_assignor` (the Java client-side assignor and Spring Kafka for its test),
`kafka_streams` (Kafka Streams and RocksDB for the streams-group tests' applications),
`go_tools` (go install tools, etcd), `kubernetes`, `schemas`, `spark`, `debian_base`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafka_rebalance_dev.devenv import system_packages
from kafka_rebalance_dev.devenv.provision.broker_plugin import build_broker_plugin
from kafka_rebalance_dev.devenv.provision.client_assignor import (
    build_client_assignor,
    build_spring_kafka,
)
from kafka_rebalance_dev.devenv.provision.debian_base import build_debian_base
from kafka_rebalance_dev.devenv.provision.frame import (
    RUNNING,
    Component,
    ProvisionError,
    _raise_on_signal,
    cache_lock,
    failure_tail,
    install,
    run,
    say,
)
from kafka_rebalance_dev.devenv.provision.go_tools import (
    build_etcd,
    build_go_install,
    check_binary_version,
    etcd_wrapper_gomod,
    helm_build,
    kwok_stages,
    ldflags,
)
from kafka_rebalance_dev.devenv.provision.kafka import build_kafka, check_kafka
from kafka_rebalance_dev.devenv.provision.kafka_streams import build_kafka_streams
from kafka_rebalance_dev.devenv.provision.kubernetes import (
    build_kubernetes,
    kubernetes_wrapper_gomod,
    version_ldflags,
)
from kafka_rebalance_dev.devenv.provision.maven import jar_artifact, jar_version
from kafka_rebalance_dev.devenv.provision.pause import build_pause
from kafka_rebalance_dev.devenv.provision.schemas import (
    build_kube_schemas,
    check_kube_schemas,
    inline_schema_refs,
)
from kafka_rebalance_dev.devenv.provision.spark import build_spark_kafka
from kafka_rebalance_dev.devenv.toolchain import (
    NODE_BINARIES,
    PAUSE_VERSION,
    Toolchain,
    is_provisioned,
    toolchain,
)

__all__ = [
    "Component",
    "ProvisionError",
    "components",
    "etcd_wrapper_gomod",
    "failure_tail",
    "inline_schema_refs",
    "install",
    "jar_artifact",
    "jar_version",
    "kubernetes_wrapper_gomod",
    "provision",
    "run",
    "version_ldflags",
]


def debian_base_unavailable() -> str | None:
    """Why the Debian base cannot be made here (it needs debootstrap and root), or None."""
    gone = system_packages.missing(("debootstrap",))
    if gone:
        return system_packages.hint(gone)
    if not system_packages.is_root():
        return "debootstrap needs root"
    return None


def components(tc: Toolchain) -> list[Component]:
    """Cheap downloads first, long Go builds last, so a failure in one shows up early."""
    return [*_java_components(tc), *_go_components(tc), *_image_components(tc)]


def _kube_bin(name: str) -> Callable[[Path], Path]:
    """Where a Go-built component's binary `name` lies under its install directory."""
    return lambda d: d / "bin" / name


def _java_components(tc: Toolchain) -> list[Component]:
    """Maven Central downloads (and the broker plug-in's Maven build)."""
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
        Component(
            "broker-plugin",
            tc.broker_plugin_dir.name,
            tc.broker_plugin_dir,
            build_broker_plugin(tc),
        ),
        Component(
            "client-assignor",
            tc.client_assignor_dir.name,
            tc.client_assignor_dir,
            build_client_assignor(tc),
        ),
        Component(
            "spring-kafka", tc.spring_kafka_dir.name, tc.spring_kafka_dir, build_spring_kafka(tc)
        ),
        Component("kafka-streams", tc.kafka_version, tc.kafka_streams_dir, build_kafka_streams(tc)),
        Component("spark-kafka", tc.spark_version, tc.spark_kafka_dir, build_spark_kafka(tc)),
    ]


def _go_components(tc: Toolchain) -> list[Component]:
    """Go tools built from source with the provisioned Go toolchain, quick ones first."""
    return [
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
            check_binary_version(_kube_bin("kubeconform"), ["-v"], tc.kubeconform_version),
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
            check_binary_version(_kube_bin("helm"), ["version"], f"v{tc.helm_version}"),
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
            check_binary_version(_kube_bin("kwok"), ["--version"], tc.kwok_version),
        ),
        Component(
            "etcd",
            tc.etcd_version,
            tc.etcd_dir,
            build_etcd(tc),
            check_binary_version(_kube_bin("etcd"), ["--version"], tc.etcd_version),
        ),
        Component(
            "kubernetes",
            tc.kubernetes_version,
            tc.kubernetes_dir,
            build_kubernetes(tc),
            check_binary_version(
                _kube_bin("kube-apiserver"), ["--version"], f"v{tc.kubernetes_version}"
            ),
        ),
        Component(
            "kubelet",
            tc.kubernetes_version,
            tc.kubelet_dir,
            build_kubernetes(tc, NODE_BINARIES, "kubelet"),
            check_binary_version(_kube_bin("kubelet"), ["--version"], f"v{tc.kubernetes_version}"),
        ),
    ]


def _image_components(tc: Toolchain) -> list[Component]:
    """What the real node and `dev image` need: the pause image and the Debian base."""
    return [
        Component("pause", PAUSE_VERSION, tc.pause_dir, build_pause(PAUSE_VERSION)),
        Component(
            "debian-base",
            tc.debian_suite,
            tc.debian_base_dir,
            build_debian_base(tc),
            unavailable=debian_base_unavailable,
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
    go = {c.name for c in _go_components(tc)}
    RUNNING.stopping.clear()
    lanes = [[c for c in plan if c.name in go], [c for c in plan if c.name not in go]]
    with cache_lock(tc.root), ThreadPoolExecutor(2, thread_name_prefix="provision") as pool:
        running = [pool.submit(_provision_lane, lane, failures) for lane in lanes if lane]
        try:
            for lane in running:
                lane.result()
        except BaseException:
            RUNNING.stop()
            raise
    say(
        f"done in {time.monotonic() - total:.1f}s"
        + (f", {len(failures)} failed" if failures else "")
    )
    if failures:
        raise ProvisionError("\n\n".join(failures.values()), failed=list(failures))
    return tc


def _provision_lane(plan: Sequence[Component], failures: dict[str, str]) -> None:
    """Install `plan`'s components in order, recording failures by label; the Go builds are
    one lane and the downloads, Maven builds and images another, so the network- and
    disk-bound steps run while Go compiles (two Go builds at once would only share the CPU)."""
    for component in plan:
        if RUNNING.stopping.is_set():
            return
        reason = component.unavailable() if component.unavailable else None
        if reason and not is_provisioned(component.target):
            if system_packages.strict():
                failures[component.label] = f"{component.label}: {reason}"
                say(f"{component.label}: FAILED: {reason}")
            else:  # only the real node needs it; the KWOK-only path does not
                say(f"{component.label}: skipped ({reason}; needed only for real pods)")
            continue
        try:
            outcome, seconds = install(component)
        except ProvisionError as exc:
            say(f"{component.label}: FAILED: {exc}")
            failures[component.label] = str(exc)
            continue
        say(f"{component.label}: {outcome} in {seconds:.1f}s ({component.target})")


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
        help="provision only this tool (repeatable): kafka, broker-plugin, client-assignor, "
        "spring-kafka, kafka-streams, spark-kafka, kubeconform, "
        "kube-schemas, helm, kwok, etcd, kubernetes, kubelet, pause, debian-base",
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
