package dev.kafkarebalance.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Partition sets per topic, as the assignment document carries them (the Python wire module's
 * {@code partitions}): version 1 as JSON lists of numbers, version 2 as one string per topic,
 * either ranges ({@code "0-99,150"}, ascending) or {@code "bits:"} + base64 of a bitmap (bit
 * {@code p % 8}, least significant first, of byte {@code p / 8}). Decoding checks what it expands:
 * partition numbers are Kafka's int32 and one field expands to at most {@link #MAX_PARTITIONS}.
 */
final class Partitions {
    static final long MAX_PARTITION = Integer.MAX_VALUE;
    static final int MAX_PARTITIONS = 1 << 21;
    static final String BITMAP_PREFIX = "bits:";

    private Partitions() {
    }

    /** Topics in order, partitions ascending and unique, empty topics dropped, unmodifiable. */
    static SortedMap<String, List<Integer>> normalise(Map<String, ? extends Iterable<Integer>> raw) {
        TreeMap<String, List<Integer>> result = new TreeMap<>();
        if (raw != null) {
            for (Map.Entry<String, ? extends Iterable<Integer>> e : raw.entrySet()) {
                TreeSet<Integer> set = new TreeSet<>();
                e.getValue().forEach(set::add);
                if (!set.isEmpty()) {
                    result.put(e.getKey(), List.copyOf(set));
                }
            }
        }
        return Collections.unmodifiableSortedMap(result);
    }

    /** The Python type name of a JSON value, for messages worded as the Python end words them. */
    static String typeName(JsonNode value) {
        if (value.isObject()) {
            return "dict";
        }
        if (value.isArray()) {
            return "list";
        }
        if (value.isTextual()) {
            return "str";
        }
        if (value.isBoolean()) {
            return "bool";
        }
        if (value.isIntegralNumber()) {
            return "int";
        }
        if (value.isNumber()) {
            return "float";
        }
        return "NoneType";
    }

    /** Version 1: {@code {"topic": [2, 0]}}; non-negative integers, none twice. */
    static SortedMap<String, List<Integer>> decodeLists(JsonNode value, String path) throws DocumentException {
        if (!value.isObject()) {
            throw new DocumentException(path, "not an object (" + typeName(value) + ")");
        }
        TreeMap<String, List<Integer>> result = new TreeMap<>();
        for (String topic : sortedFields(value)) {
            JsonNode parts = value.get(topic);
            String where = path + "." + topic;
            if (!parts.isArray()) {
                throw new DocumentException(where, "not a list (" + typeName(parts) + ")");
            }
            TreeSet<Integer> unique = new TreeSet<>();
            int index = 0;
            for (Iterator<JsonNode> it = parts.elements(); it.hasNext(); index++) {
                JsonNode p = it.next();
                if (!p.isIntegralNumber()) {
                    throw new DocumentException(where + "[" + index + "]", "not an integer");
                }
                if (p.bigIntegerValue().signum() < 0) {
                    throw new DocumentException(where + "[" + index + "]", "negative partition " + p.asText());
                }
                if (!p.canConvertToInt()) {
                    throw new DocumentException(where + "[" + index + "]",
                        "partition " + p.asText() + " is beyond Kafka's int32 range");
                }
                unique.add(p.intValue());
            }
            if (unique.size() != parts.size()) {
                throw new DocumentException(where, "a partition is listed twice");
            }
            if (!unique.isEmpty()) {
                result.put(topic, List.copyOf(unique));
            }
        }
        return result;
    }

    /** Version 2: {@code {"topic": "0-99,150"}} or {@code {"topic": "bits:..."}}. */
    static SortedMap<String, List<Integer>> decodeSets(JsonNode value, String path) throws DocumentException {
        if (!value.isObject()) {
            throw new DocumentException(path, "not an object (" + typeName(value) + ")");
        }
        TreeMap<String, List<Integer>> result = new TreeMap<>();
        int budget = MAX_PARTITIONS;
        for (String topic : sortedFields(value)) {
            List<Integer> parts = decodeSet(value.get(topic), path + "." + topic, budget);
            budget -= parts.size();
            result.put(topic, parts);
        }
        return result;
    }

    static List<String> sortedFields(JsonNode object) {
        List<String> names = new ArrayList<>();
        object.fieldNames().forEachRemaining(names::add);
        Collections.sort(names);
        return names;
    }

    private static List<Integer> decodeSet(JsonNode node, String where, int budget) throws DocumentException {
        if (!node.isTextual()) {
            throw new DocumentException(where, "not a string of ranges or bits (" + typeName(node) + ")");
        }
        String text = node.textValue();
        if (text.isEmpty()) {
            throw new DocumentException(where, "empty (a topic without partitions is left out)");
        }
        if (text.startsWith(BITMAP_PREFIX)) {
            return decodeBitmap(text, where, budget);
        }
        return decodeRanges(text, where, budget);
    }

    private static long number(String text, String where, String item) throws DocumentException {
        boolean digits = !text.isEmpty() && text.chars().allMatch(c -> c >= '0' && c <= '9');
        if (!digits || (text.length() > 1 && text.charAt(0) == '0')) {
            throw new DocumentException(where, "'" + item + "' is not a partition number or range");
        }
        if (text.length() > 10 || Long.parseLong(text) > MAX_PARTITION) {
            throw new DocumentException(where, "partition " + text + " is beyond Kafka's int32 range");
        }
        return Long.parseLong(text);
    }

    private static List<Integer> decodeRanges(String text, String where, int budget) throws DocumentException {
        List<Integer> result = new ArrayList<>();
        long previous = -1;
        for (String item : text.split(",", -1)) {
            int dash = item.indexOf('-');
            long low = number(dash < 0 ? item : item.substring(0, dash), where, item);
            long high = dash < 0 ? low : number(item.substring(dash + 1), where, item);
            if (high < low) {
                throw new DocumentException(where, "range '" + item + "' runs backwards");
            }
            if (low <= previous) {
                throw new DocumentException(where, "'" + item + "' is not above the partition before it");
            }
            if (result.size() + high - low + 1 > budget) {
                throw new DocumentException(where, "more than " + MAX_PARTITIONS + " partitions");
            }
            for (long p = low; p <= high; p++) {
                result.add((int) p);
            }
            previous = high;
        }
        return result;
    }

    private static List<Integer> decodeBitmap(String text, String where, int budget) throws DocumentException {
        byte[] bitmap;
        try {
            bitmap = Base64.getDecoder().decode(text.substring(BITMAP_PREFIX.length()));
        } catch (IllegalArgumentException e) {
            throw new DocumentException(where, "the bitmap is not base64");
        }
        if ((long) bitmap.length * 8 > MAX_PARTITION + 1) {
            throw new DocumentException(where, "the bitmap reaches beyond Kafka's int32 partition range");
        }
        long count = 0;
        for (byte b : bitmap) {
            count += Integer.bitCount(b & 0xff);
        }
        if (count > budget) {
            throw new DocumentException(where, "more than " + MAX_PARTITIONS + " partitions");
        }
        List<Integer> result = new ArrayList<>((int) count);
        for (int index = 0; index < bitmap.length; index++) {
            int b = bitmap[index] & 0xff;
            for (int bit = 0; bit < 8; bit++) {
                if ((b >> bit & 1) != 0) {
                    result.add(index * 8 + bit);
                }
            }
        }
        if (result.isEmpty()) {
            throw new DocumentException(where, "the bitmap has no partition in it");
        }
        return result;
    }
}
