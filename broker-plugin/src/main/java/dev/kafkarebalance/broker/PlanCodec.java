package dev.kafkarebalance.broker;

import java.io.IOException;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.SortedSet;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Decodes a plan record value (the operator's broker-mode plan, docs/kip848.md):
 *
 * <pre>
 * {"version":1,"group":"orders","epoch":12,"planHash":"...","generatedAt":"2026-01-01T00:00:00Z",
 *  "members":{"orders-0":{"orders":[0,2]},"orders-1":{"orders":"1,3-5"}}}
 * </pre>
 *
 * Partitions per topic are written as the project's assignment document writes them: a list
 * (document version 1) or a range string such as {@code "0-99,150"} (version 2). Decoding is
 * strict and names the field: the plan is acted on, so a wrong field is refused, never guessed.
 * The record key must equal {@code group}: a plan published under another group's key is foreign.
 */
public final class PlanCodec {
    public static final int VERSION = 1;
    private static final ObjectMapper JSON = new ObjectMapper();

    private PlanCodec() {
    }

    public static PlanDocument decode(String key, byte[] value) throws PlanFormatException {
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
        if (version != null && (!version.isIntegralNumber() || version.asInt() != VERSION)) {
            throw new PlanFormatException("version: " + version + " is not " + VERSION
                + "; a newer operator wrote it: upgrade the broker plug-in");
        }
        String group = text(root, "group", true);
        if (!group.equals(key)) {
            throw new PlanFormatException("group: '" + group + "' published under key '" + key + "'");
        }
        JsonNode epoch = root.get("epoch");
        if (epoch == null || !epoch.isIntegralNumber() || epoch.asLong() < 0) {
            throw new PlanFormatException("epoch: missing or not a non-negative integer");
        }
        String hash = text(root, "planHash", false);
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
        Map<String, String> owners = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = members.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> member = it.next();
            String instance = member.getKey();
            if (instance.isEmpty()) {
                throw new PlanFormatException("members: an empty instance id");
            }
            if (!member.getValue().isObject()) {
                throw new PlanFormatException("members." + instance + ": not an object");
            }
            Map<String, SortedSet<Integer>> topics = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> t = member.getValue().fields(); t.hasNext(); ) {
                Map.Entry<String, JsonNode> topic = t.next();
                String field = "members." + instance + "." + topic.getKey();
                SortedSet<Integer> partitions = partitions(field, topic.getValue());
                for (int p : partitions) {
                    String previous = owners.put(topic.getKey() + "-" + p, instance);
                    if (previous != null) {
                        throw new PlanFormatException(field + ": partition " + p
                            + " is also planned for '" + previous + "'");
                    }
                }
                topics.put(topic.getKey(), partitions);
            }
            decoded.put(instance, topics);
        }
        return new PlanDocument(group, epoch.asLong(), hash, generatedAt, decoded);
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

    static SortedSet<Integer> partitions(String field, JsonNode node) throws PlanFormatException {
        SortedSet<Integer> out = new TreeSet<>();
        if (node.isArray()) {
            for (JsonNode item : node) {
                if (!item.isIntegralNumber() || !item.canConvertToInt() || item.asInt() < 0) {
                    throw new PlanFormatException(field + ": " + item + " is not a partition number");
                }
                out.add(item.asInt());
            }
            return out;
        }
        if (!node.isTextual()) {
            throw new PlanFormatException(field + ": neither a list nor a range string");
        }
        String text = node.asText().trim();
        if (text.isEmpty()) {
            return out;
        }
        for (String part : text.split(",")) {
            String[] bounds = part.trim().split("-", -1);
            try {
                int low = Integer.parseInt(bounds[0].trim());
                int high = bounds.length == 2 ? Integer.parseInt(bounds[1].trim()) : low;
                if (bounds.length > 2 || low < 0 || high < low) {
                    throw new NumberFormatException();
                }
                for (int p = low; p <= high; p++) {
                    out.add(p);
                }
            } catch (NumberFormatException e) {
                throw new PlanFormatException(field + ": '" + part.trim() + "' is not a partition or range");
            }
        }
        return out;
    }

    private static String firstLine(String message) {
        if (message == null) {
            return "unreadable";
        }
        int newline = message.indexOf('\n');
        return newline < 0 ? message : message.substring(0, newline);
    }
}
