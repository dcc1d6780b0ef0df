package dev.kafkarebalance.broker;

import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/**
 * The part of a streams plan that can be followed for a group as it is now: the planned active
 * tasks of members that are in the group, of subtopologies the topology has, at partitions below
 * the subtopology's input partition count. The rest of the plan is counted and dropped: a task
 * the plan cannot place is left to the fallback, never lost. Pure: no I/O.
 *
 * <p>Invariant: each task has at most one planned owner (the codec refuses a plan that names a
 * task twice; {@link #of} checks again, keeping the first owner by member id).
 */
final class PlannedTasks {
    private final Map<String, String[]> owners;          // subtopology -> owner per partition (null: unplanned)
    private final Map<String, Map<String, Set<Integer>>> byMember;  // member -> subtopology -> partitions
    private final int planned;
    private final int ignored;
    private final int absentMembers;

    private PlannedTasks(Map<String, String[]> owners, Map<String, Map<String, Set<Integer>>> byMember,
                         int planned, int ignored, int absentMembers) {
        this.owners = owners;
        this.byMember = byMember;
        this.planned = planned;
        this.ignored = ignored;
        this.absentMembers = absentMembers;
    }

    /** The followable part of `plan` for a group of `members` with `topology`. */
    static PlannedTasks of(Plan plan, Collection<String> members, TopologyDescriber topology) {
        Map<String, Integer> counts = new HashMap<>();
        for (String subtopology : topology.subtopologies()) {
            counts.put(subtopology, Math.max(0, topology.maxNumInputPartitions(subtopology)));
        }
        Set<String> present = new HashSet<>(members);
        Map<String, String[]> owners = new HashMap<>();
        Map<String, Map<String, Set<Integer>>> byMember = new TreeMap<>();
        int planned = 0;
        int ignored = 0;
        int absent = 0;
        for (Map.Entry<String, Map<String, Set<Integer>>> member : new TreeMap<>(plan.tasks()).entrySet()) {
            if (!present.contains(member.getKey())) {
                absent++;
                continue;  // its tasks fall back
            }
            for (Map.Entry<String, Set<Integer>> entry : member.getValue().entrySet()) {
                Integer count = counts.get(entry.getKey());
                for (int partition : entry.getValue()) {
                    if (count == null || partition >= count) {
                        ignored++;
                        continue;
                    }
                    String[] owner = owners.computeIfAbsent(entry.getKey(), s -> new String[count]);
                    if (owner[partition] != null) {
                        ignored++;
                        continue;
                    }
                    owner[partition] = member.getKey();
                    byMember.computeIfAbsent(member.getKey(), m -> new TreeMap<>())
                        .computeIfAbsent(entry.getKey(), s -> new TreeSet<>()).add(partition);
                    planned++;
                }
            }
        }
        return new PlannedTasks(owners, byMember, planned, ignored, absent);
    }

    /** The planned owner of the task, or null if the plan does not place it. */
    String owner(String subtopology, int partition) {
        String[] owner = owners.get(subtopology);
        return owner == null || partition < 0 || partition >= owner.length ? null : owner[partition];
    }

    /** The member's planned active tasks (subtopology -> partitions), empty if none. */
    Map<String, Set<Integer>> of(String member) {
        return byMember.getOrDefault(member, Map.of());
    }

    /** Members with planned tasks, by member id. */
    Set<String> members() {
        return byMember.keySet();
    }

    /** Tasks placed by the plan. */
    int planned() {
        return planned;
    }

    /** Planned tasks dropped: unknown subtopology, partition beyond the input partition count. */
    int ignored() {
        return ignored;
    }

    /** Planned members that are not in the group (their tasks fall back). */
    int absentMembers() {
        return absentMembers;
    }
}
