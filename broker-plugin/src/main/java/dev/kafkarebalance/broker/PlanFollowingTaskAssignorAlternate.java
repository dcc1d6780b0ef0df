package dev.kafkarebalance.broker;

import java.time.Clock;

/**
 * {@link PlanFollowingTaskAssignor} under a second name, {@value #NAME}, with the same behaviour
 * and the same shared plan store. It exists for the trigger: a streams group's epoch is bumped
 * when its group config {@code streams.assignor.name} changes (KAFKA-19765), so the operator
 * switches a group between the two names once per published plan and the coordinator computes
 * a new target assignment that follows it (docs/kip848.md, "Streams groups").
 */
public class PlanFollowingTaskAssignorAlternate extends PlanFollowingTaskAssignor {
    public static final String NAME = "kafka-rebalance-plan-alt";

    /** What the broker instantiates (public no-argument constructor). */
    public PlanFollowingTaskAssignorAlternate() {
        super();
    }

    /** For tests and embedding: plans come from `store`, which the caller fills. */
    public PlanFollowingTaskAssignorAlternate(PlanStore store, Clock clock, long maxAgeMs) {
        super(store, clock, maxAgeMs);
    }

    @Override
    public String name() {
        return NAME;
    }
}
