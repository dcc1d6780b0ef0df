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
 * @param group       the consumer group the plan is for (the record key it was published under)
 * @param incarnation the uid of the policy that published it ("" if not given): epochs are
 *                    ordered within one incarnation only
 * @param epoch       the operator's plan epoch
 * @param planHash    the operator's hash of the plan, for logs
 * @param generatedAtMs when the operator wrote it (epoch millis), 0 if not given
 * @param memberIds   the group's KIP-848 member ids when the operator planned (may be empty):
 *                    what ties the plan to its own group ({@link PlanStore#select})
 * @param members     instance id -> topic id -> partitions
 * @param unresolved  topic names the plan uses that the cluster does not know (yet)
 */
public record Plan(
    String group,
    String incarnation,
    long epoch,
    String planHash,
    long generatedAtMs,
    Set<String> memberIds,
    Map<String, Map<Uuid, Set<Integer>>> members,
    Set<String> unresolved
) {
    public Plan {
        memberIds = Set.copyOf(memberIds);
        members = Map.copyOf(members);
        unresolved = Set.copyOf(unresolved);
    }

    /** A plan with no incarnation and no member ids (tests, version-1 records). */
    public Plan(String group, long epoch, String planHash, long generatedAtMs,
                Map<String, Map<Uuid, Set<Integer>>> members, Set<String> unresolved) {
        this(group, "", epoch, planHash, generatedAtMs, Set.of(), members, unresolved);
    }

    /** Short description for the broker log: group, epoch and hash, never the partitions. */
    public String describe() {
        return "plan for group '" + group + "' epoch " + epoch
            + (planHash.isEmpty() ? "" : " hash " + planHash);
    }
}
