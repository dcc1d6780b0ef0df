"""Session fixtures that run the real parts: Kafka brokers, a Kubernetes control plane, Spark.

They use the same code as `kafka-rebalance dev up`, each in its own directory under pytest's
temp dir, so a test session never touches a developer's running `.dev/` environment. Fixtures
start lazily (a unit-only run starts nothing): the first test that needs one starts every
environment the selected tests need, together (`Boot`). They stop on session teardown; in case
the run dies half-way, an atexit hook and SIGTERM/SIGHUP handlers stop them too, and every
server is started with a parent-death signal, so even a SIGKILLed pytest leaves no broker or
API server behind.

A part that is not provisioned makes its fixture FAIL (not skip): CI always provisions first,
and a silently skipped integration suite would look green while testing nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka_rebalance_dev.devenv import control_plane, kafka_broker
from kafka_rebalance_dev.devenv.kafka_broker import KafkaCluster
from kafka_rebalance_dev.devenv.kube_api import write_kubeconfig
from kafka_rebalance_dev.devenv.processes import StateFile
from kafka_rebalance_dev.devenv.supervisor import Supervisor
from kafka_rebalance_dev.devenv.toolchain import Toolchain, toolchain

BROKER_HEAP = "512m"
CLUSTER_NODE_HEAP = "384m"

# ---- cleanup that survives a crashing session --------------------------------------------------

_LIVE: list[Supervisor] = []
_LIVE_LOCK = threading.Lock()


def _stop_everything() -> None:
    with _LIVE_LOCK:
        live = list(reversed(_LIVE))
        _LIVE.clear()
    for supervisor in live:
        with contextlib.suppress(Exception):
            supervisor.stop(grace=5)


def _on_fatal_signal(signum: int, _frame: Any) -> None:
    _stop_everything()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(_stop_everything)
if threading.current_thread() is threading.main_thread():
    for _sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(_sig) in (signal.SIG_DFL, None):
            signal.signal(_sig, _on_fatal_signal)


def _supervisor(directory: Path) -> Supervisor:
    directory.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(StateFile(directory / "state.json"), die_with_parent=True)
    with _LIVE_LOCK:
        _LIVE.append(supervisor)
    return supervisor


def _release(supervisor: Supervisor) -> None:
    supervisor.stop(grace=10)
    with _LIVE_LOCK:
        if supervisor in _LIVE:
            _LIVE.remove(supervisor)


# ---- toolchain -----------------------------------------------------------------------------------


def _require(tools: Toolchain, *needed: str) -> None:
    """Fail (never skip) when a needed tool ("etcd", or "kafka 3.9.2") is not provisioned."""
    missing = [m for m in tools.missing() if m in needed or m.split(" ", 1)[0] in needed]
    if missing:
        pytest.fail(
            f"not provisioned: {', '.join(missing)}; run `scripts/bootstrap` "
            "(it provisions the pinned toolchain into ~/.cache/kafka-rebalance)",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def tools() -> Toolchain:
    return toolchain()


@pytest.fixture(scope="session")
def devenv_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("devenv")


# ---- Kafka ---------------------------------------------------------------------------------------


@dataclass
class KafkaHandle:
    """A running cluster: bootstrap string plus node stop/start for fault tests."""

    cluster: KafkaCluster
    supervisor: Supervisor
    tools: Toolchain
    heap: str
    stopped: set[int] = field(default_factory=set)

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    @property
    def version(self) -> str:
        return self.cluster.version

    def _node(self, node_id: int) -> kafka_broker.KafkaNode:
        return next(n for n in self.cluster.nodes if n.node_id == node_id)

    def stop_node(self, node_id: int, grace: float = 10.0) -> None:
        """Stop one broker (SIGTERM, its controlled shutdown); its data stays."""
        node = self._node(node_id)
        self.supervisor.stop_one(kafka_broker.process_name(self.cluster, node), grace=grace)
        self.stopped.add(node_id)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one broker: a crash, no controlled shutdown."""
        self.stop_node(node_id, grace=0)

    def start_node(self, node_id: int, timeout: float = 120.0) -> None:
        """Restart a stopped broker on its old ports and data; wait for the full cluster."""
        node = self._node(node_id)
        kafka_broker.launch_node(self.cluster, node, self.tools, self.supervisor, self.heap)
        self.stopped.discard(node_id)
        kafka_broker.wait_ready(self.cluster, self.supervisor, timeout)


