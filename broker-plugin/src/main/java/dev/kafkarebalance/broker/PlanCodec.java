package dev.kafkarebalance.broker;

import java.io.IOException;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.Base64;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Decodes a plan record value (the operator's broker-mode plan, docs/kip848.md):
 *
 * <pre>
 * {"version":2,"group":"orders","incarnation":"<policy uid>","epoch":12,"planHash":"...",
 *  "generatedAt":"2026-01-01T00:00:00Z","memberIds":["<KIP-848 member id>",...],
 *  "members":{"orders-0":{"orders":"0-2,7"},"orders-1":{"orders":"bits:..."}}}
 * </pre>
 *
 * Partitions per topic are written as the project's assignment document writes them
 * (kafka_rebalance_common.wire.partitions): a JSON list of numbers, a range string such as
 * {@code "0-99,150"} (ascending, no overlaps), or {@code "bits:"} + base64 of a bitmap (bit
 * {@code p % 8} of byte {@code p / 8}). Version 1 records (lists or ranges) still decode.
 *
 * <p>{@code "kind"} says which assignor the plan is for ({@link PlanKind}): absent or
 * {@code "consumer"}, the form above; {@code "streams"}, a streams group's active tasks, keyed by
 * streams member id and then by subtopology id, the partitions written the same way:
 * <pre>
 * {"version":2,"kind":"streams","group":"wordcount",...,"memberIds":["<streams member id>",...],
 *  "members":{"<streams member id>":{"0":"0-2,7","1":[3]}}}
 * </pre>
 * The same bounds apply (a task counts as a partition), and no task may be planned twice.
 * A streams record may also carry {@code "standbys"}, the planned standby tasks in the same form
 * ({@code {"<member id>":{"1":"0,3"}}}); a task may be a standby of several members. Without it
 * the task assignor places standbys itself; on any other kind it is refused.
 *
 * <p>{@code "share"}: a share group's plan (KIP-932), keyed by share member id and then by topic
 * name like a consumer plan; the one difference is that a partition may be planned for several
 * members (each planned occurrence counts against the bounds).
 *
 * <p>Decoding is strict and names the field: the plan is acted on, so a wrong field is refused,
 * never guessed. It is also bounded ({@link PlanBounds}): the record's size is checked before it
 * is parsed, and every range, list and bitmap is measured against the per-member and per-record
 * partition budgets and the highest partition number before anything is expanded, so no record
 * text can make the decoder allocate more than the bounds allow. The record key must equal
 * {@code group}: a plan published under another group's key is foreign.
 */
public final class PlanCodec {
    public static final int VERSION = 2;
    public static final String BITMAP_PREFIX = "bits:";
    private static final ObjectMapper JSON = new ObjectMapper();

    private PlanCodec() {
    }

    public static PlanDocument decode(String key, byte[] value) throws PlanFormatException {
        return decode(key, value, PlanBounds.DEFAULT);
    }

    public static PlanDocument decode(String key, byte[] value, PlanBounds bounds) throws PlanFormatException {
        if (value.length > bounds.maxRecordBytes()) {
            throw new PlanFormatException("the record is " + value.length + " bytes, over the bound of "
                + bounds.maxRecordBytes() + " (" + PluginConfig.MAX_RECORD_BYTES + ")");
        }
        JsonNode root;
        try {
            root = JSON.readTree(value);
        } catch (IOException e) {
            throw new PlanFormatException("not JSON: " + firstLine(e.getMessage()));
        }
        if (root == null || !root.isObject()) {
            throw new PlanFormatException("not a JSON object");
        }
        JsonNode version = root.get("version");
        if (version != null && (!version.isIntegralNumber() || version.asInt() < 1 || version.asInt() > VERSION)) {
            throw new PlanFormatException("version: " + version + " is not 1.." + VERSION
                + "; a newer operator wrote it: upgrade the broker plug-in");
        }
        String kindName = text(root, "kind", false);
        PlanKind kind = root.get("kind") == null ? PlanKind.CONSUMER : PlanKind.fromWire(kindName);
        if (kind == null) {
            throw new PlanFormatException("kind: '" + kindName + "' is not consumer, streams or share; a newer operator "
                + "wrote it: upgrade the broker plug-in");
        }
        String group = text(root, "group", true);
        if (!group.equals(key)) {
            throw new PlanFormatException("group: '" + group + "' published under key '" + key + "'");
        }
        JsonNode epoch = root.get("epoch");
        if (epoch == null || !epoch.isIntegralNumber() || !epoch.canConvertToLong() || epoch.asLong() < 0) {
            throw new PlanFormatException("epoch: missing or not a non-negative integer");
        }
        String hash = text(root, "planHash", false);
        String incarnation = text(root, "incarnation", false);
        Set<String> memberIds = new HashSet<>();
        JsonNode ids = root.get("memberIds");
        if (ids != null) {
            if (!ids.isArray()) {
                throw new PlanFormatException("memberIds: not a list");
            }
            for (JsonNode id : ids) {
                if (!id.isTextual() || id.asText().isEmpty()) {
                    throw new PlanFormatException("memberIds: " + id + " is not a member id");
                }
                memberIds.add(id.asText());
            }
        }
        long generatedAt = 0;
        String generated = text(root, "generatedAt", false);
        if (!generated.isEmpty()) {
            try {
                generatedAt = Instant.parse(generated).toEpochMilli();
            } catch (DateTimeParseException e) {
                throw new PlanFormatException("generatedAt: '" + generated + "' is not an ISO-8601 instant");
            }
        }
        JsonNode members = root.get("members");
        if (members == null || !members.isObject()) {
            throw new PlanFormatException("members: missing or not an object");
        }
        Map<String, Map<String, SortedSet<Integer>>> decoded = new HashMap<>();
        Map<String, BitSet> taken = new HashMap<>();  // topic -> partitions planned so far
        Map<String, Map<Integer, String>> firstOwner = new HashMap<>();
        Budget record = new Budget(bounds.maxPartitions(), PluginConfig.MAX_PARTITIONS, "the record");
        for (Iterator<Map.Entry<String, JsonNode>> it = members.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> member = it.next();
            String instance = member.getKey();
            if (instance.isEmpty()) {
                throw new PlanFormatException("members: an empty instance id");
            }
            if (!member.getValue().isObject()) {
                throw new PlanFormatException("members." + instance + ": not an object");
            }
            Budget own = new Budget(bounds.maxPartitionsPerMember(), PluginConfig.MAX_PARTITIONS_PER_MEMBER,
                "member '" + instance + "'");
            Map<String, SortedSet<Integer>> topics = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> t = member.getValue().fields(); t.hasNext(); ) {
                Map.Entry<String, JsonNode> topic = t.next();
                String field = "members." + instance + "." + topic.getKey();
                if (kind == PlanKind.STREAMS && topic.getKey().isEmpty()) {
                    throw new PlanFormatException("members." + instance + ": an empty subtopology id");
                }
                SortedSet<Integer> partitions = partitions(field, topic.getValue(), bounds, own, record);
                BitSet seen = taken.computeIfAbsent(topic.getKey(), k -> new BitSet());
                for (int p : kind == PlanKind.SHARE ? Set.<Integer>of() : partitions) {
                    if (seen.get(p)) {
                        throw new PlanFormatException(field + ": partition " + p + " is also planned for '"
                            + owner(decoded, topic.getKey(), p) + "'");
                    }
                    seen.set(p);
                }
                topics.put(topic.getKey(), partitions);
            }
            decoded.put(instance, topics);
        }
        Map<String, Map<String, SortedSet<Integer>>> standbys = standbys(root.get("standbys"), kind, bounds, record);
        return new PlanDocument(kind, group, incarnation, epoch.asLong(), hash, generatedAt, memberIds, decoded,
            standbys);
    }

    /**
     * The planned standbys of a streams record (null when the record has none): member id ->
     * subtopology id -> partitions, written as {@code members} writes them. A task may be a
     * standby of several members (one per replica); each occurrence counts against the bounds.
     */
    private static Map<String, Map<String, SortedSet<Integer>>> standbys(
        JsonNode node, PlanKind kind, PlanBounds bounds, Budget record
    ) throws PlanFormatException {
        if (node == null) {
            return null;
        }
        if (kind != PlanKind.STREAMS) {
            throw new PlanFormatException("standbys: only a streams plan has standbys, this is a " + kind.wire()
                + " plan");
        }
        if (!node.isObject()) {
            throw new PlanFormatException("standbys: not an object");
        }
        Map<String, Map<String, SortedSet<Integer>>> out = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> member = it.next();
            String field = "standbys." + member.getKey();
            if (member.getKey().isEmpty()) {
                throw new PlanFormatException("standbys: an empty member id");
            }
            if (!member.getValue().isObject()) {
                throw new PlanFormatException(field + ": not an object");
            }
            Budget own = new Budget(bounds.maxPartitionsPerMember(), PluginConfig.MAX_PARTITIONS_PER_MEMBER,
                "member '" + member.getKey() + "'");
            Map<String, SortedSet<Integer>> tasks = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> t = member.getValue().fields(); t.hasNext(); ) {
                Map.Entry<String, JsonNode> subtopology = t.next();
                if (subtopology.getKey().isEmpty()) {
                    throw new PlanFormatException(field + ": an empty subtopology id");
                }
                tasks.put(subtopology.getKey(),
                    partitions(field + "." + subtopology.getKey(), subtopology.getValue(), bounds, own, record));
            }
            out.put(member.getKey(), tasks);
        }
        return out;
    }

    /** The member a partition was planned for first (only looked up to name it in an error). */
    private static String owner(Map<String, Map<String, SortedSet<Integer>>> decoded, String topic, int partition) {
        for (Map.Entry<String, Map<String, SortedSet<Integer>>> e : decoded.entrySet()) {
            SortedSet<Integer> parts = e.getValue().get(topic);
            if (parts != null && parts.contains(partition)) {
                return e.getKey();
            }
        }
        return "?";
    }

    private static String text(JsonNode root, String name, boolean required) throws PlanFormatException {
        JsonNode node = root.get(name);
        if (node == null) {
            if (required) {
                throw new PlanFormatException(name + ": missing");
            }
            return "";
        }
        if (!node.isTextual()) {
            throw new PlanFormatException(name + ": not a string");
        }
        return node.asText();
    }

    /** A count of partitions that refuses, naming its bound, before it is exceeded. */
    private static final class Budget {
        private final int limit;
        private final String config;
        private final String what;
        private long used;

        Budget(int limit, String config, String what) {
            this.limit = limit;
            this.config = config;
            this.what = what;
        }

        void take(String field, long count) throws PlanFormatException {
            if (used + count > limit) {
                throw new PlanFormatException(field + ": " + what + " would hold more than " + limit
                    + " partitions (" + config + ")");
            }
            used += count;
        }
    }

    private static SortedSet<Integer> partitions(
        String field, JsonNode node, PlanBounds bounds, Budget member, Budget record
    ) throws PlanFormatException {
        SortedSet<Integer> out = new TreeSet<>();
        if (node.isArray()) {
            member.take(field, node.size());
            record.take(field, node.size());
            for (JsonNode item : node) {
                if (!item.isIntegralNumber() || !item.canConvertToInt() || item.asInt() < 0) {
                    throw new PlanFormatException(field + ": " + item + " is not a partition number");
                }
                checkPartition(field, item.asInt(), bounds);
                if (!out.add(item.asInt())) {
                    throw new PlanFormatException(field + ": partition " + item.asInt() + " is listed twice");
                }
            }
            return out;
        }
        if (!node.isTextual()) {
            throw new PlanFormatException(field + ": neither a list nor a range or bitmap string");
        }
        String text = node.asText().trim();
        if (text.isEmpty()) {
            return out;
        }
        if (text.startsWith(BITMAP_PREFIX)) {
            return bitmap(field, text.substring(BITMAP_PREFIX.length()), bounds, member, record);
        }
        int previous = -1;
        for (String part : text.split(",", -1)) {
            String item = part.trim();
            int dash = item.indexOf('-');
            int low = number(field, dash < 0 ? item : item.substring(0, dash), item);
            int high = dash < 0 ? low : number(field, item.substring(dash + 1), item);
            if (high < low) {
                throw new PlanFormatException(field + ": range '" + item + "' runs backwards");
            }
            if (low <= previous) {
                throw new PlanFormatException(field + ": '" + item + "' is not above the partition before it");
            }
            checkPartition(field, high, bounds);
            long width = (long) high - low + 1;
            member.take(field, width);
            record.take(field, width);
            for (int p = low; p <= high; p++) {
                out.add(p);
            }
            previous = high;
        }
        return out;
    }

    private static SortedSet<Integer> bitmap(
        String field, String base64, PlanBounds bounds, Budget member, Budget record
    ) throws PlanFormatException {
        long maxBytes = bounds.maxPartition() / 8 + 1;
        if ((long) base64.length() / 4 * 3 > maxBytes + 2) {
            throw new PlanFormatException(field + ": the bitmap reaches beyond partition " + bounds.maxPartition()
                + " (" + PluginConfig.MAX_PARTITION + ")");
        }
        byte[] bytes;
        try {
            bytes = Base64.getDecoder().decode(base64);
        } catch (IllegalArgumentException e) {
            throw new PlanFormatException(field + ": the bitmap is not base64");
        }
        BitSet bits = BitSet.valueOf(bytes);
        if (bits.isEmpty()) {
            throw new PlanFormatException(field + ": the bitmap has no partition in it");
        }
        checkPartition(field, bits.length() - 1, bounds);
        member.take(field, bits.cardinality());
        record.take(field, bits.cardinality());
        SortedSet<Integer> out = new TreeSet<>();
        bits.stream().forEach(out::add);
        return out;
    }

    private static void checkPartition(String field, long partition, PlanBounds bounds) throws PlanFormatException {
        if (partition > bounds.maxPartition()) {
            throw new PlanFormatException(field + ": partition " + partition + " is over the bound of "
                + bounds.maxPartition() + " (" + PluginConfig.MAX_PARTITION + ")");
        }
    }

    private static int number(String field, String text, String item) throws PlanFormatException {
        String digits = text.trim();
        if (digits.isEmpty() || digits.length() > 10 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new PlanFormatException(field + ": '" + item + "' is not a partition or range");
        }
        long value = Long.parseLong(digits);
        if (value > Integer.MAX_VALUE) {
            throw new PlanFormatException(field + ": partition " + value + " is beyond Kafka's int32 range");
        }
        return (int) value;
    }

    private static String firstLine(String message) {
        if (message == null) {
            return "unreadable";
        }
        int newline = message.indexOf('\n');
        return newline < 0 ? message : message.substring(0, newline);
    }
}
