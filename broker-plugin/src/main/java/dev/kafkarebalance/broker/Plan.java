package dev.kafkarebalance.broker;

import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.Uuid;

/**
 * One group's plan, as the operator published it, with its topic names resolved to the topic ids
 * the coordinator speaks ({@code GroupSpec} knows topics only by id).
 *
 * <p>Invariant: no (topic, partition) appears under two instance ids (the codec refuses such a
 * document), so following the plan never assigns a partition twice.
 *
 * @param group      the consumer group the plan is for (the record key it was published under)
 * @param epoch      the operator's plan epoch, for logs and for matching ConsumerGroupDescribe
 * @param planHash   the operator's hash of the plan, for logs
 * @param generatedAtMs when the operator wrote it (epoch millis), 0 if not given
 * @param members    instance id -> topic id -> partitions
 * @param unresolved topic names the plan uses that the cluster does not know (yet)
 */
public record Plan(
    String group,
    long epoch,
    String planHash,
    long generatedAtMs,
    Map<String, Map<Uuid, Set<Integer>>> members,
    Set<String> unresolved
) {
    public Plan {
        members = Map.copyOf(members);
        unresolved = Set.copyOf(unresolved);
    }

    /** Short description for the broker log: group, epoch and hash, never the partitions. */
    public String describe() {
        return "plan for group '" + group + "' epoch " + epoch
            + (planHash.isEmpty() ? "" : " hash " + planHash);
    }
}
