"""`kafka-rebalance-plan`: a kafka-python 3.0 client-side assignor that follows the operator's plan.

Each member advertises its own document's claim in the subscription user_data; the elected
leader composes the group assignment from the claims it trusts (`plan_following.trusted`, then
`plan_following.compose`: none above its own document's epoch, none naming another policy
incarnation than its own document's). Nothing
here does I/O: `assign` and `metadata` run on the client's network thread, inside the JoinGroup
handling, where a blocking call would stall heartbeats and fetches of the whole consumer.

Pass an instance (`partition_assignment_strategy=[PlanFollowingAssignor(tracker)]`): state lives
on the instance. kafka-python requires all configured assignors to share one rebalance protocol,
so the instance is either cooperative (KIP-429, the default) or eager, never both.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka_rebalance_common.wire.user_data import (
    NO_EPOCH,
    decode_claim,
    decode_claim_epoch,
    decode_composed,
    encode_claim,
    encode_composed,
)

from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.plan_following import (
    NO_GENERATION,
    Composition,
    MemberView,
    compose,
    trusted,
)

log = logging.getLogger("kafka_rebalance_sidecar.assignor")

ASSIGNOR_NAME = "kafka-rebalance-plan"
# Subscription v1 carries owned_partitions (KIP-429); the leader needs them to withhold moving
# partitions and to keep the fallback sticky, in either protocol.
SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1

TopicPartitions = frozenset[tuple[str, int]]
OwnedSource = Callable[[], Iterable[Any]]  # returns TopicPartition-like (.topic, .partition)


class PlanFollowingAssignor(AbstractPartitionAssignor):
    """Assign what the members' documents claim; give out the rest cooperative-sticky."""

    name = ASSIGNOR_NAME

    def __init__(
        self,
        tracker: AssignmentTracker,
        *,
        cooperative: bool = True,
        owned_source: OwnedSource | None = None,
    ) -> None:
        self.tracker = tracker
        self.cooperative = cooperative
        # What this member owns right now. kafka-python keeps that in the consumer's
        # subscription state (it empties it when membership is lost); the runner wires it in
        # with `owned_source=consumer.assignment` after creating the consumer. Without it, the
        # last assignment received stands in, which is right except after a lost membership.
        self.owned_source = owned_source
        self._lock = threading.Lock()
        self._last_assignment: TopicPartitions | None = None
        self._last_composed_epoch: int | None = None
        self._last_claim_epoch: int | None = None
        self._last_generation: int | None = None
        self._last_composition: Composition | None = None

    # -- what the consumer reads back ------------------------------------------------------

    @property
    def last_assignment(self) -> TopicPartitions | None:
        """The partitions of this member's last assignment (None before the first one)."""
        with self._lock:
            return self._last_assignment

    @property
    def last_composed_epoch(self) -> int | None:
        """The claim epoch the leader composed the last assignment from (-1: from no claim;
        None before the first assignment or when the leader is not a plan-following one)."""
        with self._lock:
            return self._last_composed_epoch

    @property
    def last_claim_epoch(self) -> int | None:
        """This member's own claim epoch as the leader saw it in the last round (-1: it saw no
        claim; None before the first assignment or from a leader that does not say)."""
        with self._lock:
            return self._last_claim_epoch

    @property
    def last_generation(self) -> int | None:
        with self._lock:
            return self._last_generation

    @property
    def last_composition(self) -> Composition | None:
        """The last composition this member made as the leader (None if it never led)."""
        with self._lock:
            return self._last_composition

    # -- AbstractPartitionAssignor ---------------------------------------------------------

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE if self.cooperative else RebalanceProtocol.EAGER]

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolSubscription:
        subscribed = sorted(topics)
        by_topic: dict[str, list[int]] = defaultdict(list)
        wanted = set(subscribed)
        for topic, partition in self._owned_now():
            if topic in wanted:
                by_topic[topic].append(partition)
        owned = [
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=sorted(ps))
            for t, ps in sorted(by_topic.items())
        ]
        return ConsumerProtocolSubscription(
            version=SUBSCRIPTION_VERSION,
            topics=subscribed,
            user_data=encode_claim(self.tracker.current),
            owned_partitions=owned,
        )

    def assign(self, cluster: Any, members: list[Any]) -> dict[str, ConsumerProtocolAssignment]:
        views = []
        topics: set[str] = set()
        for member in members:
            subscription = member.metadata
            topics.update(subscription.topics)
            owned: dict[str, list[int]] = defaultdict(list)
            for entry in getattr(subscription, "owned_partitions", None) or ():
                owned[entry.topic].extend(entry.partitions)
            generation = getattr(subscription, "generation_id", None)
            views.append(
                MemberView(
                    member_id=member.member_id,
                    instance_id=getattr(member, "group_instance_id", None),
                    topics=tuple(subscription.topics),
                    claim=decode_claim(subscription.user_data),
                    owned=dict(owned),
                    generation=generation if isinstance(generation, int) else NO_GENERATION,
                )
            )
        own = self.tracker.current
        own_epoch = own.epoch if own is not None else NO_EPOCH
        own_policy = own.policy_uid if own is not None else ""
        checked = trusted(views, own_epoch, own_policy)
        for member_id, epoch in checked.untrusted_claims:
            log.warning(
                "ignored the claim of epoch %d from member %s: above epoch %d of the plan this "
                "leader read",
                epoch,
                member_id,
                own_epoch,
            )
        for member_id, epoch, policy in checked.other_incarnation_claims:
            log.warning(
                "ignored the claim of epoch %d from member %s: policy incarnation %s, not %s of "
                "the plan this leader read",
                epoch,
                member_id,
                policy,
                own_policy,
            )
        views = list(checked.members)
        counts = {}
        for topic in sorted(topics):
            partitions = cluster.partitions_for_topic(topic)
            if partitions is None:
                log.warning("no partition metadata for topic %s: assigning none of it", topic)
                continue
            counts[topic] = len(partitions)
        composition = compose(views, counts, cooperative=self.cooperative)
        claim_epochs = {
            v.member_id: v.claim.epoch if v.claim is not None else NO_EPOCH for v in views
        }
        epochs = sorted({v.claim.epoch for v in views if v.claim is not None})
        log.info(
            "composed assignment for %d members from epoch %d (claim epochs %s, members "
            "without a claim %d, claims above the leader's plan %d, claims of another policy "
            "incarnation %d, members of an older generation %d): %d claimed, %d by fallback, "
            "%d withheld, %d claims ignored",
            len(views),
            composition.epoch,
            epochs,
            sum(1 for v in views if v.claim is None),
            len(checked.untrusted_claims),
            len(checked.other_incarnation_claims),
            len(checked.stale_owners),
            composition.claimed_partitions,
            composition.fallback_partitions,
            len(composition.withheld),
            composition.ignored_claims,
        )
        with self._lock:
            self._last_composition = composition
        return {
            member_id: ConsumerProtocolAssignment(
                ASSIGNMENT_VERSION,
                sorted(by_topic.items()),
                encode_composed(composition.epoch, claim_epochs.get(member_id, NO_EPOCH)),
            )
            for member_id, by_topic in composition.assignment.items()
        }

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation: int) -> None:
        partitions = frozenset((tp.topic, tp.partition) for tp in assignment.partitions())
        epoch = decode_composed(assignment.user_data)
        claim_epoch = decode_claim_epoch(assignment.user_data)
        with self._lock:
            self._last_assignment = partitions
            self._last_composed_epoch = epoch
            self._last_claim_epoch = claim_epoch
            self._last_generation = generation
        log.info(
            "assignment at generation %s from epoch %s: %d partitions",
            generation,
            epoch,
            len(partitions),
        )

    # -- helpers ---------------------------------------------------------------------------

    def _owned_now(self) -> Iterable[tuple[str, int]]:
        if self.owned_source is not None:
            return [(tp.topic, tp.partition) for tp in (self.owned_source() or ())]
        with self._lock:
            return self._last_assignment or ()