def _start_kafka(
    tools: Toolchain,
    root: Path,
    name: str,
    version: str,
    nodes: int,
    heap: str,
    plugins: tuple[Path, ...] = (),
    overrides: dict[str, str] | None = None,
) -> tuple[KafkaHandle, Supervisor]:
    _require(tools, f"kafka {version}")
    supervisor = _supervisor(root / name)
    try:
        cluster = kafka_broker.start_cluster(
            name,
            root / name,
            tools,
            supervisor,
            version=version,
            nodes=nodes,
            heap=heap,
            plugins=plugins,
            overrides=overrides,
        )
    except BaseException:
        _release(supervisor)
        raise
    return KafkaHandle(cluster, supervisor, tools, heap), supervisor


@pytest.fixture(scope="session")
def kafka_broker_4(boot: Boot) -> Iterator[KafkaHandle]:
    yield from boot.take("kafka_broker_4")


@pytest.fixture(scope="session")
def kafka(kafka_broker_4: KafkaHandle) -> str:
    """Bootstrap servers of one Kafka 4.x broker (versions.toml [kafka].version)."""
    return kafka_broker_4.bootstrap_servers


PLAN_KEY = "kafka-rebalance-test-plan-key-1"


@pytest.fixture(scope="session")
def plan_keys(devenv_root: Path) -> Path:
    """The shared plan key file: the `kafka_plans` broker requires plan records signed with it,
    and broker-mode tests give it to the operator (`--plan-key-file`)."""
    path = devenv_root / "plan-keys"
    path.write_text(f"# the key plan records are signed with (docs/kip848.md)\n{PLAN_KEY}\n")
    return path


@pytest.fixture(scope="session")
def kafka_plans(boot: Boot) -> Iterator[KafkaHandle]:
    """One Kafka 4.x broker with the KIP-848 plan-following assignor (broker-plugin/) loaded as
    its default server-side assignor, requiring plan records signed with `plan_keys` (the
    `kafka` broker has no plug-in: its absence is tested there)."""
    yield from boot.take("kafka_plans")


def _start_kafka_plans(
    tools: Toolchain, root: Path, plan_keys: Path
) -> tuple[KafkaHandle, Supervisor]:
    _require(tools, "broker-plugin")
    return _start_kafka(
        tools,
        root,
        "kafka-plans",
        tools.kafka_version,
        1,
        BROKER_HEAP,
        plugins=(tools.broker_plugin_jar,),
        overrides={
            **kafka_broker.plan_plugin_overrides(),
            "kafka.rebalance.plans.keys.file": str(plan_keys),
        },
    )


@pytest.fixture(scope="session")
def kafka_compat_broker(boot: Boot) -> Iterator[KafkaHandle]:
    yield from boot.take("kafka_compat_broker")


@pytest.fixture(scope="session")
def kafka_compat(kafka_compat_broker: KafkaHandle) -> str:
    """Bootstrap servers of one Kafka 3.9 broker (versions.toml [kafka].compat_version)."""
    return kafka_compat_broker.bootstrap_servers


@pytest.fixture(scope="session", params=["4.x", "3.9"])
def any_kafka(request: pytest.FixtureRequest) -> KafkaHandle:
    """Each supported broker line in turn, for client-compatibility tests."""
    name = "kafka_broker_4" if request.param == "4.x" else "kafka_compat_broker"
    return request.getfixturevalue(name)


@pytest.fixture(scope="session")
def kafka_cluster(boot: Boot) -> Iterator[KafkaHandle]:
    """Three combined broker+controller nodes (a real KRaft quorum) for fault tests."""
    yield from boot.take("kafka_cluster")


# ---- Kubernetes ----------------------------------------------------------------------------------

KUBE_TOOLS = ("kubernetes", "etcd", "kwok")


