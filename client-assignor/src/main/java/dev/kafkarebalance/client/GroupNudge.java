package dev.kafkarebalance.client;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Makes the group rebalance, so every member sends its current claim: a short-lived member that
 * subscribes to nothing joins and leaves (the operator's KIP-848 nudge does the same for broker
 * mode). A classic group rebalances only when a member joins, leaves or rejoins, and an assignor
 * has no handle on its consumer to ask for a rejoin ({@code enforceRebalance} must also be called
 * from the consumer's own thread), so a member whose document moved on cannot otherwise make the
 * new plan take effect. The nudge member subscribes to no topic, so it is given nothing and no
 * real member gains or loses a partition because of it; it uses this assignor (in its
 * {@code nudge} role), so it composes correctly should it ever be elected leader.
 *
 * <p>Costs one rebalance round to join and one to leave, both cooperative (members keep consuming).
 */
final class GroupNudge {
    private static final Logger LOG = LoggerFactory.getLogger(GroupNudge.class);
    /** The client's settings that must not carry over to the nudge member. */
    private static final List<String> DROPPED = List.of(
        "group.instance.id", "client.id", "interceptor.classes", "key.deserializer", "value.deserializer",
        "partition.assignment.strategy", "enable.auto.commit", "group.protocol", "group.remote.assignor",
        PlanFollowingAssignor.DOCUMENT_PATH, PlanFollowingAssignor.MEMBER);
    private static final Pattern NOTHING = Pattern.compile("(?!)");

    private GroupNudge() {
    }

    /** The nudge member's consumer settings, from the settings the real consumer was given. */
    static Map<String, Object> settings(Map<String, ?> original) {
        Map<String, Object> settings = new HashMap<>();
        original.forEach((k, v) -> {
            if (!DROPPED.contains(k) && v != null) {
                settings.put(k, v);
            }
        });
        Object client = original.get("client.id");
        settings.put("client.id", (client == null || client.toString().isEmpty() ? "consumer" : client) + "-rebalance-nudge");
        settings.put("key.deserializer", ByteArrayDeserializer.class.getName());
        settings.put("value.deserializer", ByteArrayDeserializer.class.getName());
        settings.put("enable.auto.commit", "false");
        settings.put("group.protocol", "classic");
        settings.put("partition.assignment.strategy", PlanFollowingAssignor.class.getName());
        settings.put(PlanFollowingAssignor.ROLE, PlanFollowingAssignor.ROLE_NUDGE);
        return settings;
    }

    /** Join the group as a member of nothing, wait for the round to finish, leave. */
    @SuppressWarnings("deprecation")
    static boolean run(Map<String, ?> original, Duration timeout) {
        AtomicBoolean assigned = new AtomicBoolean();
        long deadline = System.nanoTime() + timeout.toNanos();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(settings(original))) {
            consumer.subscribe(NOTHING, new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    assigned.set(true);
                }
            });
            while (!assigned.get() && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(100));
            }
            consumer.close(Duration.ofSeconds(5));
        } catch (RuntimeException e) {
            LOG.warn("rebalance nudge failed: {}", WireException.oneLine(String.valueOf(e)));
            return false;
        }
        return assigned.get();
    }
}
