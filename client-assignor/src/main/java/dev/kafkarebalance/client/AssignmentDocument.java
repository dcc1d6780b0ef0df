package dev.kafkarebalance.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SortedMap;

/**
 * The per-pod assignment document ({@code assignment.json} in ConfigMap {@code <policy>.<pod>}),
 * decoded as strictly as the Python wire module ({@code kafka_rebalance_common.wire.document})
 * decodes it: versions 1 and 2, a wrong field refused naming it, unknown keys ignored. It does not
 * judge whether the document is meant for its reader: that is {@link DocumentTracker}'s job.
 *
 * <p>{@code generatedAt} and {@code policyUid} are not part of the plan: two documents that differ
 * only there are {@link #samePlan the same plan}.
 */
public record AssignmentDocument(
    String group,
    String member,
    long epoch,
    SortedMap<String, List<Integer>> partitions,
    SortedMap<String, List<Integer>> revoking,
    String planHash,
    String generatedAt,
    String policyUid
) {
    public static final List<Integer> VERSIONS = List.of(1, 2);

    public AssignmentDocument {
        partitions = Partitions.normalise(partitions);
        revoking = Partitions.normalise(revoking);
        planHash = planHash == null ? "" : planHash;
        generatedAt = generatedAt == null ? "" : generatedAt;
        policyUid = policyUid == null ? "" : policyUid;
    }

    /** The same plan: everything but {@code generatedAt} and {@code policyUid} equal. */
    public boolean samePlan(AssignmentDocument other) {
        return other != null && group.equals(other.group) && member.equals(other.member)
            && epoch == other.epoch && partitions.equals(other.partitions)
            && revoking.equals(other.revoking) && planHash.equals(other.planHash);
    }

    /**
     * Written by the same incarnation of the policy, as far as both say: epochs of the two are
     * comparable. A document that does not say is taken as the same.
     */
    public boolean sameIncarnation(AssignmentDocument other) {
        return policyUid.isEmpty() || other.policyUid.isEmpty() || policyUid.equals(other.policyUid);
    }

    /** The number of (topic, partition) pairs this member should consume. */
    public int partitionCount() {
        return partitions.values().stream().mapToInt(List::size).sum();
    }

    private static String string(JsonNode raw, String name, boolean required) throws DocumentException {
        JsonNode value = raw.get(name);
        if (value == null) {
            if (required) {
                throw new DocumentException(name, "missing");
            }
            return "";
        }
        if (!value.isTextual()) {
            throw new DocumentException(name, "not a string (" + Partitions.typeName(value) + ")");
        }
        return value.textValue();
    }

    private static int version(JsonNode raw) throws DocumentException {
        JsonNode value = raw.get("version");
        if (value == null) {
            return 1;
        }
        if (!value.isIntegralNumber()) {
            throw new DocumentException("version", "not an integer (" + Partitions.typeName(value) + ")");
        }
        if (!value.canConvertToInt() || !VERSIONS.contains(value.intValue())) {
            throw new DocumentException("version", value.asText() + " is not one this reader knows (1, 2); "
                + "a newer operator wrote it: upgrade this reader");
        }
        return value.intValue();
    }

    /** An {@code assignment.json} of any known version; DocumentException naming the field. */
    public static AssignmentDocument decode(String text) throws DocumentException {
        JsonNode raw;
        try {
            raw = Json.parse(text, DocumentException::new);
        } catch (DocumentException e) {
            throw e;
        } catch (WireException e) {
            throw new DocumentException(e.field(), e.problem());
        }
        if (!raw.isObject()) {
            throw new DocumentException("input", "not a JSON object (" + Partitions.typeName(raw) + ")");
        }
        int version = version(raw);
        String group = string(raw, "group", true);
        String member = string(raw, "member", true);
        JsonNode epochNode = raw.get("epoch");
        if (epochNode == null) {
            throw new DocumentException("epoch", "missing");
        }
        if (!epochNode.isIntegralNumber()) {
            throw new DocumentException("epoch", "not an integer");
        }
        if (epochNode.bigIntegerValue().signum() < 0) {
            throw new DocumentException("epoch", "negative (" + epochNode.asText() + ")");
        }
        if (!epochNode.canConvertToLong()) {
            throw new DocumentException("epoch", "beyond this reader's 64-bit range");
        }
        JsonNode partitionsNode = raw.get("partitions");
        if (partitionsNode == null) {
            throw new DocumentException("partitions", "missing");
        }
        SortedMap<String, List<Integer>> partitions = version == 1
            ? Partitions.decodeLists(partitionsNode, "partitions")
            : Partitions.decodeSets(partitionsNode, "partitions");
        JsonNode revokingNode = raw.get("revoking");
        SortedMap<String, List<Integer>> revoking = new java.util.TreeMap<>();
        if (revokingNode != null) {
            revoking = version == 1
                ? Partitions.decodeLists(revokingNode, "revoking")
                : Partitions.decodeSets(revokingNode, "revoking");
        }
        for (Map.Entry<String, List<Integer>> e : revoking.entrySet()) {
            List<Integer> granted = partitions.getOrDefault(e.getKey(), List.of());
            Integer both = e.getValue().stream().filter(granted::contains).min(Integer::compare).orElse(null);
            if (both != null) {
                throw new DocumentException("revoking." + e.getKey(), "partition " + both + " is also in partitions");
            }
        }
        return new AssignmentDocument(group, member, epochNode.longValue(), partitions, revoking,
            string(raw, "planHash", false), string(raw, "generatedAt", false), string(raw, "policyUid", false));
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof AssignmentDocument other && samePlan(other) && policyUid.equals(other.policyUid)
            && generatedAt.equals(other.generatedAt);
    }

    @Override
    public int hashCode() {
        return Objects.hash(group, member, epoch, partitions, revoking, planHash);
    }
}
