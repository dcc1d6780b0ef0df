package dev.kafkarebalance.broker;

import java.util.Map;
import java.util.Set;
import java.util.SortedSet;

/**
 * A decoded plan record value, topics still by name. See {@link PlanCodec} for the wire form and
 * {@link Plan} for the fields.
 *
 * @param members instance id -> topic name -> partitions
 */
public record PlanDocument(
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
