"""What the operator remembers about one policy between polls: `PolicyMemory`.

It lives in the policy's kopf memo and is passed to every poll explicitly. It is in memory only:
an operator restart loses rate history, capacity estimates and the open Kafka client, nothing
that decides correctness on its own: epochs and assignments are re-read from status, the
ConfigMaps and the group's commits (`ownership`), and a proposal on offer from status.proposal.
What it adds is the documents members act on when a ConfigMap no longer shows them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from kafka_rebalance_operator.capacity import CapacityEstimator
from kafka_rebalance_operator.history import PolicyHistory
from kafka_rebalance_operator.kube.assignment_doc import MemberDocument
from kafka_rebalance_operator.planning import Proposal
from kafka_rebalance_operator.ports import Observer
from kafka_rebalance_operator.telemetry import Emitted


@dataclass
class PolicyMemory:
    observer: Observer | None = None
    observer_key: tuple[str, str] | None = None  # (bootstrap servers, Secret fingerprint)
    # rates, end-offset histories and the lags last reported, for every partition, as arrays
    # (None until the first poll reads offsets)
    history: PolicyHistory | None = None
    telemetry: Emitted | None = None  # what each partition's last telemetry row said
    proposal: Proposal | None = None  # the plan on offer for approval
    last_poll: float | None = None  # monotonic; the handler's "is a poll due" (`poll_due`)
    phased: bool = False  # the one shortened interval that spreads polls has passed
    last_generation: int | None = None
    last_event: float | None = None  # wall time of the last PlanApplied event
    converging_since: float | None = None  # group mode: when verification last started
    polls: int = 0
    capacity: CapacityEstimator = field(default_factory=CapacityEstimator)  # adaptive weights
    # Safeguards, remembered here as well as in status, so that a status write that fails (an
    # admission policy on /status, an object over the size limit) cannot undo them: the last
    # applied epoch and when it was applied (cooldown), and the spec generation the last poll
    # reported on (a spec change skips cooldown and minImprovement for one plan, not for every
    # poll until a status write succeeds).
    applied_epoch: int = 0
    applied_at: float | None = None
    reported_generation: int | None = None
    # The document each member's sidecar acts on, as last written or read: a ConfigMap deleted,
    # corrupted or rewritten by hand does not make its partitions look unowned (`ownership`).
    documents: dict[str, MemberDocument] = field(default_factory=dict)
    published_hash: str | None = None  # broker mode: the plan last published to the brokers
    published_at: float | None = None  # ... and when (wall time)
    published_group: str | None = None  # ... for which group (a tombstone retires it)
    published_member_ids: tuple[str, ...] = ()  # ... naming these KIP-848 member ids
    # ... by this policy incarnation (uid) at this epoch: what its tombstone retires, signed
    published_incarnation: str | None = None
    published_epoch: int | None = None
    # plan-topic kinds (streams, share): the group epoch before the first trigger of the plan
    # in place (None: no trigger awaiting the group running it), the triggers sent so far, the
    # epoch bumps the last plan cost, when the last trigger went and the group epoch it saw,
    # and the plan last published
    trigger_epoch: int | None = None
    triggers: int = 0
    last_plan_bumps: int | None = None
    triggered_at: float | None = None
    triggered_group_epoch: int | None = None
    published_plan: dict[str, dict[str, list[int]]] | None = None
    trigger_tag_left: bool = False  # streams: a trigger may have left the reserved tag in place
    # broker mode: the (group, heartbeat interval ms) this operator last wrote as the group's own
    # config (None: none since it started; `phases.group_config`)
    heartbeat_written: tuple[str, int] | None = None
    status_failing: bool = False  # the last status write was refused (one Event per episode)

    def poll_due(self, now: float, generation: int, interval: float, uid: str) -> bool:
        """Is a poll due at `now` (monotonic)? If so it is recorded as made. The first poll and
        the first after a spec change are due at once; the second comes `interval` minus the
        policy's phase (a fraction of the interval fixed by its uid) after the first, and every
        later one `interval` after the one before. So policies created or started together
        spread their polls over the interval, and no poll waits longer than the interval."""
        if self.last_generation == generation and self.last_poll is not None:
            wait = interval
            if not self.phased:
                wait -= interval * (zlib.crc32(uid.encode()) / 2**32)
            if now - self.last_poll < wait:
                return False
            self.phased = True
        self.last_poll, self.last_generation = now, generation
        return True

    def close(self) -> None:
        """Close the Kafka client (a fresh one connects at the next poll)."""
        if self.observer is not None:
            self.observer.close()
            self.observer = None
            self.observer_key = None
