package dev.kafkarebalance.broker;

import java.util.Collection;
import java.util.List;

import org.apache.kafka.coordinator.group.api.streams.assignor.AssignmentConfigs;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;

/**
 * The streams recompute trigger's reserved rack-aware tag key, {@value #KEY}.
 *
 * <p>In Kafka 4.4 a change of the group config {@code streams.assignor.name} does not bump a
 * streams group's epoch (it takes effect at the next rebalance); a change of the group's
 * assignment configs does: on each member heartbeat the coordinator compares
 * {@code num.standby.replicas} and {@code rack.aware.assignment.tags} with those of the last
 * target assignment (KAFKA-19765). So the operator triggers a recompute by adding {@value #KEY}
 * to, or removing it from, the group config {@code streams.rack.aware.assignment.tags}, and the
 * plug-in removes the key from the configs before Kafka's sticky logic sees them: the switch
 * changes the epoch and nothing else. No member reports a client tag of that name.
 */
final class TriggerTag {
    static final String KEY = "kafka-rebalance-trigger";

    private TriggerTag() {
    }

    /** `configs` without the reserved tag key (the same object when it does not carry it). */
    static AssignmentConfigs strip(AssignmentConfigs configs) {
        List<String> tags = configs.rackAwareAssignmentTags();
        if (tags == null || !tags.contains(KEY)) {
            return configs;
        }
        List<String> kept = tags.stream().filter(t -> !KEY.equals(t)).toList();
        int standbys = configs.numStandbyReplicas();
        return new AssignmentConfigs() {
            @Override
            public int numStandbyReplicas() {
                return standbys;
            }

            @Override
            public List<String> rackAwareAssignmentTags() {
                return kept;
            }
        };
    }

    /** The group as it is, but for the reserved tag key in its configs. */
    static GroupSpec neutral(GroupSpec group) {
        AssignmentConfigs configs = strip(group.configs());
        if (configs == group.configs()) {
            return group;
        }
        return new GroupSpec() {
            @Override
            public Collection<String> memberIds() {
                return group.memberIds();
            }

            @Override
            public MemberAssignmentMetadata memberMetadata(String memberId) {
                return group.memberMetadata(memberId);
            }

            @Override
            public MemberAssignmentState memberAssignmentState(String memberId) {
                return group.memberAssignmentState(memberId);
            }

            @Override
            public AssignmentConfigs configs() {
                return configs;
            }
        };
    }
}
