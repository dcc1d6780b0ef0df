"""One consumer group end to end: the pieces the demo and the end-to-end tests both drive.

A harness owns a fresh namespace, topic, group and policy (unique names, so several harnesses
can share one broker and API server, as the tests do), the operator subprocess, the sidecar
fleet, the producer and the sampler. It knows nothing about phases: `run` (the demo) and the
tests decide what happens when.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafka_rebalance_common.kafka_retry import ensure_topic

from kafka_rebalance_dev.demo.cluster import (
    POLL_INTERVAL,
    Cluster,
    install_crd,
    policy_body,
    wait_for,
)
from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.fleet import Fleet, SidecarSettings
from kafka_rebalance_dev.demo.observe import Sample, Sampler
from kafka_rebalance_dev.demo.operator_process import OperatorProcess
from kafka_rebalance_dev.demo.pods import ConsumerPods, PodFleet, RealNode
from kafka_rebalance_dev.demo.summary import Point
from kafka_rebalance_dev.demo.workload import Workload

APP = "consumer"
POLICY = "demo"
# A pod's restart takes seconds; its static member keeps its place for this long.
REAL_POD_SESSION_TIMEOUT_MS = 20000
# assign mode: how long the operator waits for an old owner's acknowledgement of a revoke
HANDOFF_TIMEOUT = "12s"


class GroupHarness:
    def __init__(
        self,
        endpoints: Endpoints,
        workdir: Path,
        *,
        prefix: str = "demo",
        partitions: int = 6,
        replicas: int = 3,
        poll_interval: str = POLL_INTERVAL,
        max_poll_records: int = 20,
        apply_mode: str = "group",
        sidecar_metrics: bool = False,
        real_node: RealNode | None = None,
        engine: str = "kafka-python",
        log: Callable[[str], None] = lambda message: None,
    ) -> None:
        """`real_node`: the sidecars run as real pods there (with their application container)
        instead of as processes beside KWOK's pods. `poll_interval`: the policy's
        rebalance.pollInterval (the operator honours down to 1s)."""
        suffix = uuid.uuid4().hex[:6]
        self.endpoints = endpoints
        self.workdir = workdir
        self.log = log
        self.partitions = partitions
        self.replicas = replicas
        self.namespace = f"{prefix}-{suffix}"
        self.topic = f"{prefix}-{suffix}"
        self.group = f"{prefix}-group-{suffix}"
        self.app, self.policy = APP, POLICY
        workdir.mkdir(parents=True, exist_ok=True)
        self.ledger_dir = workdir / "ledger"
        self.cluster = Cluster(endpoints.kubeconfig, self.namespace)
        self.poll_interval = poll_interval
        self.operator = OperatorProcess(endpoints.kubeconfig, self.namespace, workdir)
        self.fleet: Fleet | PodFleet
        if real_node is None:
            self.fleet = Fleet(
                SidecarSettings(
                    bootstrap=endpoints.bootstrap_servers,
                    group=self.group,
                    topic=self.topic,
                    policy=self.policy,
                    namespace=self.namespace,
                    kubeconfig=endpoints.kubeconfig,
                    ledger_dir=self.ledger_dir,
                    log_dir=workdir / "logs",
                    max_poll_records=max_poll_records,
                    apply_mode=apply_mode,
                    metrics=sidecar_metrics,
                    engine=engine,
                )
            )
        else:
            pods = ConsumerPods(
                name=self.app,
                image=real_node.image,
                bootstrap=real_node.bootstrap,
                group=self.group,
                topic=self.topic,
                policy=self.policy,
                node=real_node.node,
                apply_mode=apply_mode,
                session_timeout_ms=REAL_POD_SESSION_TIMEOUT_MS,
                max_poll_records=max_poll_records,
                max_replicas=max(replicas, 4),
            )
            self.fleet = PodFleet(self.cluster, pods, self.ledger_dir, real_node.pod_logs)
        self.apply_mode = apply_mode
        self.workload: Workload | None = None
        self.sampler: Sampler | None = None
        self.samples: list[Sample] = []

    # -- set-up ----------------------------------------------------------------------------------
    def setup(self, *, crd: bool = True) -> None:
        """CRD (idempotent), namespace, StatefulSet under KWOK, topic, producer, sampler."""
        if crd:
            install_crd(self.endpoints.kubectl, self.endpoints.kubeconfig)
        self.cluster.create_namespace()
        wait_for(
            "the default ServiceAccount",
            lambda: self.cluster.core.read_namespaced_service_account("default", self.namespace),
            timeout=60,
        )
        kwok_pods = isinstance(self.fleet, Fleet)  # real pods start with their sidecars
        if kwok_pods:
            self.cluster.create_statefulset(self.app, self.replicas)
        ensure_topic(
            self.endpoints.bootstrap_servers, self.topic, self.partitions, client_id="demo-admin"
        )
        if kwok_pods:
            self.cluster.wait_pods(self.app, self.pods(self.replicas))
        self.workload = Workload(self.endpoints.bootstrap_servers, self.topic, self.partitions)
        self.sampler = Sampler(
            self.endpoints.bootstrap_servers,
            self.group,
            self.topic,
            self.partitions,
            self.ledger_dir,
        )

    def pods(self, count: int) -> list[str]:
        return [f"{self.app}-{i}" for i in range(count)]

    def scale(self, replicas: int) -> None:
        """Scale the StatefulSet and wait until exactly that many pods are Ready."""
        self.cluster.scale(self.app, replicas)
        self.cluster.wait_pods(self.app, self.pods(replicas))
        self.replicas = replicas

    # -- the policy ------------------------------------------------------------------------------
    def apply_policy(self, strategy: str, mode: str, **options: Any) -> None:
        options.setdefault("apply", {"mode": self.apply_mode, "handoffTimeout": HANDOFF_TIMEOUT})
        options["rebalance"] = {
            "pollInterval": self.poll_interval,
            **(options.get("rebalance") or {}),
        }
        self.cluster.apply_policy(
            policy_body(
                self.policy,
                group=self.group,
                bootstrap=self.endpoints.bootstrap_servers,
                topic=self.topic,
                app=self.app,
                strategy=strategy,
                mode=mode,
                **options,
            )
        )

    def set_mode(self, mode: str) -> None:
        self.cluster.patch_policy(self.policy, {"spec": {"rebalance": {"mode": mode}}})

    def epoch(self) -> int:
        return int(self.cluster.policy_status(self.policy).get("epoch") or 0)

    def assignments(self) -> dict[str, dict[str, Any]]:
        return self.cluster.assignments(self.policy)

    # -- workload --------------------------------------------------------------------------------
    def produce(self, rates: Mapping[int, float]) -> None:
        """Start producing `rates[p]` records/s to partition p (setup() made the workload)."""
        assert self.workload is not None, "setup() creates the workload"
        self.workload.set_rates(dict(rates))
        self.workload.start()

    # -- sidecars --------------------------------------------------------------------------------
    def start_sidecars(self, members: list[str], slow: Mapping[str, int] | None = None) -> None:
        if isinstance(self.fleet, PodFleet):
            self.fleet.start_all(members, slow)
            return
        for member in members:
            self.fleet.start(member, slow_ms=(slow or {}).get(member, 0))

    # -- observation -----------------------------------------------------------------------------
    def sample(self) -> Sample:
        assert self.sampler is not None, "setup() first"
        sample = self.sampler.sample()
        self.samples.append(sample)
        return sample

    def points(self) -> list[Point]:
        return [Point(s.t, s.total_lag, s.processed_total) for s in self.samples]

    def wait_assigned(self, members: list[str], timeout: float = 90) -> Sample:
        """Wait until the group is Stable, every partition is owned by one of `members`, and
        (when there are enough partitions) every member owns some: a group that is Stable
        before the last member joined is not the assignment the demo means."""
        everyone = len(members) <= self.partitions

        def check() -> Sample | None:
            sample = self.sample()
            owners = set(sample.owners.values())
            if (
                sample.group_state == "Stable"
                and len(sample.owners) == self.partitions
                and owners <= set(members)
                and (owners == set(members) or not everyone)
            ):
                return sample
            return None

        return wait_for(f"{members} to own all partitions", check, timeout, 0.5, abort=self.crashed)

    def planned_owners(self) -> tuple[set[int], dict[int, str]]:
        """(epochs found, partition -> member) from the policy's ConfigMaps."""
        documents = self.assignments()
        owners = {
            p: member
            for member, doc in documents.items()
            for p in (doc.get("partitions") or {}).get(self.topic, [])
        }
        return {int(doc["epoch"]) for doc in documents.values()}, owners

    def wait_converged(
        self, min_epoch: int, members: list[str] | None = None, timeout: float = 90
    ) -> int:
        """Wait until the applied plan (epoch >= `min_epoch`, over exactly `members` when given)
        is what the group actually consumes by (describe_groups); return that epoch."""

        def check() -> int | None:
            epoch = self.epoch()
            if epoch < min_epoch:
                return None
            epochs, planned = self.planned_owners()
            if epochs != {epoch} or len(planned) != self.partitions:
                return None
            if members is not None and set(planned.values()) - set(members):
                return None
            if members is not None and set(self.assignments()) != set(members):
                return None
            sample = self.sample()
            if sample.group_state == "Stable" and sample.owners == planned:
                return epoch
            return None

        return wait_for(
            f"the group to converge on epoch >= {min_epoch}", check, timeout, 0.5, self.crashed
        )

    def wait_plan(
        self, min_epoch: int, members: list[str] | None = None, timeout: float = 90
    ) -> tuple[int, dict[int, str]]:
        """assign mode (no group to describe): wait until one epoch >= `min_epoch` covers every
        partition with nothing left revoking, over exactly `members` when given."""

        def check() -> tuple[int, dict[int, str]] | None:
            documents = self.assignments()
            epochs = {int(d["epoch"]) for d in documents.values()}
            if len(epochs) != 1 or min(epochs) < min_epoch:
                return None
            if any((d.get("revoking") or {}).get(self.topic) for d in documents.values()):
                return None
            if members is not None and set(documents) != set(members):
                return None
            _, planned = self.planned_owners()
            if len(planned) != self.partitions:
                return None
            return epochs.pop(), planned

        return wait_for(
            f"a complete plan at epoch >= {min_epoch}", check, timeout, 0.5, self.crashed
        )

    def crashed(self) -> str | None:
        """A report of sidecars that exited on their own (with their last log lines), if any."""
        exited = self.fleet.exited()
        if not exited:
            return None
        tails = "\n".join(f"--- {m} ---\n{self.fleet.log_tail(m)}" for m in sorted(exited))
        return f"sidecar(s) exited: {exited}\n{tails}"

    def watch(self, seconds: float, every: float = 1.0) -> list[Sample]:
        """Sample for `seconds`, failing fast if a sidecar process dies."""
        end = time.monotonic() + seconds
        taken = []
        while True:
            taken.append(self.sample())
            report = self.crashed()
            if report:
                raise RuntimeError(report)
            left = end - time.monotonic()
            if left <= 0:
                return taken
            time.sleep(min(every, left))

    def drain(self, timeout: float = 90) -> Sample:
        """After production stopped: wait until every produced record is committed."""
        assert self.workload is not None
        self.workload.stop()
        return wait_for(
            "the group to drain",
            lambda: (s := self.sample()).total_lag == 0 and s,
            timeout,
            0.5,
            self.crashed,
        )

    def reconcile(self) -> Any:
        """The ledger's verdict: produced offsets against processed records."""
        from kafka_rebalance_dev.demo.ledger import reconcile

        assert self.workload is not None
        return reconcile(self.workload.produced(), self.ledger_dir)

    # -- tear-down -------------------------------------------------------------------------------
    def close(self, *, delete: bool = True) -> None:
        """Stop everything this harness started; with `delete`, remove its namespace too
        (the policy first, while the operator still runs to drop its finalizer)."""
        with contextlib.suppress(Exception):
            self.fleet.stop_all()
        if self.workload is not None:
            with contextlib.suppress(Exception):
                self.workload.close()
        if delete:
            with contextlib.suppress(Exception):
                self.cluster.delete_policy(self.policy)
                if self.operator.running:
                    deadline = time.monotonic() + 15
                    while self.cluster.policy_status(self.policy) and time.monotonic() < deadline:
                        time.sleep(0.3)
        with contextlib.suppress(Exception):
            self.operator.stop()
        if self.sampler is not None:
            with contextlib.suppress(Exception):
                self.sampler.close()
        if delete:
            with contextlib.suppress(Exception):
                self.cluster.delete_namespace()
        with contextlib.suppress(Exception):
            self.cluster.close()
