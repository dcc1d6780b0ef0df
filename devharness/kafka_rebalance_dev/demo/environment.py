"""The local environment behind the demo: start a private one, or reuse a running `dev up`.

The demo owns its environment by default (state in `.dev-demo/`, stopped at the end) so it never
disturbs a developer's `.dev/`; `--reuse` points it at an environment someone else started and
then leaves that environment alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalance_dev.demo.pods import RealNode
from kafka_rebalance_dev.devenv.control_plane import REAL_NODE_NAME
from kafka_rebalance_dev.devenv.environment import AlreadyUp, DevEnvironment, resolve_state_dir

DEFAULT_DEMO_STATE_DIR = ".dev-demo"


@dataclass(frozen=True)
class Endpoints:
    """What the harness needs from an environment: where Kafka and the API server are."""

    bootstrap_servers: str
    kubeconfig: Path
    kubectl: Path
    real_node: RealNode | None = None  # with `kubelet`: where the sidecars run as pods


class DemoEnvironmentError(RuntimeError):
    """The environment could not be started or is not complete (message says which part)."""


class DemoEnvironment:
    """A `DevEnvironment` the demo either started (and stops) or borrowed (and leaves)."""

    def __init__(self, state_dir: Path, *, reuse: bool) -> None:
        self.env = DevEnvironment(state_dir)
        self.reuse = reuse
        self.started_here = False

    @classmethod
    def choose(cls, state_dir: str | None, reuse: str | None) -> DemoEnvironment:
        """`reuse` names a running environment's state dir ("" means the default `.dev`)."""
        if reuse is not None:
            return cls(resolve_state_dir(reuse or None), reuse=True)
        return cls(Path(state_dir or DEFAULT_DEMO_STATE_DIR).expanduser().resolve(), reuse=False)

    def up(self, log: Callable[[str], None], *, kubelet: bool = False) -> tuple[Endpoints, float]:
        """Start (or check) the environment; return its endpoints and seconds taken. With
        `kubelet`, a real node beside KWOK's and the project's image built and loaded there."""
        seconds = 0.0
        if self.reuse:
            alive, gone = self.env.running()
            if not alive or gone:
                raise DemoEnvironmentError(
                    f"no complete environment is running in {self.env.state_dir} "
                    "(start one with `kafka-rebalance dev up`, or drop --reuse)"
                )
        else:
            try:
                seconds = self.env.up(log=log, kubelet=kubelet)
                self.started_here = True
            except AlreadyUp:
                raise DemoEnvironmentError(
                    f"an environment is already running in {self.env.state_dir}: pass "
                    f"--reuse {self.env.state_dir} to use it, or stop it with "
                    f"`kafka-rebalance dev down --state-dir {self.env.state_dir}`"
                ) from None
        info = self.env.info()
        if not info.get("kafka_bootstrap_servers") or not info.get("kubeconfig"):
            raise DemoEnvironmentError(
                f"the environment in {self.env.state_dir} lacks Kafka or Kubernetes "
                "(the demo needs both: `dev up` without --only)"
            )
        real_node = None
        if kubelet:
            real_node, built_s = self._real_node(info, log)
            seconds += built_s
        endpoints = Endpoints(
            bootstrap_servers=str(info["kafka_bootstrap_servers"]),
            kubeconfig=Path(str(info["kubeconfig"])),
            kubectl=self.env.tools.kubectl,
            real_node=real_node,
        )
        return endpoints, seconds

    def _real_node(self, info: dict, log: Callable[[str], None]) -> tuple[RealNode, float]:
        """The environment's real node with the current tree's image loaded (`dev image`)."""
        from kafka_rebalance_dev.devenv import image

        if not info.get("kafka_pod_bootstrap_servers") or not info.get("containerd_socket"):
            raise DemoEnvironmentError(
                f"the environment in {self.env.state_dir} has no real node (start it with "
                "`kafka-rebalance dev up --kubelet`, or drop --reuse)"
            )
        started = time.monotonic()
        try:
            ref = image.build_and_load(self.env.state_dir, self.env.tools, log=log)
        except image.ImageError as error:
            raise DemoEnvironmentError(f"`dev image` failed: {error}") from None
        node = RealNode(
            image=ref,
            bootstrap=str(info["kafka_pod_bootstrap_servers"]),
            node=REAL_NODE_NAME,
            pod_logs=self.env.state_dir / "node" / "pod-logs",
        )
        return node, time.monotonic() - started

    def down(self) -> None:
        """Stop the environment only if this process started it."""
        if self.started_here:
            self.env.down()
            self.started_here = False
