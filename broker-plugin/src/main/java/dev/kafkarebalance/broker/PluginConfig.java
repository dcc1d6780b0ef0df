package dev.kafkarebalance.broker;

import java.util.HashMap;
import java.util.Map;

/**
 * The plug-in's broker configs. The coordinator hands a {@code Configurable} assignor the
 * broker's original properties, so these sit in server.properties next to
 * {@code group.consumer.assignors}:
 *
 * <ul>
 *   <li>{@value #BOOTSTRAP}: where the plan topic lives (usually this cluster's own listener);
 *       unset means no plans are read and every group gets the fallback;</li>
 *   <li>{@value #TOPIC}: the compacted plan topic (default {@value #DEFAULT_TOPIC});</li>
 *   <li>{@value #MAX_AGE}: plans older than this (by their generatedAt) are not followed
 *       (default 15 minutes; the operator republishes every plan well within it); 0 never ages
 *       a plan out;</li>
 *   <li>{@value #KEYS_FILE}: the file of shared keys plan records must be signed with
 *       ({@link PlanKeys}); unset, records are not authenticated and the broker log warns;</li>
 *   <li>{@value #MAX_RECORD_BYTES}, {@value #MAX_PARTITIONS}, {@value #MAX_PARTITIONS_PER_MEMBER},
 *       {@value #MAX_PARTITION}: the bounds of one plan record ({@link PlanBounds});</li>
 *   <li>{@value #MAX_GROUPS} and {@value #MAX_TOTAL_PARTITIONS}: the bounds of all plans held
 *       ({@link PlanStore}; defaults {@value #DEFAULT_MAX_GROUPS} groups and
 *       {@value #DEFAULT_MAX_TOTAL_PARTITIONS} planned partitions: about 48 bytes each on the heap,
 *       boxed partition number, set slot and map share, so under 50 MiB of a 256 MiB heap);</li>
 *   <li>{@value #CLIENT_PREFIX}{@code *}: passed, without the prefix, to the reader's consumer and
 *       admin client (security.protocol, sasl.*, ssl.*).</li>
 * </ul>
 */
public record PluginConfig(
    String bootstrapServers,
    String topic,
    long maxAgeMs,
    PlanBounds bounds,
    int maxGroups,
    long maxTotalPartitions,
    String keysFile,
    Map<String, Object> client
) {
    public static final String PREFIX = "kafka.rebalance.plans.";
    public static final String BOOTSTRAP = PREFIX + "bootstrap.servers";
    public static final String TOPIC = PREFIX + "topic";
    public static final String MAX_AGE = PREFIX + "max.age.ms";
    public static final String KEYS_FILE = PREFIX + "keys.file";
    public static final String MAX_RECORD_BYTES = PREFIX + "max.record.bytes";
    public static final String MAX_PARTITIONS = PREFIX + "max.partitions";
    public static final String MAX_PARTITIONS_PER_MEMBER = PREFIX + "max.partitions.per.member";
    public static final String MAX_PARTITION = PREFIX + "max.partition";
    public static final String MAX_GROUPS = PREFIX + "max.groups";
    public static final String MAX_TOTAL_PARTITIONS = PREFIX + "max.total.partitions";
    public static final String CLIENT_PREFIX = PREFIX + "client.";
    public static final int DEFAULT_MAX_GROUPS = 10_000;
    public static final long DEFAULT_MAX_TOTAL_PARTITIONS = 1_000_000;
    public static final String DEFAULT_TOPIC = "kafka-rebalance-plans";
    public static final long DEFAULT_MAX_AGE_MS = 15 * 60 * 1000;

    public static PluginConfig from(Map<String, ?> configs) {
        Map<String, Object> client = new HashMap<>();
        configs.forEach((key, value) -> {
            if (key.startsWith(CLIENT_PREFIX) && value != null) {
                client.put(key.substring(CLIENT_PREFIX.length()), value);
            }
        });
        Object bootstrap = configs.get(BOOTSTRAP);
        Object topic = configs.get(TOPIC);
        Object keys = configs.get(KEYS_FILE);
        PlanBounds bounds = new PlanBounds(
            (int) number(configs, MAX_RECORD_BYTES, PlanBounds.DEFAULT_MAX_RECORD_BYTES, Integer.MAX_VALUE),
            (int) number(configs, MAX_PARTITIONS, PlanBounds.DEFAULT_MAX_PARTITIONS, Integer.MAX_VALUE),
            (int) number(configs, MAX_PARTITIONS_PER_MEMBER, PlanBounds.DEFAULT_MAX_PARTITIONS_PER_MEMBER,
                Integer.MAX_VALUE),
            (int) number(configs, MAX_PARTITION, PlanBounds.DEFAULT_MAX_PARTITION, Integer.MAX_VALUE));
        return new PluginConfig(
            bootstrap == null ? "" : bootstrap.toString().trim(),
            topic == null || topic.toString().isBlank() ? DEFAULT_TOPIC : topic.toString().trim(),
            number(configs, MAX_AGE, DEFAULT_MAX_AGE_MS, Long.MAX_VALUE),
            bounds,
            (int) positive(configs, MAX_GROUPS, DEFAULT_MAX_GROUPS, Integer.MAX_VALUE),
            positive(configs, MAX_TOTAL_PARTITIONS, DEFAULT_MAX_TOTAL_PARTITIONS, Long.MAX_VALUE),
            keys == null ? "" : keys.toString().trim(),
            Map.copyOf(client)
        );
    }

    /** A whole number config from 1, or its default when unset. */
    static long positive(Map<String, ?> configs, String name, long fallback, long max) {
        long value = number(configs, name, fallback, max);
        if (value < 1) {
            throw new IllegalArgumentException(name + ": '" + value + "' is not a whole number from 1 to " + max);
        }
        return value;
    }

    /** A non-negative whole number config, or its default when unset. */
    static long number(Map<String, ?> configs, String name, long fallback, long max) {
        Object value = configs.get(name);
        if (value == null || value.toString().isBlank()) {
            return fallback;
        }
        try {
            long parsed = Long.parseLong(value.toString().trim());
            if (parsed < 0 || parsed > max) {
                throw new NumberFormatException();
            }
            return parsed;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + ": '" + value + "' is not a whole number from 0 to " + max);
        }
    }
}
