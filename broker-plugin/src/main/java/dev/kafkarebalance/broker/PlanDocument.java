package dev.kafkarebalance.broker;

import java.util.Map;
import java.util.SortedSet;

/**
 * A decoded plan record value, topics still by name. See {@link PlanCodec} for the wire form.
 *
 * @param members instance id -> topic name -> partitions
 */
public record PlanDocument(
    String group,
    long epoch,
    String planHash,
    long generatedAtMs,
    Map<String, Map<String, SortedSet<Integer>>> members
) {
    public PlanDocument {
        members = Map.copyOf(members);
    }
}
