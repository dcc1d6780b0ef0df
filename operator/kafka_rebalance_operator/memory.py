"""What the operator remembers about one policy between polls: `PolicyMemory`.

It lives in the policy's kopf memo and is passed to every poll explicitly. It is in memory only:
an operator restart loses rate history, capacity estimates and the open Kafka client, nothing
that decides correctness (epochs and assignments are re-read from status and ConfigMaps, and a
proposal on offer from status.proposal).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_rebalance_operator.capacity import CapacityEstimator
from kafka_rebalance_operator.history import PartitionMemory
from kafka_rebalance_operator.lag import PartitionLag
from kafka_rebalance_operator.planning import Proposal
from kafka_rebalance_operator.ports import Observer

PartitionKey = tuple[str, int]


@dataclass
class PolicyMemory:
    observer: Observer | None = None
    observer_key: tuple[str, str] | None = None  # (bootstrap servers, Secret fingerprint)
    partitions: dict[PartitionKey, PartitionMemory] = field(default_factory=dict)
    lags: dict[PartitionKey, PartitionLag] = field(default_factory=dict)
    proposal: Proposal | None = None  # the plan on offer for approval
    last_poll: float | None = None  # monotonic; the handler's "is a poll due"
    last_generation: int | None = None
    last_event: float | None = None  # wall time of the last PlanApplied event
    converging_since: float | None = None  # group mode: when verification last started
    polls: int = 0
    capacity: CapacityEstimator = field(default_factory=CapacityEstimator)  # adaptive weights

    def close(self) -> None:
        """Close the Kafka client (a fresh one connects at the next poll)."""
        if self.observer is not None:
            self.observer.close()
            self.observer = None
            self.observer_key = None