@dataclass
class K8s:
    """The control plane: admin kubeconfig, kubectl, and RBAC-restricted identities."""

    kubeconfig: Path
    server: str
    ca: Path
    tools: Toolchain
    directory: Path

    def kubectl(
        self, *args: str, kubeconfig: Path | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.tools.kubectl), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def api_client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def restricted_kubeconfig(
        self, namespace: str, rules: Sequence[dict[str, Any]], name: str = "restricted"
    ) -> Path:
        """A ServiceAccount in `namespace` bound to a Role with `rules`; its token kubeconfig.

        The token comes from the TokenRequest API (as kubelets and `kubectl create token` get
        them), so tests see exactly what a pod running as that ServiceAccount would be allowed.
        """
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        api = self.api_client()
        core = client.CoreV1Api(api)
        rbac = client.RbacAuthorizationV1Api(api)

        def create(fn: Any, *args: Any) -> None:
            try:
                fn(*args)
            except ApiException as exc:
                if exc.status != 409:
                    raise

        create(core.create_namespace, {"metadata": {"name": namespace}})
        create(core.create_namespaced_service_account, namespace, {"metadata": {"name": name}})
        create(
            rbac.create_namespaced_role,
            namespace,
            {"metadata": {"name": name}, "rules": list(rules)},
        )
        create(
            rbac.create_namespaced_role_binding,
            namespace,
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            },
        )
        token = core.create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        api.close()
        return write_kubeconfig(
            self.directory / f"{namespace}-{name}.kubeconfig",
            self.server,
            self.ca,
            user=f"system:serviceaccount:{namespace}:{name}",
            token=token,
            namespace=namespace,
        )


@pytest.fixture(scope="session")
def k8s(boot: Boot) -> Iterator[K8s]:
    """etcd, kube-apiserver (RBAC), controller-manager, scheduler and a KWOK node."""
    yield from boot.take("k8s")


def _start_k8s(tools: Toolchain, root: Path) -> tuple[K8s, Supervisor]:
    _require(tools, *KUBE_TOOLS)
    directory = root / "kubernetes"
    supervisor = _supervisor(directory)
    try:
        plane = control_plane.start(directory, tools, supervisor)
    except BaseException:
        _release(supervisor)
        raise
    return K8s(plane.kubeconfig, plane.server, plane.ca, tools, directory), supervisor


# ---- starting the session's environments together -----------------------------------------------

# The session's environments, and fixtures that ask for some of them by name at run time.
ENVIRONMENTS = ("kafka_broker_4", "kafka_plans", "kafka_compat_broker", "kafka_cluster", "k8s")
ASKS_FOR = {"any_kafka": ("kafka_broker_4", "kafka_compat_broker")}


def needed_environments(items: Sequence[pytest.Item]) -> list[str]:
    """The environments the selected tests use (directly or through their fixtures)."""
    wanted: set[str] = set()
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for asker, asked in ASKS_FOR.items():
            if asker in names:
                names.update(asked)
        wanted.update(names)
    return [name for name in ENVIRONMENTS if name in wanted]


# ---- one build of each image per session ------------------------------------------------------

IMAGE_CACHE = "KAFKA_REBALANCE_IMAGE_CACHE"  # scripts/release-image --cache


def pytest_configure(config: pytest.Config) -> None:
    """Give the session one directory of image archives: the release-image tests and the
    newcomer's release build each image from this tree once per run, on whichever worker comes
    first (the other waits on the build and copies it), instead of once per module and worker.
    The controller makes it; the xdist workers it starts inherit the variable."""
    if os.environ.get(IMAGE_CACHE) or hasattr(config, "workerinput"):
        return
    directory = tempfile.mkdtemp(prefix="kafka-rebalance-images-")
    os.environ[IMAGE_CACHE] = directory
    config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


# ---- two pytest-xdist workers (`-n 2 --dist loadgroup`: the README's test command) ---------------


# Control-plane modules whose tests run for minutes against the clock (comparisons of plans
# on live consumers, brokers with the plug-in): about 40 % of the control-plane tests' time in
# a CI run, so the other 60 % and the brokers' group fill the other worker meanwhile.
LONG_KUBERNETES_MODULES = frozenset(
    {"test_e2e_sidecars.py", "test_streams_groups.py", "test_broker_mode.py"}
)


