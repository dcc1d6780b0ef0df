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
 */
public record PlanDocument(
    PlanKind kind,
    String group,
    String incarnation,
    long epoch,
    String planHash,
    long generatedAtMs,
    Set<String> memberIds,
    Map<String, Map<String, SortedSet<Integer>>> members
) {
    public PlanDocument {
        memberIds = Set.copyOf(memberIds);
        members = Map.copyOf(members);
    }
}
