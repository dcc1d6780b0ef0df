package dev.kafkarebalance.broker;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/**
 * Makes the fallback's assignment follow the plan exactly, keeping what the plan does not decide.
 * Pure: no I/O, no state.
 *
 * <ol>
 *   <li>Active: every planned task goes to its planned member; every other task stays where the
 *       fallback put it. The fallback assigns each task of the topology once, so the result does
 *       too (checked: {@link #activeCount}).</li>
 *   <li>Standby (stateful subtopologies only, as Kafka assigns them): the plan's standbys when it
 *       places them ({@link PlannedTasks#hasStandbys}), else the fallback's. A standby is dropped
 *       where its process now holds the task already (as active or as an earlier standby: the
 *       members of a process share its state directory), so no member, and no process, holds a
 *       task twice; a planned one also beyond {@code numStandbyReplicas} for its task. Planned
 *       standbys dropped are counted by reason ({@link Outcome#standbyRefusals}).</li>
 *   <li>Each stateful task then gets up to {@code numStandbyReplicas} standbys again, first on the
 *       member the fallback had made its active owner (its state is there, and the standby takes
 *       over what the plan moved away), then on members holding its state (previous active,
 *       standby or warm-up, then the most changelog offsets reported), then on the least loaded
 *       member of a process that does not hold it (ties to the smaller member id).</li>
 * </ol>
 */
final class TaskPlacement {
    private TaskPlacement() {
    }

    /** A task: (subtopology id, partition). */
    record Task(String subtopology, int partition) {
    }

    /** Why a planned standby is dropped here (keys of {@link Outcome#standbyRefusals}). */
    static final String ON_ACTIVE = "on its active's process";
    static final String TWICE = "twice on one process";
    static final String OVER_COUNT = "over the standby count";

    /**
     * The result, and what following the plan changed (for the broker log): standbys dropped (on a
     * process holding the task already, or refused), placed by this assignor, short of the count,
     * followed from the plan, and the plan's standbys not followed by reason (those
     * {@link PlannedTasks} refused included).
     */
    record Outcome(GroupAssignment assignment, int movedByPlan, int standbysDropped, int standbysPlaced,
                   int standbysMissing, int standbysFollowed, Map<String, Integer> standbyRefusals) {
    }

    static Outcome follow(GroupSpec group, List<String> memberIds, TopologyDescriber topology,
                          PlannedTasks planned, GroupAssignment fallback) {
        Map<String, Map<String, Set<Integer>>> active = new TreeMap<>();
        Map<String, Map<String, Set<Integer>>> standby = new TreeMap<>();
        Map<Task, String> displaced = new HashMap<>();  // planned task -> the fallback's owner it was taken from
        for (String member : memberIds) {
            active.put(member, new TreeMap<>());
            standby.put(member, new TreeMap<>());
        }
        int moved = 0;
        for (String member : memberIds) {
            MemberAssignment given = fallback.members().get(member);
            if (given == null) {
                continue;
            }
            for (Map.Entry<String, Set<Integer>> e : given.activeTasks().entrySet()) {
                for (int p : e.getValue()) {
                    String owner = planned.owner(e.getKey(), p);
                    if (owner != null && !owner.equals(member)) {
                        displaced.put(new Task(e.getKey(), p), member);
                        moved++;
                    } else if (owner == null) {
                        add(active, member, e.getKey(), p);
                    }
                }
            }
        }
        for (String member : planned.members()) {
            planned.of(member).forEach((subtopology, partitions) ->
                partitions.forEach(p -> add(active, member, subtopology, p)));
        }

        Map<String, String> process = new HashMap<>();
        for (String member : memberIds) {
            process.put(member, group.memberMetadata(member).processId());
        }
        Map<Task, Set<String>> holders = new HashMap<>();  // task -> processes holding it (active or standby)
        Map<String, Integer> load = new HashMap<>();
        active.forEach((member, tasks) -> {
            int n = 0;
            for (Map.Entry<String, Set<Integer>> e : tasks.entrySet()) {
                for (int p : e.getValue()) {
                    holders.computeIfAbsent(new Task(e.getKey(), p), t -> new HashSet<>()).add(process.get(member));
                }
                n += e.getValue().size();
            }
            load.put(member, n);
        });

        int dropped = 0;
        int followed = 0;
        int wanted = group.configs().numStandbyReplicas();
        boolean fromPlan = planned.hasStandbys();
        Map<String, Integer> refusals = new TreeMap<>(planned.standbyRefusals());
        Map<Task, Integer> standbys = new HashMap<>();
        for (String member : memberIds) {
            Map<String, Set<Integer>> given;
            if (fromPlan) {
                given = planned.standbys().getOrDefault(member, Map.of());
            } else {
                MemberAssignment assigned = fallback.members().get(member);
                given = assigned == null ? Map.of() : assigned.standbyTasks();
            }
            for (Map.Entry<String, Set<Integer>> e : new TreeMap<>(given).entrySet()) {
                for (int p : new TreeSet<>(e.getValue())) {
                    Task task = new Task(e.getKey(), p);
                    Set<String> held = holders.computeIfAbsent(task, t -> new HashSet<>());
                    String refusal = null;
                    if (fromPlan && standbys.getOrDefault(task, 0) >= wanted) {
                        refusal = OVER_COUNT;
                    } else if (held.contains(process.get(member))) {
                        refusal = activeOn(active, process, task, process.get(member)) ? ON_ACTIVE : TWICE;
                    }
                    if (refusal != null) {
                        dropped++;
                        if (fromPlan) {
                            refusals.merge(refusal, 1, Integer::sum);
                        }
                        continue;
                    }
                    held.add(process.get(member));
                    add(standby, member, e.getKey(), p);
                    standbys.merge(task, 1, Integer::sum);
                    load.merge(member, 1, Integer::sum);
                    if (fromPlan) {
                        followed++;
                    }
                }
            }
        }

        int placed = 0;
        int missing = 0;
        if (wanted > 0) {
            Map<Task, List<String>> stateHolders = null;  // built on first need
            TreeSet<String> byLoad = new TreeSet<>(Comparator.<String>comparingInt(load::get).thenComparing(m -> m));
            byLoad.addAll(memberIds);
            List<String> subtopologies = new ArrayList<>(topology.subtopologies());
            Collections.sort(subtopologies);
            for (String subtopology : subtopologies) {
                if (!topology.isStateful(subtopology)) {
                    continue;
                }
                int count = Math.max(0, topology.maxNumInputPartitions(subtopology));
                for (int p = 0; p < count; p++) {
                    Task task = new Task(subtopology, p);
                    int need = wanted - standbys.getOrDefault(task, 0);
                    if (need <= 0) {
                        continue;
                    }
                    if (stateHolders == null) {
                        stateHolders = stateHolders(group, memberIds);
                    }
                    Set<String> held = holders.computeIfAbsent(task, t -> new HashSet<>());
                    List<String> candidates = new ArrayList<>();
                    String before = displaced.get(task);
                    if (before != null) {
                        candidates.add(before);
                    }
                    candidates.addAll(stateHolders.getOrDefault(task, List.of()));
                    for (String member : candidates) {
                        if (need > 0 && held.add(process.get(member))) {
                            byLoad.remove(member);
                            add(standby, member, subtopology, p);
                            load.merge(member, 1, Integer::sum);
                            byLoad.add(member);
                            need--;
                            placed++;
                        }
                    }
                    while (need > 0) {
                        String chosen = null;
                        for (String member : byLoad) {
                            if (!held.contains(process.get(member))) {
                                chosen = member;
                                break;
                            }
                        }
                        if (chosen == null) {
                            missing += need;
                            break;
                        }
                        held.add(process.get(chosen));
                        byLoad.remove(chosen);
                        add(standby, chosen, subtopology, p);
                        load.merge(chosen, 1, Integer::sum);
                        byLoad.add(chosen);
                        need--;
                        placed++;
                    }
                }
            }
        }

        Map<String, MemberAssignment> members = new HashMap<>();
        for (String member : memberIds) {
            members.put(member, new MemberAssignment(freeze(active.get(member)), freeze(standby.get(member))));
        }
        return new Outcome(new GroupAssignment(members), moved, dropped, placed, missing, followed,
            Collections.unmodifiableMap(refusals));
    }