def xdist_group(item: pytest.Item) -> str | None:
    """The xdist group that keeps `item` on one worker with the tests that share its costly
    session environments, or None for a test any worker may run.

    Tests of the control plane (with whatever brokers they also use) form two groups, and tests
    of brokers alone a third, so each worker starts only the environments of the groups it
    runs. The control-plane tests are split because together they are more than half the
    suite's time: one group for the modules of `LONG_KUBERNETES_MODULES`, one for the rest,
    each starting its own control plane on whichever worker takes it. Any other integration
    test stays with its module, whose module-scoped fixtures (a real node, a dev environment)
    it shares.
    """
    needed = needed_environments([item])
    if "k8s" in needed:
        module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
        return "kubernetes-long" if module in LONG_KUBERNETES_MODULES else "kubernetes"
    if needed:
        return "kafka"
    if item.get_closest_marker("integration") is not None:
        return f"module:{item.nodeid.split('::', 1)[0]}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its xdist group (before xdist reads the marks, hence tryfirst)."""
    for item in items:
        group = xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


_RUNNING: list[pytest.Item] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Remember the test being set up: `boot` starts the environments of its group."""
    _RUNNING[:] = [item]


def environments_to_start(session: pytest.Session) -> list[str]:
    """What `boot` starts together: everything the session's tests need in one process; under
    xdist, what the group of the test that asked first needs (a worker runs whole groups; the
    environments of a group it takes later start when a test takes them)."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not _RUNNING:
        return needed_environments(session.items)
    group = xdist_group(_RUNNING[0])
    return needed_environments([item for item in session.items if xdist_group(item) == group])


class Boot:
    """Starts the environments the session's tests need all at once, in threads, when the first
    test needing any of them is set up, and waits for all before that test runs.

    Started one after another, the brokers and the control plane cost the sum of their start-up
    times (each mostly waits: JVM start, KRaft election, API server readiness); together, about
    the longest. No test runs beside an environment still starting. A failed start is raised to
    the tests that use that environment, as the fixture's own start would be; one no test took
    (its tests skipped) is stopped at session end like the others.
    """

    def __init__(self, starters: dict[str, Callable[[], tuple[Any, Supervisor]]]) -> None:
        self._starters = starters
        self._started: dict[str, Future[tuple[Any, Supervisor]]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def start(self, names: Sequence[str]) -> None:
        """Start `names` together and wait for all. The starting threads live until `close`:
        every server gets a parent-death signal, which Linux sends when the *thread* that
        forked it exits, so a thread that ended would take its broker down with it."""
        if not names:
            return
        self._pool = ThreadPoolExecutor(len(names), thread_name_prefix="environment")
        self._started = {name: self._pool.submit(self._starters[name]) for name in names}
        wait(self._started.values())

    def take(self, name: str) -> Iterator[Any]:
        """Yield the environment (started here if it was not started with the others) and stop
        it when the session ends."""
        future = self._started.pop(name, None)
        value, supervisor = future.result() if future is not None else self._starters[name]()
        try:
            yield value
        finally:
            _release(supervisor)

    def close(self) -> None:
        for future in self._started.values():
            if future.exception() is None:
                _release(future.result()[1])
        self._started.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@pytest.fixture(scope="session")
def boot(
    request: pytest.FixtureRequest, tools: Toolchain, devenv_root: Path, plan_keys: Path
) -> Iterator[Boot]:
    starters: dict[str, Callable[[], tuple[Any, Supervisor]]] = {
        "kafka_broker_4": lambda: _start_kafka(
            tools, devenv_root, "kafka", tools.kafka_version, 1, BROKER_HEAP
        ),
        "kafka_plans": lambda: _start_kafka_plans(tools, devenv_root, plan_keys),
        "kafka_compat_broker": lambda: _start_kafka(
            tools, devenv_root, "kafka-compat", tools.kafka_compat_version, 1, BROKER_HEAP
        ),
        "kafka_cluster": lambda: _start_kafka(
            tools, devenv_root, "kafka-cluster", tools.kafka_version, 3, CLUSTER_NODE_HEAP
        ),
        "k8s": lambda: _start_k8s(tools, devenv_root),
    }
    environments = Boot(starters)
    environments.start(environments_to_start(request.session))
    try:
        yield environments
    finally:
        environments.close()


# ---- Spark ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark(tools: Toolchain, devenv_root: Path) -> Iterator[Any]:
    """A local SparkSession (local[1], small memory) with the provisioned Kafka connector jars."""
    _require(tools, f"spark-kafka {tools.spark_version}")
    jars = tools.spark_jars
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run this interpreter (the venv with pyarrow), not the system python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("kafka-rebalance-tests")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.driver.memory", "512m")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.local.dir", str(devenv_root / "spark"))
        .config("spark.jars.ivy", str(devenv_root / "ivy-unused"))
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()
