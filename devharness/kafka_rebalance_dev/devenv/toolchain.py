"""Where the pinned development toolchain lives, computed from versions.toml.

The runtime side (`kafka-rebalance dev up`, pytest fixtures) and the provisioning side
(`kafka-rebalance dev provision`) must agree on one layout without either importing the other's
machinery, so this module is only path arithmetic: it reads versions.toml, never downloads, never
builds. Every tool lives in `<cache>/<tool>/<version>/`; a directory only appears there once its
build is complete (provisioning renames a finished temp dir into place), and it carries a
`.provisioned` marker so a directory that merely exists is not mistaken for a finished tool.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
BROKER_PLUGIN_SOURCE = REPO_ROOT / "broker-plugin"


# the streams plan record vectors the plug-in's JUnit tests share with the operator's encoder
STREAMS_PLAN_VECTORS = REPO_ROOT / "tests" / "data" / "wire" / "streams_plan_vectors.json"
# and the share plan record vectors (docs/share-groups.md)
SHARE_PLAN_VECTORS = REPO_ROOT / "tests" / "data" / "wire" / "share_plan_vectors.json"


def broker_plugin_version(kafka_version: str) -> str:
    """`<kafka version>-<digest of the plug-in's pom, sources and the shared streams and share
    plan vectors>`: the cache key of its jar."""
    digest = hashlib.sha256(kafka_version.encode())
    files = [BROKER_PLUGIN_SOURCE / "pom.xml", *sorted(BROKER_PLUGIN_SOURCE.glob("src/**/*"))]
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(BROKER_PLUGIN_SOURCE)).encode())
            digest.update(path.read_bytes())
    for vectors in (STREAMS_PLAN_VECTORS, SHARE_PLAN_VECTORS):
        if vectors.is_file():
            digest.update(vectors.read_bytes())
    return f"{kafka_version}-{digest.hexdigest()[:12]}"


CLIENT_ASSIGNOR_SOURCE = REPO_ROOT / "client-assignor"
# the user_data vectors the client assignor's JUnit tests share with the Python wire module
WIRE_VECTORS = REPO_ROOT / "tests" / "data" / "wire" / "user_data_vectors.json"


def client_assignor_version(kafka_version: str) -> str:
    """`<kafka version>-<digest of the assignor's pom, sources and the shared vectors>`."""
    digest = hashlib.sha256(kafka_version.encode())
    source = CLIENT_ASSIGNOR_SOURCE
    for path in [source / "pom.xml", *sorted(source.glob("src/**/*")), WIRE_VECTORS]:
        if path.is_file():
            digest.update(str(path.relative_to(REPO_ROOT)).encode())
            digest.update(path.read_bytes())
    return f"{kafka_version}-{digest.hexdigest()[:12]}"


VERSIONS_FILE = REPO_ROOT / "versions.toml"
CACHE_ENV = "KAFKA_REBALANCE_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "kafka-rebalance"
MARKER = ".provisioned"

# Kafka entry points, identical in 3.9 and 4.x (both live in the core kafka_2.13 jar).
KAFKA_MAIN_CLASS = "kafka.Kafka"
KAFKA_STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
# Only a real node (`dev up --kubelet`) needs these; built from the same source as the above.
NODE_BINARIES = ("kubelet",)
# The sandbox image's own version (provision/pause.py): bump it when that program changes.
PAUSE_VERSION = "1"


class ToolchainError(RuntimeError):
    """A tool is asked for that is not provisioned (or versions.toml is unusable)."""


def cache_root() -> Path:
    """The cache root; the env override lets CI or tests point at another disk."""
    override = os.environ.get(CACHE_ENV)
    return Path(override).expanduser() if override else DEFAULT_CACHE


def load_versions(path: Path = VERSIONS_FILE) -> dict[str, dict[str, str]]:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def tool_dir(root: Path, tool: str, version: str) -> Path:
    return root / tool / version


def is_provisioned(directory: Path) -> bool:
    return (directory / MARKER).is_file()


@dataclass(frozen=True)
class Toolchain:
    """Pinned versions plus the paths of every provisioned tool.

    Paths are returned whether or not the tool exists yet; call `missing()` (or `require()`) to
    learn what still has to be provisioned.
    """

    root: Path
    kafka_version: str
    kafka_compat_version: str
    kubernetes_version: str
    etcd_version: str
    kwok_version: str
    helm_version: str
    kubeconform_version: str
    spark_version: str
    debian_suite: str
    versions: dict[str, dict[str, str]] = field(repr=False, compare=False, hash=False)

    # ---- directories, one per tool and version -------------------------------------------------
    def kafka_home(self, version: str | None = None) -> Path:
        return tool_dir(self.root, "kafka", version or self.kafka_version)

    @property
    def kubernetes_dir(self) -> Path:
        return tool_dir(self.root, "kubernetes", self.kubernetes_version)

    @property
    def etcd_dir(self) -> Path:
        return tool_dir(self.root, "etcd", self.etcd_version)

    @property
    def kwok_dir(self) -> Path:
        return tool_dir(self.root, "kwok", self.kwok_version)

    @property
    def helm_dir(self) -> Path:
        return tool_dir(self.root, "helm", self.helm_version)

    @property
    def kubeconform_dir(self) -> Path:
        return tool_dir(self.root, "kubeconform", self.kubeconform_version)

    @property
    def kube_schemas_dir(self) -> Path:
        return tool_dir(self.root, "kube-schemas", self.kubernetes_version)

    @property
    def spark_kafka_dir(self) -> Path:
        return tool_dir(self.root, "spark-kafka", self.spark_version)

    @property
    def kubelet_dir(self) -> Path:
        return tool_dir(self.root, "kubelet", self.kubernetes_version)

    @property
    def debian_base_dir(self) -> Path:
        return tool_dir(self.root, "debian-base", self.debian_suite)

    @property
    def broker_plugin_dir(self) -> Path:
        """The KIP-848 broker plug-in built from `broker-plugin/`, one directory per source
        digest (a changed source is a new version, built again)."""
        return tool_dir(self.root, "broker-plugin", broker_plugin_version(self.kafka_version))

    @property
    def broker_plugin_jar(self) -> Path:
        return self.broker_plugin_dir / "kafka-rebalance-broker-plugin.jar"

    @property
    def client_assignor_dir(self) -> Path:
        """The Java client-side assignor (client-assignor/), keyed like the broker plug-in."""
        return tool_dir(self.root, "client-assignor", client_assignor_version(self.kafka_version))

    @property
    def client_assignor_jar(self) -> Path:
        return self.client_assignor_dir / "kafka-rebalance-client-assignor.jar"

    @property
    def spring_kafka_dir(self) -> Path:
        """Spring Kafka's runtime closure (lib/), for the client assignor's listener-app test."""
        return tool_dir(self.root, "spring-kafka", self.versions["spring_kafka"]["version"])

    @property
    def kafka_streams_dir(self) -> Path:
        """Kafka Streams' jars the broker's libs/ lacks (lib/: kafka-streams, rocksdbjni), at the
        broker's version, for the streams-group tests' applications."""
        return tool_dir(self.root, "kafka-streams", self.kafka_version)

    def kafka_streams_classpath(self) -> str:
        """The classpath of a Kafka Streams application: the broker's libs/ plus lib/ above."""
        jars = [
            *sorted(self.kafka_libs().glob("*.jar")),
            *sorted((self.kafka_streams_dir / "lib").glob("*.jar")),
        ]
        return ":".join(str(j) for j in jars)

    @property
    def pause_dir(self) -> Path:
        return tool_dir(self.root, "pause", PAUSE_VERSION)

    @property
    def pause_archive(self) -> Path:
        """The sandbox image as an OCI archive for `ctr images import` (provision/pause.py)."""
        return self.pause_dir / "pause.oci.tar"

    @property
    def kubelet(self) -> Path:
        return self.kubelet_dir / "bin" / "kubelet"

    @property
    def debian_base_tarball(self) -> Path:
        """The Debian root filesystem (with Python) the image is built on without a registry."""
        return self.debian_base_dir / "rootfs.tar"

    @property
    def image_cache(self) -> Path:
        """Built project images (`docker save` tarballs), one per build-context digest."""
        return self.root / "images"

    @property
    def java_classes_cache(self) -> Path:
        """Compiled Java test programs (devenv/java_classes.py), one per source+classpath digest."""
        return self.root / "java-classes"

    # ---- Kafka ---------------------------------------------------------------------------------
    def kafka_libs(self, version: str | None = None) -> Path:
        return self.kafka_home(version) / "libs"

    def kafka_log4j_config(self, version: str | None = None, *, tool: bool = False) -> Path:
        """The logging config provisioning writes for this Kafka line.

        4.x logs through log4j2 (`-Dlog4j2.configurationFile=<this>`), 3.9 through reload4j
        (`-Dlog4j.configuration=file:<this>`); `kafka_jvm_flags` picks the right property. The
        broker config logs INFO to stdout; the `tool=True` one (for StorageTool and other
        command-line tools) logs WARN+ to stderr so stdout carries only the tool's answer.
        """
        version = version or self.kafka_version
        name = "log4j2.properties" if _major(version) >= 4 else "log4j.properties"
        return self.kafka_home(version) / (f"tools-{name}" if tool else name)

    def kafka_jvm_flags(self, version: str | None = None, *, tool: bool = False) -> list[str]:
        """JVM system properties a broker (or, with tool=True, a Kafka CLI tool) needs to log."""
        version = version or self.kafka_version
        config = self.kafka_log4j_config(version, tool=tool)
        if _major(version) >= 4:
            return [f"-Dlog4j2.configurationFile={config}"]
        return [f"-Dlog4j.configuration=file:{config}"]

    def kafka_classpath(self, version: str | None = None) -> str:
        """The broker's classpath: every jar provisioning collected, in a stable order."""
        home = self.kafka_home(version)
        if not is_provisioned(home):
            raise ToolchainError(
                f"Kafka {version or self.kafka_version} is not provisioned under {home}; "
                "run `kafka-rebalance dev provision`"
            )
        jars = sorted(self.kafka_libs(version).glob("*.jar"))
        return os.pathsep.join(str(j) for j in jars)

    # ---- Kubernetes control plane and friends --------------------------------------------------
    @property
    def kube_apiserver(self) -> Path:
        return self.kubernetes_dir / "bin" / "kube-apiserver"

    @property
    def kube_controller_manager(self) -> Path:
        return self.kubernetes_dir / "bin" / "kube-controller-manager"

    @property
    def kube_scheduler(self) -> Path:
        return self.kubernetes_dir / "bin" / "kube-scheduler"

    @property
    def kubectl(self) -> Path:
        return self.kubernetes_dir / "bin" / "kubectl"

    @property
    def etcd(self) -> Path:
        return self.etcd_dir / "bin" / "etcd"

    @property
    def kwok(self) -> Path:
        return self.kwok_dir / "bin" / "kwok"

    @property
    def kwok_stage_configs(self) -> list[Path]:
        """Stage YAMLs for `kwok --config`: v0.8+ has no node/pod lifecycle without them."""
        stages = self.kwok_dir / "stages"
        return sorted(stages.glob("*.yaml")) if stages.is_dir() else []

    @property
    def helm(self) -> Path:
        return self.helm_dir / "bin" / "helm"

    @property
    def kubeconform(self) -> Path:
        return self.kubeconform_dir / "bin" / "kubeconform"

    @property
    def kubeconform_schema_location(self) -> str:
        """`kubeconform -schema-location` value: the pinned cluster version's strict schemas.

        Use with `-strict` (the schemas are the strict flavour: unknown fields are errors).
        """
        return str(self.kube_schemas_dir / "{{ .ResourceKind }}{{ .KindSuffix }}.json")

    # ---- Spark ---------------------------------------------------------------------------------
    @property
    def spark_jars(self) -> list[Path]:
        """Kafka connector jars PySpark lacks, for `spark.jars` (never Ivy at run time)."""
        jars = self.spark_kafka_dir / "jars"
        return sorted(jars.glob("*.jar")) if jars.is_dir() else []

    # ---- status --------------------------------------------------------------------------------
    def _components(self) -> dict[str, tuple[Path, tuple[Path, ...]]]:
        """name -> (tool dir, files that must exist inside it)."""
        return {
            f"kafka {self.kafka_version}": (self.kafka_home(), (self.kafka_libs(),)),
            f"kafka {self.kafka_compat_version}": (
                self.kafka_home(self.kafka_compat_version),
                (self.kafka_libs(self.kafka_compat_version),),
            ),
            f"kubernetes {self.kubernetes_version}": (
                self.kubernetes_dir,
                (
                    self.kube_apiserver,
                    self.kube_controller_manager,
                    self.kube_scheduler,
                    self.kubectl,
                ),
            ),
            f"etcd {self.etcd_version}": (self.etcd_dir, (self.etcd,)),
            f"kwok {self.kwok_version}": (self.kwok_dir, (self.kwok, self.kwok_dir / "stages")),
            f"helm {self.helm_version}": (self.helm_dir, (self.helm,)),
            f"kubeconform {self.kubeconform_version}": (self.kubeconform_dir, (self.kubeconform,)),
            f"kube-schemas {self.kubernetes_version}": (
                self.kube_schemas_dir,
                (self.kube_schemas_dir / "deployment-apps-v1.json",),
            ),
            f"spark-kafka {self.spark_version}": (
                self.spark_kafka_dir,
                (self.spark_kafka_dir / "jars",),
            ),
            f"broker-plugin {self.broker_plugin_dir.name}": (
                self.broker_plugin_dir,
                (self.broker_plugin_jar,),
            ),
            f"client-assignor {self.client_assignor_dir.name}": (
                self.client_assignor_dir,
                (self.client_assignor_jar,),
            ),
            f"spring-kafka {self.spring_kafka_dir.name}": (
                self.spring_kafka_dir,
                (self.spring_kafka_dir / "lib",),
            ),
            f"kafka-streams {self.kafka_version}": (
                self.kafka_streams_dir,
                (self.kafka_streams_dir / "lib",),
            ),
            f"kubelet {self.kubernetes_version}": (self.kubelet_dir, (self.kubelet,)),
            f"pause {PAUSE_VERSION}": (self.pause_dir, (self.pause_archive,)),
            f"debian-base {self.debian_suite}": (
                self.debian_base_dir,
                (self.debian_base_tarball,),
            ),
        }

    def missing(self) -> list[str]:
        """Components not (completely) provisioned yet, as 'tool version' strings."""
        out = []
        for name, (directory, files) in self._components().items():
            if not is_provisioned(directory) or not all(f.exists() for f in files):
                out.append(name)
        return out

    def require(self) -> None:
        """Raise a ToolchainError listing what is missing, with the command that fixes it."""
        gone = self.missing()
        if gone:
            raise ToolchainError(
                "not provisioned: " + ", ".join(gone) + "; run `kafka-rebalance dev provision`"
            )


def _major(version: str) -> int:
    return int(version.split(".", 1)[0])


def _pinned(versions: dict[str, dict[str, str]], section: str, key: str = "version") -> str:
    try:
        return str(versions[section][key])
    except KeyError as exc:
        raise ToolchainError(f"versions.toml lacks [{section}].{key}") from exc


def toolchain(versions_file: Path = VERSIONS_FILE, root: Path | None = None) -> Toolchain:
    """The toolchain pinned by versions.toml, rooted at the cache (env-overridable)."""
    versions = load_versions(versions_file)
    return Toolchain(
        root=root or cache_root(),
        kafka_version=_pinned(versions, "kafka"),
        kafka_compat_version=_pinned(versions, "kafka", "compat_version"),
        kubernetes_version=_pinned(versions, "kubernetes"),
        etcd_version=_pinned(versions, "etcd"),
        kwok_version=_pinned(versions, "kwok"),
        helm_version=_pinned(versions, "helm"),
        kubeconform_version=_pinned(versions, "kubeconform"),
        spark_version=_pinned(versions, "spark"),
        debian_suite=_pinned(versions, "debian", "suite"),
        versions=versions,
    )
