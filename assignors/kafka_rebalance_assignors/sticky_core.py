"""The computation shared by `sticky` and `cooperative-sticky`: KIP-54 balance and stickiness
with the KIP-341 generation rule, fast enough for Kafka's 1,000,000-partition budgets in Python.

Goals, in Kafka's order of precedence (StickyAssignor javadoc, KIP-54):

1. Balance. Either all members' partition counts differ by at most one, or no member with two or
   more fewer partitions than another could legally take one of that other's partitions (it does
   not subscribe to any topic the other holds). Equivalently: for every topic t,
   max(count of members holding t) - min(count of members subscribing to t) <= 1.
2. Stickiness. Keep as many previously owned partitions where they are as balance allows, and
   never move partitions of one topic around a cycle (A->B and B->A), which Kafka's `isSticky`
   check forbids.

Ownership (KIP-341) is the plan's one resolution (`assignors.ownership`, prepared once in the
planning context): the highest generation wins a conflicting claim, a tie at the top leaves the
partition unowned, and the runner-up (the unique claimant of the next lower generation) is the
"previous owner" KIP-341 moves a partition back to when balance allows. `sticky_ownership` takes
the sticky view of it.

Modules by concern, as Kafka's group coordinator splits its Uniform*AssignmentBuilders: this one
dispatches, `sticky_ownership` prepares ownership, `sticky_constrained` is the identical-
subscription path, `sticky_general` the general path.

Identical subscriptions (the KAFKA-9987 constrained algorithm). With P partitions and C members,
minQuota = P // C, maxQuota = ceil(P / C), and P % C members may end at maxQuota.
  * Retention, members in id order: a member owning fewer than minQuota keeps everything; one owning
    maxQuota or more keeps maxQuota while maxQuota slots remain, else minQuota. When it must drop
    some, it keeps them in (partition, topic) order (KAFKA-16277: spreads each topic evenly), except
    that partitions whose previous-generation owner is short of minQuota are dropped first so they
    can go home.
  * Fill: the unassigned sequence is the partitions nobody owned, in (topic, partition) order
    (those whose previous-generation owner is short of minQuota go back to it first), followed by
    the partitions revoked above, in the same order. Each goes to the least loaded member (ties by
    member id) until everyone has minQuota; the P % C remainder goes one each to members at
    minQuota in id order. This is the greedy of KIP-54's first worked example, and it deals each
    topic round-robin, so members get near-even shares of every topic (KAFKA-16277's test).
    Dealing revoked partitions last makes the plan stable under the cooperative protocol: once
    round one has handed out the target minus the transfers, the only unowned partitions are the
    revoked ones, the counts are those reached before they were dealt, and the memoryless rule
    gives each to the same member again (a property test checks round two reproduces the target).
    The fill is computed in "phases": while the set of least loaded members is unchanged, member
    j of k gets positions j, j+k, j+2k... of the sequence, so a phase costs one list slice per
    (topic, member), stored with C-level `map` calls, instead of one step per partition.
  Result: fully balanced (sizes within one) and maximally sticky (every member keeps
  min(owned, its cap), and no partition can return to an owner already at its cap).

General subscriptions (own design, same invariants as Kafka's GeneralAssignmentBuilder):
  1. Every owned partition of a still-subscribed topic stays where it is (as Kafka does).
  2. Greedy: topics with fewer subscribers first (ties by name); each topic's unassigned partitions
     are water-filled onto its least loaded subscribers (ties by id), which is exactly what giving
     the partitions one by one to the least loaded subscriber does, in one sort per topic.
  3. KIP-341 move-back: a partition whose previous-generation owner subscribes and has two or more
     fewer partitions than its current owner goes back to it (Kafka's first reassignment rule).
  4. Balancing passes until a whole pass moves nothing: for each topic with two or more
     subscribers, while (most loaded holder of t) - (least loaded subscriber of t) >= 2, move one
     partition of t from the former to the latter, taking partitions granted in this round before
     previously owned ones (moving a fresh grant costs no stickiness). Every move lowers the sum of
     squared counts, so the loop ends, and it ends exactly at Kafka's balance condition above.
     Kafka instead re-scans all partitions with an `isBalanced` test per step and can be
     super-quadratic; here a pass costs one `min` per topic when nothing is left to do.
     When the most loaded holder of t would have to give up a partition it owned before, a
     holder of a fresh grant of t that is loaded enough is asked instead.
  5. Repair: for each owned partition the balancing moved, try giving it back to its owner and
     letting the owner pass one of its fresh grants to the least loaded subscriber of that
     grant's topic; kept when the balance rule still holds (one move saved each time). Skipped
     when more than 500 partitions moved, since every attempt re-checks the topics involved.
  6. Cycle cancelling: per topic, if moved partitions form a cycle of owners (A->B, B->A, or
     longer), every partition on the cycle goes back to its owner. Counts and the set of topics
     each member holds are unchanged, so balance is kept, and stickiness strictly improves; the
     result never has the A->B / B->A churn Kafka's `isSticky` check looks for.

  State is member-major (the output's shape) with a separate record of this round's grants, so an
  almost unchanged group is not transposed back and forth. On the general path the cooperative
  protocol converges (Kafka's criterion: no round revokes and grants the same partition, settled
  within four rounds; property-tested) but round two need not reproduce the first target exactly,
  as with Kafka.

Speed notes: no per-partition objects beyond the output lists themselves, per-topic work done with
slices, `map`, `filterfalse` and `accumulate`, and Python's cyclic garbage collector paused while
the million small lists are built (see `collector_paused`).

Output partition lists are not sorted (the plan contract's `plan` normalises them); members that
get nothing may be absent. Everything is deterministic for the same input.
"""

from __future__ import annotations

from kafka_rebalance_assignors.collector import collector_paused
from kafka_rebalance_assignors.context import PlanContext
from kafka_rebalance_assignors.model import Assignment
from kafka_rebalance_assignors.sticky_constrained import constrained
from kafka_rebalance_assignors.sticky_general import general
from kafka_rebalance_assignors.sticky_ownership import sticky_claims


def sticky_assignment(context: PlanContext) -> Assignment:
    """The KIP-54 target assignment: constrained path for identical subscriptions, else general."""
    group = context.group
    if not group.members:
        return {}
    with collector_paused():
        owned, previous, claimed = sticky_claims(context)
        if group.subscriptions_identical():
            return constrained(context, owned, previous, claimed)
        return general(context, owned, previous, claimed)
