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
 *
 * <p>Planned standbys (when the plan has them, {@link #hasStandbys}) are kept for members in the
 * group and tasks of stateful subtopologies the topology has; the others are counted by reason
 * ({@link #standbyRefusals}). Whether a kept standby sits on its active's process is decided by
 * {@link TaskPlacement}, which knows where the actives end up.
 */
final class PlannedTasks {
    private final Map<String, String[]> owners;          // subtopology -> owner per partition (null: unplanned)
    private final Map<String, Map<String, Set<Integer>>> byMember;  // member -> subtopology -> partitions
    private final int planned;
    private final int ignored;
    private final int absentMembers;
    private final Map<String, Map<String, Set<Integer>>> standbys;  // null: the plan places none
    private final Map<String, Integer> standbyRefusals;

    /** Why a planned standby is not followed (the keys of {@link #standbyRefusals}). */
    static final String UNKNOWN_TASK = "unknown task";
    static final String STATELESS_TASK = "stateless task";
    static final String ABSENT_MEMBER = "member not in the group";

    private PlannedTasks(Map<String, String[]> owners, Map<String, Map<String, Set<Integer>>> byMember,
                         int planned, int ignored, int absentMembers,
                         Map<String, Map<String, Set<Integer>>> standbys, Map<String, Integer> standbyRefusals) {
        this.owners = owners;
        this.byMember = byMember;
        this.planned = planned;
        this.ignored = ignored;
        this.absentMembers = absentMembers;
        this.standbys = standbys;
        this.standbyRefusals = standbyRefusals;
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
        Map<String, Integer> refusals = new TreeMap<>();
        Map<String, Map<String, Set<Integer>>> standbys = null;
        if (plan.standbys() != null) {
            standbys = new TreeMap<>();
            for (Map.Entry<String, Map<String, Set<Integer>>> member : new TreeMap<>(plan.standbys()).entrySet()) {
                for (Map.Entry<String, Set<Integer>> entry : new TreeMap<>(member.getValue()).entrySet()) {
                    Integer count = counts.get(entry.getKey());
                    for (int partition : new TreeSet<>(entry.getValue())) {
                        String refusal = !present.contains(member.getKey()) ? ABSENT_MEMBER
                            : count == null || partition >= count ? UNKNOWN_TASK
                            : !topology.isStateful(entry.getKey()) ? STATELESS_TASK : null;
                        if (refusal != null) {
                            refusals.merge(refusal, 1, Integer::sum);
                            continue;
                        }
                        standbys.computeIfAbsent(member.getKey(), m -> new TreeMap<>())
                            .computeIfAbsent(entry.getKey(), x -> new TreeSet<>()).add(partition);
                    }
                }
            }
        }
        return new PlannedTasks(owners, byMember, planned, ignored, absent, standbys, refusals);
    }

    /** Whether the plan places standbys (then they are followed, else the assignor places them). */
    boolean hasStandbys() {
        return standbys != null;
    }

    /** The member's planned standby tasks that can be followed (subtopology -> partitions), by member id. */
    Map<String, Map<String, Set<Integer>>> standbys() {
        return standbys == null ? Map.of() : standbys;
    }

    /** Planned standbys not followed, by reason ({@link #UNKNOWN_TASK}, ...). */
    Map<String, Integer> standbyRefusals() {
        return standbyRefusals;
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