    /** Whether a member of `processId` runs `task` as active. */
    private static boolean activeOn(Map<String, Map<String, Set<Integer>>> active, Map<String, String> process,
                                    Task task, String processId) {
        for (Map.Entry<String, Map<String, Set<Integer>>> e : active.entrySet()) {
            if (processId.equals(process.get(e.getKey()))
                && e.getValue().getOrDefault(task.subtopology(), Set.of()).contains(task.partition())) {
                return true;
            }
        }
        return false;
    }

    /**
     * Per task, the members holding its state before this assignment, best first: previous
     * active owner, previous standby or warm-up holders, then members reporting changelog offsets
     * for it (most first). A member appears once per task.
     */
    private static Map<Task, List<String>> stateHolders(GroupSpec group, List<String> memberIds) {
        Map<Task, List<String>> out = new HashMap<>();
        Map<Task, List<Map.Entry<String, Long>>> byOffsets = new HashMap<>();
        for (int rank = 0; rank < 2; rank++) {
            for (String member : memberIds) {
                MemberAssignmentState state = group.memberAssignmentState(member);
                List<Map<String, Set<Integer>>> kinds = rank == 0
                    ? List.of(state.activeTasks()) : List.of(state.standbyTasks(), state.warmupTasks());
                for (Map<String, Set<Integer>> tasks : kinds) {
                    tasks.forEach((subtopology, partitions) -> partitions.forEach(p -> {
                        List<String> list = out.computeIfAbsent(new Task(subtopology, p), t -> new ArrayList<>());
                        if (!list.contains(member)) {
                            list.add(member);
                        }
                    }));
                }
            }
        }
        for (String member : memberIds) {
            group.memberAssignmentState(member).taskOffsets().forEach((subtopology, offsets) ->
                offsets.forEach((p, offset) -> byOffsets.computeIfAbsent(new Task(subtopology, p), t -> new ArrayList<>())
                    .add(Map.entry(member, offset))));
        }
        byOffsets.forEach((task, entries) -> {
            entries.sort(Map.Entry.<String, Long>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()));
            List<String> list = out.computeIfAbsent(task, t -> new ArrayList<>());
            for (Map.Entry<String, Long> e : entries) {
                if (!list.contains(e.getKey())) {
                    list.add(e.getKey());
                }
            }
        });
        return out;
    }

    /** Active tasks in an assignment, over all members. */
    static long activeCount(GroupAssignment assignment) {
        long n = 0;
        for (MemberAssignment member : assignment.members().values()) {
            for (Set<Integer> partitions : member.activeTasks().values()) {
                n += partitions.size();
            }
        }
        return n;
    }

    private static void add(Map<String, Map<String, Set<Integer>>> to, String member, String subtopology, int p) {
        to.get(member).computeIfAbsent(subtopology, s -> new TreeSet<>()).add(p);
    }

    private static Map<String, Set<Integer>> freeze(Map<String, Set<Integer>> tasks) {
        Map<String, Set<Integer>> out = new HashMap<>();
        tasks.forEach((subtopology, partitions) -> out.put(subtopology, Collections.unmodifiableSet(partitions)));
        return Collections.unmodifiableMap(out);
    }
}
