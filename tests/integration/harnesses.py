"""The group harness as the integration tests use it: set up, yielded, closed, and on failure
the evidence printed (policy status, documents, the operator's and each consumer's log tail)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kafka_rebalance_dev.demo.environment import Endpoints
from kafka_rebalance_dev.demo.harness import GroupHarness


def plan_flags(workdir: Path, bootstrap: str, plan_keys: Path | None = None) -> list[str]:
    """The operator's broker-mode flags: its own plan client config (a real file) naming the
    plan cluster, the only servers its plan credentials go to, and the plan key file if any.
    Without a plan cluster broker-mode policies are Stalled (PlanClusterNotConfigured)."""
    config = workdir / "plan-client.json"
    config.write_text(json.dumps({"bootstrap_servers": bootstrap}), encoding="utf-8")
    flags = ["--plan-client-config", str(config)]
    return flags + (["--plan-key-file", str(plan_keys)] if plan_keys is not None else [])


def print_evidence(harness: GroupHarness, *extra: Callable[[], str]) -> None:
    """What a failed run leaves to look at; `extra` adds test-specific lines."""
    with contextlib.suppress(Exception):
        print("policy status:", json.dumps(harness.cluster.policy_status(harness.policy)))
        print("documents:", json.dumps(harness.assignments()))
    for more in extra:
        with contextlib.suppress(Exception):
            print(more())
    if harness.operator.log is not None and harness.operator.log.exists():
        tail = harness.operator.log.read_text(errors="replace").splitlines()[-40:]
        print("operator log tail:\n" + "\n".join(tail))
    for member in sorted(harness.fleet.processes):
        print(f"--- sidecar {member} ---\n{harness.fleet.log_tail(member, 30)}")


@contextlib.contextmanager
def group_harness(
    endpoints: Endpoints,
    workdir: Path,
    *,
    evidence: tuple[Callable[[], str], ...] = (),
    **options: Any,
) -> Iterator[GroupHarness]:
    """A set-up GroupHarness (options as its constructor's), closed afterwards."""
    harness = GroupHarness(endpoints, workdir, **options)
    try:
        harness.setup()
        yield harness
    except BaseException:
        print_evidence(harness, *evidence)
        raise
    finally:
        harness.close()


def ledger_verdict(
    harness: GroupHarness, label: str = "", *, same_epoch: bool = True, timeout: float = 120
) -> Any:
    """Drain the group, then the ledger's verdict: nothing lost, no two members on one
    partition at one time, and (`same_epoch`) none under one epoch. Returns the report."""
    harness.drain(timeout=timeout)
    report = harness.reconcile()
    print(f"\n{label}{': ' if label else ''}{report.summary()}")
    assert report.lost == 0, report.lost_examples
    assert report.overlaps == (), report.overlaps[:5]
    if same_epoch:
        assert report.conflicts == (), report.conflicts
    return report


def kubectl_cgp(k8s: Any, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl cgp ...` as a user types it: kubectl finds `kubectl-cgp` on $PATH."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(k8s.kubeconfig),
    }
    return subprocess.run(
        [str(k8s.tools.kubectl), "cgp", *args, "-n", namespace],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a Python start-up and the Kubernetes client's import, on a loaded machine
    )
