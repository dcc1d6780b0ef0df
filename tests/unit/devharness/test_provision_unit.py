"""The pure parts of provisioning: generated go.mod files, jar naming, the atomic install frame.

The real builds take minutes to an hour and need the registries, so they are exercised by
`kafka-rebalance dev provision` itself; these tests pin down the logic that decides what gets
built and whether a half-built tool can ever look finished.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_rebalance_dev.devenv import provision
from kafka_rebalance_dev.devenv.toolchain import MARKER, ToolchainError, toolchain

UPSTREAM_GOMOD = """\
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/spf13/cobra v1.10.2
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
\tk8s.io/klog/v2 v2.140.0
\tk8s.io/kubectl v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kubectl => ./staging/src/k8s.io/kubectl
\tk8s.io/sample-cli-plugin => ./staging/src/k8s.io/sample-cli-plugin
)
"""


def test_kubernetes_wrapper_replaces_each_required_staging_module_with_its_tag():
    gomod = provision.kubernetes_wrapper_gomod(UPSTREAM_GOMOD, "1.36.3", "1.26.8")
    assert "require k8s.io/kubernetes v1.36.3" in gomod
    for module in ("k8s.io/api", "k8s.io/client-go", "k8s.io/kubectl"):
        assert f"\t{module} => {module} v0.36.3" in gomod
    # replaced upstream but never required: not published at every tag, so must be left out
    assert "sample-cli-plugin" not in gomod
    # klog is a real dependency with a real version, not a staging module
    assert "klog" not in gomod
    assert "godebug default=go1.26" in gomod
    assert "\ngo 1.26.8\n" in gomod


def test_kubernetes_wrapper_refuses_a_gomod_without_staging_modules():
    with pytest.raises(provision.ProvisionError, match="staging"):
        provision.kubernetes_wrapper_gomod("module k8s.io/kubernetes\n", "1.36.3", "1.26.8")


def test_version_ldflags_set_both_version_packages():
    flags = provision.version_ldflags("1.36.3", "abc123")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.36.3" in flags
        assert f"-X {pkg}.gitMajor=1" in flags
        assert f"-X {pkg}.gitMinor=36" in flags
        assert f"-X {pkg}.gitCommit=abc123" in flags


def test_etcd_wrapper_pins_sibling_modules_at_the_server_version():
    gomod = provision.etcd_wrapper_gomod("3.6.16", "1.26.8")
    for module in ("server/v3", "api/v3", "client/pkg/v3", "client/v3", "pkg/v3"):
        assert f"\tgo.etcd.io/etcd/{module} v3.6.16" in gomod
    assert "replace" not in gomod


@pytest.mark.parametrize(
    ("filename", "artifact", "version"),
    [
        ("log4j-core-2.25.4.jar", "log4j-core", "2.25.4"),
        ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "spark-sql-kafka-0-10_2.13", "4.0.0"),
        ("kafka_2.13-4.3.1.jar", "kafka_2.13", "4.3.1"),
        ("zstd-jni-1.5.6-10.jar", "zstd-jni", "1.5.6-10"),
        ("jackson-annotations-2.21.jar", "jackson-annotations", "2.21"),
        ("HdrHistogram-2.2.2.jar", "HdrHistogram", "2.2.2"),
        (
            "netty-transport-native-epoll-4.2.13.Final-linux-x86_64.jar",
            "netty-transport-native-epoll",
            "4.2.13.Final-linux-x86_64",
        ),
    ],
)
def test_jar_artifact_splits_name_and_version(filename, artifact, version):
    assert provision.jar_artifact(filename) == (artifact, version)


def test_jar_version_finds_the_exact_artifact_only():
    jars = ["log4j-api-2.25.4.jar", "log4j-core-2.25.4.jar", "log4j-core-extra-9.jar"]
    assert provision.jar_version(jars, "log4j-core") == "2.25.4"
    assert provision.jar_version(jars, "slf4j-api") is None


def test_failure_tail_drops_colour_and_maven_boilerplate():
    output = (
        "\x1b[0m\x1b[0m[ERROR] Failed to execute goal: No artifact x:y:jar:1 -> [Help 1]\n"
        "[ERROR] \n[ERROR] Re-run Maven using the -X switch to enable full debug logging.\n"
        "[ERROR] [Help 1] http://cwiki.apache.org/confluence/display/MAVEN/X\n"
    )
    assert provision.failure_tail(output) == (
        "[ERROR] Failed to execute goal: No artifact x:y:jar:1 -> [Help 1]"
    )


def test_run_names_tool_and_command_on_failure(tmp_path):
    log = tmp_path / "log"
    with pytest.raises(provision.ProvisionError) as info:
        provision.run("demo 1.0", ["sh", "-c", "echo boom; exit 3"], cwd=tmp_path, log=log)
    message = str(info.value)
    assert message.startswith("demo 1.0: command failed with exit code 3: sh -c")
    assert "boom" in message
    assert "boom" in log.read_text()


def test_run_reports_a_missing_program_by_name(tmp_path):
    with pytest.raises(provision.ProvisionError, match="`no-such-program-xyz` is not installed"):
        provision.run("demo 1.0", ["no-such-program-xyz"], cwd=tmp_path, log=tmp_path / "log")


def _component(tmp_path: Path, build) -> provision.Component:
    return provision.Component("demo", "1.0", tmp_path / "demo" / "1.0", build)


def test_install_renames_a_complete_build_into_place_with_a_marker(tmp_path):
    calls = []

    def build(tmp: Path, log: Path) -> dict:
        calls.append(tmp)
        (tmp / "bin").mkdir()
        (tmp / "bin" / "demo").write_text("#!/bin/sh\n")
        return {"fact": 42}

    component = _component(tmp_path, build)
    assert provision.install(component)[0] == "built"
    final = tmp_path / "demo" / "1.0"
    assert (final / "bin" / "demo").is_file()
    marker = json.loads((final / MARKER).read_text())
    assert marker["fact"] == 42 and marker["version"] == "1.0"
    assert not calls[0].exists()  # the temp dir became the final dir

    assert provision.install(component)[0] == "reused"
    assert len(calls) == 1


def test_install_leaves_nothing_behind_when_the_build_fails(tmp_path):
    def build(tmp: Path, log: Path) -> dict:
        (tmp / "half-written").write_text("x")
        raise provision.ProvisionError("demo 1.0: command failed")

    with pytest.raises(provision.ProvisionError):
        provision.install(_component(tmp_path, build))
    leftovers = [p.name for p in (tmp_path / "demo").iterdir()]
    assert leftovers == ["1.0.build.log"]


def test_install_rebuilds_a_directory_that_lacks_the_marker(tmp_path):
    final = tmp_path / "demo" / "1.0"
    final.mkdir(parents=True)
    (final / "stale").write_text("from an older, interrupted layout")

    def build(tmp: Path, log: Path) -> dict:
        (tmp / "fresh").write_text("ok")
        return {}

    assert provision.install(_component(tmp_path, build))[0] == "built"
    assert sorted(p.name for p in final.iterdir()) == [MARKER, "fresh"]


def test_toolchain_missing_lists_every_tool_of_an_empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_REBALANCE_CACHE", str(tmp_path))
    tc = toolchain()
    assert tc.root == tmp_path
    missing = tc.missing()
    assert f"kafka {tc.kafka_version}" in missing
    assert f"kafka {tc.kafka_compat_version}" in missing
    assert f"kubernetes {tc.kubernetes_version}" in missing
    assert len(missing) == len(provision.components(tc))
    with pytest.raises(ToolchainError, match="not provisioned"):
        tc.kafka_classpath()


def test_toolchain_sees_a_provisioned_kafka(tmp_path):
    tc = toolchain(root=tmp_path)
    libs = tc.kafka_libs()
    libs.mkdir(parents=True)
    for name in ("b.jar", "a.jar"):
        (libs / name).write_text("")
    (tc.kafka_home() / MARKER).write_text("{}")
    assert tc.kafka_classpath() == f"{libs / 'a.jar'}:{libs / 'b.jar'}"
    assert f"kafka {tc.kafka_version}" not in tc.missing()
    assert tc.kafka_jvm_flags()[0].startswith("-Dlog4j2.configurationFile=")
    assert tc.kafka_jvm_flags(tc.kafka_compat_version, tool=True) == [
        f"-Dlog4j.configuration=file:{tc.kafka_home(tc.kafka_compat_version)}"
        "/tools-log4j.properties"
    ]


def test_install_leaves_nothing_behind_when_the_smoke_check_fails(tmp_path):
    def build(tmp: Path, log: Path) -> dict:
        (tmp / "bin").mkdir()
        return {}

    def check(built: Path) -> None:
        raise provision.ProvisionError("demo: `demo -v` did not report 1.0")

    component = provision.Component("demo", "1.0", tmp_path / "demo" / "1.0", build, check)
    with pytest.raises(provision.ProvisionError, match="did not report"):
        provision.install(component)
    assert not (tmp_path / "demo" / "1.0").exists()


def test_inline_schema_refs_makes_a_standalone_schema_and_cuts_recursion():
    defs = {
        "Meta": {"type": "object", "properties": {"name": {"type": "string"}}},
        "Props": {
            "type": "object",
            "properties": {"items": {"$ref": "#/$defs/Props"}, "meta": {"$ref": "#/$defs/Meta"}},
        },
    }
    schema = {
        "properties": {
            "metadata": {"$ref": "/api/_definitions.json#/$defs/Meta", "description": "kept"},
            "spec": {"$ref": "/api/_definitions.json#/$defs/Props"},
            "other": {"$ref": "https://example.invalid/x.json"},
        }
    }
    out = provision.inline_schema_refs(schema, defs)
    props = out["properties"]
    assert props["metadata"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "description": "kept",
    }
    assert props["spec"]["properties"]["meta"]["properties"]["name"] == {"type": "string"}
    assert props["spec"]["properties"]["items"] == {}  # Props inside Props: cut
    assert props["other"] == {"$ref": "https://example.invalid/x.json"}  # not ours: untouched


def test_install_clears_temp_dirs_left_by_an_interrupted_run(tmp_path):
    stale = tmp_path / "demo" / ".tmp-1.0-999999"
    (stale / "bin").mkdir(parents=True)

    def build(tmp: Path, log: Path) -> dict:
        return {}

    provision.install(_component(tmp_path, build))
    assert not stale.exists()
    assert (tmp_path / "demo" / "1.0" / MARKER).is_file()


def test_stopping_a_provision_ends_every_lanes_running_build_and_starts_no_more(tmp_path):
    import threading
    import time

    from kafka_rebalance_dev.devenv.provision import _provision_lane
    from kafka_rebalance_dev.devenv.provision.frame import RUNNING

    started = threading.Event()

    def slow(tmp: Path, log: Path) -> dict:
        started.set()
        provision.run("slow 1.0", ["sleep", "60"], cwd=tmp, log=log)
        return {}

    def never(tmp: Path, log: Path) -> dict:
        raise AssertionError("a lane started a build after the provision was stopped")

    lane = [
        provision.Component("slow", "1.0", tmp_path / "slow" / "1.0", slow),
        provision.Component("next", "1.0", tmp_path / "next" / "1.0", never),
    ]
    failures: dict[str, str] = {}
    RUNNING.stopping.clear()
    worker = threading.Thread(target=_provision_lane, args=(lane, failures))
    begun = time.monotonic()
    worker.start()
    assert started.wait(10)
    while not len(RUNNING) and time.monotonic() - begun < 10:
        time.sleep(0.01)  # until the command runs
    RUNNING.stop()
    worker.join(15)
    RUNNING.stopping.clear()
    assert not worker.is_alive() and time.monotonic() - begun < 15
    assert list(failures) == ["slow 1.0"]  # the stopped build failed; `next` never began
    assert not (tmp_path / "next").exists()
