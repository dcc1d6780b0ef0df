package dev.kafkarebalance.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * What the plan-following assignor ({@code kafka-rebalance-plan}) puts in the group protocol's
 * user_data fields: the same bytes as the Python wire module
 * ({@code kafka_rebalance_common.wire.user_data}), so Java members and Python sidecars can share
 * one group and either can lead it. Shared test vectors (tests/data/wire/user_data_vectors.json)
 * hold both ends to that.
 *
 * <ul>
 * <li>subscription user_data: the member's claim
 * {@code {"epoch":E,"partitions":{"t":[0,2]},"policy":U}} (its own document's plan; {@code policy}
 * is the document's {@code policyUid}, the policy incarnation the epoch counts in, left out when
 * the document names none), or empty when it has no document yet. A claim without {@code policy}
 * (a member of an older version) parses with policy "" (not said); older readers ignore the
 * key;</li>
 * <li>assignment user_data: {@code {"claimEpoch":C,"composedEpoch":E}}: E the highest claim
 * epoch the leader composed from (-1: none), C the epoch of this member's own claim as the leader
 * saw it (-1: none).</li>
 * </ul>
 *
 * <p>Text, not a binary encoding: the operator reads both fields back with describe_groups as
 * text. {@code parse*} throw naming the field; {@code decode*} never throw and return null, for
 * the assignor: user_data comes from other members (other versions, other assignors), and one odd
 * member must not break the leader's assignment.
 */
public final class UserData {
    public static final String ASSIGNOR_NAME = "kafka-rebalance-plan";
    public static final long NO_EPOCH = -1;

    private UserData() {
    }

    /**
     * A member's statement of what its own assignment document gives it; {@code policy} is the
     * incarnation (policy uid) its epoch counts in, "" when the claim does not say.
     */
    public record Claim(long epoch, SortedMap<String, List<Integer>> partitions, String policy) {
        public Claim {
            partitions = Partitions.normalise(partitions);
            policy = policy == null ? "" : policy;
        }

        /** A claim that names no incarnation. */
        public Claim(long epoch, SortedMap<String, List<Integer>> partitions) {
            this(epoch, partitions, "");
        }
    }

    /**
     * What the leader says about one member's assignment: the claim epoch it composed the round
     * from, and the epoch of that member's own claim (null: the leader did not say).
     */
    public record Composed(long composedEpoch, Long claimEpoch) {
    }

    /**
     * The subscription user_data for a member holding {@code document} (empty when none); it names
     * the document's incarnation when the document does.
     */
    public static byte[] encodeClaim(AssignmentDocument document) {
        if (document == null) {
            return new byte[0];
        }
        SortedMap<String, List<Integer>> partitions = document.partitions();
        String text = Json.write(out -> {
            out.writeStartObject();
            out.writeNumberField("epoch", document.epoch());
            out.writeObjectFieldStart("partitions");
            for (Map.Entry<String, List<Integer>> e : partitions.entrySet()) {
                out.writeArrayFieldStart(e.getKey());
                for (int p : e.getValue()) {
                    out.writeNumber(p);
                }
                out.writeEndArray();
            }
            out.writeEndObject();
            if (!document.policyUid().isEmpty()) {
                out.writeStringField("policy", document.policyUid());
            }
            out.writeEndObject();
        });
        return text.getBytes(StandardCharsets.US_ASCII);
    }

    /** The assignment user_data. */
    public static byte[] encodeComposed(long composedEpoch, long claimEpoch) {
        String text = Json.write(out -> {
            out.writeStartObject();
            out.writeNumberField("claimEpoch", claimEpoch);
            out.writeNumberField("composedEpoch", composedEpoch);
            out.writeEndObject();
        });
        return text.getBytes(StandardCharsets.US_ASCII);
    }

