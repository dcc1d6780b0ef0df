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
 *   <li>{@value #MAX_AGE}: plans older than this (by their generatedAt) are not followed;
 *       0 (default) never ages a plan out;</li>
 *   <li>{@value #CLIENT_PREFIX}{@code *}: passed, without the prefix, to the reader's consumer and
 *       admin client (security.protocol, sasl.*, ssl.*).</li>
 * </ul>
 */
public record PluginConfig(String bootstrapServers, String topic, long maxAgeMs, Map<String, Object> client) {
    public static final String PREFIX = "kafka.rebalance.plans.";
    public static final String BOOTSTRAP = PREFIX + "bootstrap.servers";
    public static final String TOPIC = PREFIX + "topic";
    public static final String MAX_AGE = PREFIX + "max.age.ms";
    public static final String CLIENT_PREFIX = PREFIX + "client.";
    public static final String DEFAULT_TOPIC = "kafka-rebalance-plans";

    public static PluginConfig from(Map<String, ?> configs) {
        Map<String, Object> client = new HashMap<>();
        configs.forEach((key, value) -> {
            if (key.startsWith(CLIENT_PREFIX) && value != null) {
                client.put(key.substring(CLIENT_PREFIX.length()), value);
            }
        });
        Object bootstrap = configs.get(BOOTSTRAP);
        Object topic = configs.get(TOPIC);
        Object maxAge = configs.get(MAX_AGE);
        long age;
        try {
            age = maxAge == null ? 0 : Long.parseLong(maxAge.toString().trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(MAX_AGE + ": '" + maxAge + "' is not a number of milliseconds");
        }
        return new PluginConfig(
            bootstrap == null ? "" : bootstrap.toString().trim(),
            topic == null || topic.toString().isBlank() ? DEFAULT_TOPIC : topic.toString().trim(),
            age,
            Map.copyOf(client)
        );
    }
}
