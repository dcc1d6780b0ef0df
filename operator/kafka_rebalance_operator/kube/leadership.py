"""Leader election on a coordination.k8s.io/v1 Lease: one active operator among replicas.

`kafka-rebalance operator --leader-election` calls `wait_for_leadership` before starting kopf
(chart value `leaderElection.enabled`). It follows the rules client-go's leader election is built
on, because they are what make it safe where kopf peering is not:

- No clock is compared across machines. A candidate never reads the holder's `renewTime` as a
  time; it remembers when *it* last saw the Lease change (its own monotonic clock) and treats the
  lease as expired only after `lease_duration` of its own time without a change. A node whose
  wall clock is off by minutes neither steals a live lease nor keeps a dead one.
- No priorities, so no ties: taking or renewing the Lease is an update conditioned on the
  `resourceVersion` that was read. Of two candidates racing for an expired lease the API server
  accepts exactly one write; the other gets 409 Conflict and stays a follower.
- The leader stops leading when it cannot renew within `renew_deadline` (< `lease_duration`), so
  it has stopped before any follower may take over. `is_leader` is that arithmetic on the
  leader's own monotonic clock, from the moment it *sent* its last successful renewal (a
  follower saw the change no earlier), so it turns False in time even while a call hangs; and
  no call can hang for long: every Lease request carries a timeout (`request_timeout`) below
  the renew deadline, so a renew round always returns and `run` notices the loss.
- `leaseTransitions` counts takeovers and is the fencing term: `term` while leading. The
  operator asks `may_write` before every write and stamps `term` on the documents it writes.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0  # a follower waits this long without seeing a renewal
    renew_deadline: float = 10.0  # the leader gives up if it could not renew for this long
    retry_period: float = 2.0  # how often everyone tries

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")

    @property
    def request_timeout(self) -> float:
        """Each Lease call gives up after this long: a round (a read and a write) fits in what
        the renew deadline leaves after one retry period, so a leader whose calls hang still
        sees a failed round before its deadline."""
        return (self.renew_deadline - self.retry_period) / 2


# A call that timed out or never reached the API server: a failed round, like a refusal.
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (urllib3.exceptions.HTTPError, OSError)


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 200 else text[:197] + "..."


def _now_micro() -> str:
    """Now as a MicroTime, in the text the API server writes. The client's fields are typed
    datetime, but its datetime form drops the fraction when it is zero, which MicroTime does not
    parse: the text is passed instead (hence the `type: ignore`s where it is stored)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease and keeps it; `is_leader` says whether this process leads now."""

    def __init__(
        self,
        api_client: Any,
        config: LeaseConfig,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from kubernetes import client

        self.api = client.CoordinationV1Api(api_client)
        self.config, self.clock = config, clock
        self.observed_version: str | None = None  # resourceVersion last seen
        self.observed_at = float("-inf")  # our clock when it last changed
        self.renewed_at = float("-inf")  # our clock when we last renewed as leader
        self.leading = False
        self.transitions = 0  # leaseTransitions when we took or kept the lease

    @property
    def is_leader(self) -> bool:
        return self.leading and self.clock() - self.renewed_at < self.config.renew_deadline

    def may_write(self) -> bool:
        """Whether this process may write now (the operator's `ports.Leadership`)."""
        return self.is_leader

    @property
    def term(self) -> int | None:
        """The Lease's transition count while this process leads (the fencing term)."""
        return self.transitions if self.leading else None

    def try_acquire_or_renew(self) -> bool:
        """One round: create, renew, or take over an expired lease; True while leading."""
        from kubernetes.client.rest import ApiException

        cfg, now = self.config, self.clock()
        try:
            lease = self.api.read_namespaced_lease(
                cfg.name, cfg.namespace, _request_timeout=cfg.request_timeout
            )
        except _TRANSPORT_ERRORS as error:
            return self._failed(f"read: {_short(error)}")
        except ApiException as error:
            if error.status != 404:
                return self._failed(f"read: HTTP {error.status}")
            return self._create(now)
        metadata, spec = lease.metadata, lease.spec
        if metadata is None or spec is None:  # the API server always sends both
            return self._failed("read: a Lease without metadata or spec")
        version = metadata.resource_version
        if version != self.observed_version:
            self.observed_version, self.observed_at = version, now
        holder = spec.holder_identity or ""
        mine = holder == cfg.identity
        expired = now - self.observed_at >= cfg.lease_duration
        if holder and not mine and not expired:
            self.leading = False
            return False
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        spec.holder_identity = cfg.identity
        spec.lease_duration_seconds = int(cfg.lease_duration)
        spec.renew_time = _now_micro()  # type: ignore[assignment]  # MicroTime text
        if not mine:
            spec.acquire_time = spec.renew_time
            spec.lease_transitions = transitions
        try:
            updated = self.api.replace_namespaced_lease(
                cfg.name, cfg.namespace, lease, _request_timeout=cfg.request_timeout
            )
        except _TRANSPORT_ERRORS as error:
            return self._failed(f"update: {_short(error)}")
        except ApiException as error:  # 409: someone else wrote first; we stay a follower
            return self._failed(f"update: HTTP {error.status}")
        self._won(updated, now, transitions)
        return True

    def _create(self, now: float) -> bool:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        cfg = self.config
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=cfg.name, namespace=cfg.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=cfg.identity,
                lease_duration_seconds=int(cfg.lease_duration),
                acquire_time=_now_micro(),  # type: ignore[arg-type]  # MicroTime text
                renew_time=_now_micro(),  # type: ignore[arg-type]  # MicroTime text
                lease_transitions=0,
            ),
        )
        try:
            created = self.api.create_namespaced_lease(
                cfg.namespace, body, _request_timeout=cfg.request_timeout
            )
        except _TRANSPORT_ERRORS as error:
            return self._failed(f"create: {_short(error)}")
        except ApiException as error:  # 409: another candidate created it first
            return self._failed(f"create: HTTP {error.status}")
        self._won(created, now, 0)
        return True

    def _won(self, lease: Any, now: float, transitions: int) -> None:
        if not self.leading:
            log.info(
                "leader election: %s leads (leaseTransitions %d)", self.config.identity, transitions
            )
        self.leading, self.renewed_at, self.transitions = True, now, transitions
        self.observed_version, self.observed_at = lease.metadata.resource_version, now

    def _failed(self, why: str) -> bool:
        log.debug("leader election: %s: %s", self.config.identity, why)
        if self.leading and self.clock() - self.renewed_at >= self.config.renew_deadline:
            log.warning("leader election: %s lost the lease (%s)", self.config.identity, why)
            self.leading = False
        return self.is_leader

    def run(self, stop: threading.Event, on_lost: Callable[[], None] | None = None) -> None:
        """Campaign until `stop`; calls `on_lost` once if leadership is lost after it was held:
        when a round says so, or, whichever comes first, when the renew deadline passes on this
        process's clock while a round is still waiting for the API server (a watchdog thread
        checks `is_leader` every `watch_interval`)."""
        fired = threading.Event()
        lock = threading.Lock()

        def lost() -> None:
            with lock:
                if fired.is_set():
                    return
                fired.set()
            stop.set()
            if on_lost is not None:
                on_lost()

        def watchdog() -> None:
            while not stop.wait(self.watch_interval):
                if self.leading and not self.is_leader:
                    lost()

        threading.Thread(target=watchdog, name="leader-election-watchdog", daemon=True).start()
        was_leading = False
        while not stop.is_set():
            leading = self.try_acquire_or_renew()
            if was_leading and not leading:
                lost()
                return
            was_leading = was_leading or leading
            stop.wait(self.config.retry_period)

    @property
    def watch_interval(self) -> float:
        return min(0.1, self.config.retry_period / 4)


def wait_for_leadership(
    api_client: Any, config: LeaseConfig, on_lost: Callable[[], None]
) -> LeaderElector:
    """Block until this process leads, then keep the lease in a daemon thread; `on_lost` runs if
    it is lost (the operator should exit at once: its pod restarts as a follower). The hook the
    operator command needs is one call of this before starting kopf."""
    elector = LeaderElector(api_client, config)
    while not elector.try_acquire_or_renew():
        time.sleep(config.retry_period)
    threading.Thread(
        target=elector.run,
        args=(threading.Event(), on_lost),
        name="leader-election",
        daemon=True,
    ).start()
    return elector