    private static JsonNode object(byte[] raw) throws UserDataException {
        if (raw == null) {
            throw new UserDataException("input", "absent");
        }
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException e) {
            throw new UserDataException("input", "not UTF-8");
        }
        JsonNode value;
        try {
            value = Json.parse(text, UserDataException::new);
        } catch (UserDataException e) {
            throw e;
        } catch (WireException e) {
            throw new UserDataException(e.field(), e.problem());
        }
        if (!value.isObject()) {
            throw new UserDataException("input", "not a JSON object (" + Partitions.typeName(value) + ")");
        }
        return value;
    }

    private static long epoch(JsonNode value, String name, long lowest) throws UserDataException {
        if (value == null || value.isNull()) {
            throw new UserDataException(name, "missing");
        }
        if (!value.isIntegralNumber() || !value.canConvertToLong()) {
            throw new UserDataException(name, "not an integer");
        }
        long number = value.asLong();
        if (number < lowest) {
            throw new UserDataException(name, "below " + lowest + " (" + number + ")");
        }
        return number;
    }

    /** A member's claim from its subscription user_data. */
    public static Claim parseClaim(byte[] raw) throws UserDataException {
        JsonNode value = object(raw);
        long epoch = epoch(value.get("epoch"), "epoch", 0);
        JsonNode partitions = value.get("partitions");
        if (partitions == null || partitions.isNull()) {
            throw new UserDataException("partitions", "missing");
        }
        if (!partitions.isObject()) {
            throw new UserDataException("partitions", "not an object");
        }
        SortedMap<String, List<Integer>> result = new TreeMap<>();
        List<String> topics = new ArrayList<>();
        partitions.fieldNames().forEachRemaining(topics::add);
        topics.sort(null);
        for (String topic : topics) {
            JsonNode parts = partitions.get(topic);
            if (!parts.isArray()) {
                throw new UserDataException("partitions." + topic, "not a list");
            }
            TreeSet<Integer> set = new TreeSet<>();
            int index = 0;
            for (Iterator<JsonNode> it = parts.elements(); it.hasNext(); index++) {
                long p = epoch(it.next(), "partitions." + topic + "[" + index + "]", 0);
                if (p > Integer.MAX_VALUE) {
                    throw new UserDataException("partitions." + topic + "[" + index + "]",
                        "beyond Kafka's int32 partition range (" + p + ")");
                }
                set.add((int) p);
            }
            if (!set.isEmpty()) {
                result.put(topic, new ArrayList<>(set));
            }
        }
        JsonNode policy = value.get("policy");
        if (policy != null && !policy.isTextual()) {
            throw new UserDataException("policy", "not a string (" + Partitions.typeName(policy) + ")");
        }
        return new Claim(epoch, result, policy == null ? "" : policy.textValue());
    }

    /** {@link #parseClaim}, or null for anything that is not a claim. */
    public static Claim decodeClaim(byte[] raw) {
        try {
            return parseClaim(raw);
        } catch (UserDataException e) {
            return null;
        }
    }

    /** An assignment's user_data; {@code claimEpoch} null when an older leader did not write it. */
    public static Composed parseComposed(byte[] raw) throws UserDataException {
        JsonNode value = object(raw);
        long composed = epoch(value.get("composedEpoch"), "composedEpoch", NO_EPOCH);
        JsonNode claim = value.get("claimEpoch");
        return new Composed(composed, claim == null || claim.isNull() ? null : epoch(claim, "claimEpoch", NO_EPOCH));
    }

    private static Long assignmentEpoch(byte[] raw, String name) {
        try {
            return epoch(object(raw).get(name), name, NO_EPOCH);
        } catch (UserDataException e) {
            return null;
        }
    }

    /** The composed epoch of an assignment's user_data (-1: from no claim); null if not ours. */
    public static Long decodeComposed(byte[] raw) {
        return assignmentEpoch(raw, "composedEpoch");
    }

    /** This member's claim epoch as the leader saw it (-1: no claim); null when not said. */
    public static Long decodeClaimEpoch(byte[] raw) {
        return assignmentEpoch(raw, "claimEpoch");
    }

    /** The bytes of a buffer without moving its position (null stays null). */
    static byte[] bytes(ByteBuffer buffer) {
        if (buffer == null) {
            return null;
        }
        ByteBuffer copy = buffer.duplicate();
        byte[] out = new byte[copy.remaining()];
        copy.get(out);
        return out;
    }
}
