package dev.kafkarebalance.broker;

import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.Uuid;

/**
 * One group's plan, as the operator published it. A consumer-group plan has its topic names
 * resolved to the topic ids the coordinator speaks ({@code GroupSpec} knows topics only by id);
 * a streams plan keeps its subtopology ids, which is what the task assignor is given.
 *
 * <p>Invariant: in a consumer plan no (topic, partition) appears under two instance ids and in a
 * streams plan no task under two member ids (the codec refuses such a document), so following
 * the plan never assigns one twice. A share plan may name a partition under several members:
 * share partitions are consumed by all their members.
 *
 * @param group       the group the plan is for (the record key it was published under)
 * @param incarnation the uid of the policy that published it ("" if not given): epochs are
 *                    ordered within one incarnation only
 * @param epoch       the operator's plan epoch
 * @param planHash    the operator's hash of the plan, for logs
 * @param generatedAtMs when the operator wrote it (epoch millis), 0 if not given
 * @param memberIds   the group's member ids (KIP-848 or streams) when the operator planned (may be
 *                    empty): what ties the plan to its own group ({@link PlanStore#select},
 *                    {@link PlanStore#selectStreams})
 * @param members     consumer plans: instance id -> topic id -> partitions; share plans: share
 *                    member id -> topic id -> partitions (empty for streams)
 * @param unresolved  topic names the plan uses that the cluster does not know (yet)
 * @param kind        which assignor follows it
 * @param tasks       streams plans: member id -> subtopology id -> partitions of its active tasks
 *                    (empty for consumer plans)
 * @param standbys    streams plans: member id -> subtopology id -> partitions of its planned standby
 *                    tasks; null when the plan places none (records before planned standbys, other
 *                    kinds): the task assignor then places standbys itself. A task may have several
 *                    standbys, on different members.
 */
public record Plan(
    String group,
    String incarnation,
    long epoch,
    String planHash,
    long generatedAtMs,
    Set<String> memberIds,
    Map<String, Map<Uuid, Set<Integer>>> members,
    Set<String> unresolved,
    PlanKind kind,
    Map<String, Map<String, Set<Integer>>> tasks,
    Map<String, Map<String, Set<Integer>>> standbys
) {
    public Plan {
        memberIds = Set.copyOf(memberIds);
        members = Map.copyOf(members);
        unresolved = Set.copyOf(unresolved);
        tasks = Map.copyOf(tasks);
        standbys = standbys == null ? null : copy(standbys);
    }

    /** A plan of any kind without planned standbys. */
    public Plan(String group, String incarnation, long epoch, String planHash, long generatedAtMs,
                Set<String> memberIds, Map<String, Map<Uuid, Set<Integer>>> members, Set<String> unresolved,
                PlanKind kind, Map<String, Map<String, Set<Integer>>> tasks) {
        this(group, incarnation, epoch, planHash, generatedAtMs, memberIds, members, unresolved, kind, tasks, null);
    }

    /** This streams plan with `standbys` (member id -> subtopology id -> partitions; null: none planned). */
    public Plan withStandbys(Map<String, ? extends Map<String, ? extends Set<Integer>>> standbys) {
        return new Plan(group, incarnation, epoch, planHash, generatedAtMs, memberIds, members, unresolved, kind,
            tasks, standbys == null ? null : copy(standbys));
    }

    private static Map<String, Map<String, Set<Integer>>> copy(
        Map<String, ? extends Map<String, ? extends Set<Integer>>> tasks) {
        Map<String, Map<String, Set<Integer>>> out = new java.util.HashMap<>();
        tasks.forEach((member, subtopologies) -> {
            Map<String, Set<Integer>> inner = new java.util.HashMap<>();
            subtopologies.forEach((subtopology, partitions) -> inner.put(subtopology, Set.copyOf(partitions)));
            out.put(member, Map.copyOf(inner));
        });
        return Map.copyOf(out);
    }

    /** A consumer-group plan. */
    public Plan(String group, String incarnation, long epoch, String planHash, long generatedAtMs,
                Set<String> memberIds, Map<String, Map<Uuid, Set<Integer>>> members, Set<String> unresolved) {
        this(group, incarnation, epoch, planHash, generatedAtMs, memberIds, members, unresolved,
            PlanKind.CONSUMER, Map.of());
    }

    /** A consumer-group plan with no incarnation and no member ids (tests, version-1 records). */
    public Plan(String group, long epoch, String planHash, long generatedAtMs,
                Map<String, Map<Uuid, Set<Integer>>> members, Set<String> unresolved) {
        this(group, "", epoch, planHash, generatedAtMs, Set.of(), members, unresolved);
    }

    /** A streams-group plan: `tasks` is member id -> subtopology id -> active task partitions. */
    public static Plan streams(String group, String incarnation, long epoch, String planHash, long generatedAtMs,
                              Set<String> memberIds, Map<String, Map<String, Set<Integer>>> tasks) {
        return new Plan(group, incarnation, epoch, planHash, generatedAtMs, memberIds, Map.of(), Set.of(),
            PlanKind.STREAMS, tasks);
    }

    /** A share-group plan: `members` is share member id -> topic id -> partitions (shared ones too). */
    public static Plan share(String group, String incarnation, long epoch, String planHash, long generatedAtMs,
                             Set<String> memberIds, Map<String, Map<Uuid, Set<Integer>>> members, Set<String> unresolved) {
        return new Plan(group, incarnation, epoch, planHash, generatedAtMs, memberIds, members, unresolved,
            PlanKind.SHARE, Map.of());
    }

    /** Short description for the broker log: kind, group, epoch and hash, never the partitions. */
    public String describe() {
        return (kind == PlanKind.CONSUMER ? "" : kind.wire() + " ") + "plan for group '" + group + "' epoch " + epoch
            + (planHash.isEmpty() ? "" : " hash " + planHash);
    }
}
