package dev.kafkarebalance.broker;

import java.util.Map;
import java.util.Set;
import java.util.SortedSet;

/**
 * A decoded plan record value, topics still by name. See {@link PlanCodec} for the wire form and
 * {@link Plan} for the fields.
 *
 * @param kind    which assignor the plan is for
 * @param members for {@link PlanKind#CONSUMER}: instance id -> topic name -> partitions; for
 *                {@link PlanKind#STREAMS}: streams member id -> subtopology id -> partitions
 *                (its active tasks)
 * @param standbys {@link PlanKind#STREAMS} only: streams member id -> subtopology id -> partitions
 *                of the standby tasks the plan places; null when the record has no
 *                {@code standbys} (the plug-in then places standbys itself)
 */
public record PlanDocument(
    PlanKind kind,
    String group,
    String incarnation,
    long epoch,
    String planHash,
    long generatedAtMs,
    Set<String> memberIds,
    Map<String, Map<String, SortedSet<Integer>>> members,
    Map<String, Map<String, SortedSet<Integer>>> standbys
) {
    public PlanDocument {
        memberIds = Set.copyOf(memberIds);
        members = Map.copyOf(members);
        standbys = standbys == null ? null : Map.copyOf(standbys);
    }

    /** A document without planned standbys. */
    public PlanDocument(PlanKind kind, String group, String incarnation, long epoch, String planHash,
                        long generatedAtMs, Set<String> memberIds, Map<String, Map<String, SortedSet<Integer>>> members) {
        this(kind, group, incarnation, epoch, planHash, generatedAtMs, memberIds, members, null);
    }
}
