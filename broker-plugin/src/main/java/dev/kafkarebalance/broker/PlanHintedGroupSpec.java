package dev.kafkarebalance.broker;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.coordinator.group.api.streams.assignor.AssignmentConfigs;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;

/**
 * The group as the fallback assignor is shown it when a plan is followed: each member's previous
 * active tasks are its planned ones plus those it holds that the plan gives nobody else; an
 * active task the plan moves to another member counts as the old owner's standby (its state is
 * there, so Kafka's standby placement keeps it as the new owner's standby); and a task planned
 * active for a member is no longer among that member's standby or warm-up tasks.
 * So Kafka's sticky assignor, which keeps tasks with their previous owner, places the planned
 * tasks where the plan says as far as its balance allows, and the unplanned ones around them;
 * {@link TaskPlacement} then enforces the plan exactly. Changelog offsets, processes, racks,
 * client tags and configs are the group's own. Member ids are presented sorted (determinism).
 */
final class PlanHintedGroupSpec implements GroupSpec {
    private final GroupSpec group;
    private final List<String> memberIds;
    private final Map<String, MemberAssignmentState> states = new HashMap<>();

    PlanHintedGroupSpec(GroupSpec group, List<String> memberIds, PlannedTasks planned) {
        this.group = group;
        this.memberIds = List.copyOf(memberIds);
        for (String member : memberIds) {
            MemberAssignmentState state = group.memberAssignmentState(member);
            Map<String, Set<Integer>> mine = planned.of(member);
            Map<String, Set<Integer>> active = new HashMap<>();
            Map<String, Set<Integer>> standby = without(state.standbyTasks(), mine);
            boolean copied = false;
            for (Map.Entry<String, Set<Integer>> e : state.activeTasks().entrySet()) {
                for (int p : e.getValue()) {
                    String owner = planned.owner(e.getKey(), p);
                    if (owner == null || owner.equals(member)) {
                        active.computeIfAbsent(e.getKey(), s -> new TreeSet<>()).add(p);
                    } else {  // the plan moves it away: this member still holds its state, as a standby does
                        if (!copied) {
                            standby = copy(standby);
                            copied = true;
                        }
                        standby.computeIfAbsent(e.getKey(), s -> new TreeSet<>()).add(p);
                    }
                }
            }
            mine.forEach((subtopology, partitions) ->
                active.computeIfAbsent(subtopology, s -> new TreeSet<>()).addAll(partitions));
            states.put(member, new State(active, standby, without(state.warmupTasks(), mine), state));
        }
    }

    private static Map<String, Set<Integer>> copy(Map<String, Set<Integer>> tasks) {
        Map<String, Set<Integer>> out = new HashMap<>();
        tasks.forEach((subtopology, partitions) -> out.put(subtopology, new TreeSet<>(partitions)));
        return out;
    }

    private static Map<String, Set<Integer>> without(Map<String, Set<Integer>> tasks, Map<String, Set<Integer>> remove) {
        if (remove.isEmpty()) {
            return tasks;
        }
        Map<String, Set<Integer>> out = new HashMap<>();
        tasks.forEach((subtopology, partitions) -> {
            Set<Integer> drop = remove.getOrDefault(subtopology, Set.of());
            Set<Integer> kept = new TreeSet<>();
            for (int p : partitions) {
                if (!drop.contains(p)) {
                    kept.add(p);
                }
            }
            if (!kept.isEmpty()) {
                out.put(subtopology, kept);
            }
        });
        return out;
    }

    @Override
    public Collection<String> memberIds() {
        return memberIds;
    }

    @Override
    public MemberAssignmentMetadata memberMetadata(String memberId) {
        return group.memberMetadata(memberId);
    }

    @Override
    public MemberAssignmentState memberAssignmentState(String memberId) {
        MemberAssignmentState state = states.get(memberId);
        return state != null ? state : group.memberAssignmentState(memberId);
    }

    @Override
    public AssignmentConfigs configs() {
        return group.configs();
    }

    private record State(
        Map<String, Set<Integer>> activeTasks,
        Map<String, Set<Integer>> standbyTasks,
        Map<String, Set<Integer>> warmupTasks,
        MemberAssignmentState group
    ) implements MemberAssignmentState {
        @Override
        public Map<String, Map<Integer, Long>> taskOffsets() {
            return group.taskOffsets();
        }

        @Override
        public Map<String, Map<Integer, Long>> taskEndOffsets() {
            return group.taskEndOffsets();
        }
    }
}
