package dev.kafkarebalance.broker;

import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;

/** One member's target assignment as this assignor returns it. */
public record PlannedAssignment(Map<Uuid, Set<Integer>> partitions) implements MemberAssignment {
    public PlannedAssignment {
        partitions = Map.copyOf(partitions);
    }
}
