package dev.kafkarebalance.client;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The assignor inside a real KafkaConsumer (constructed, never connected): configured from the
 * consumer's properties, its document thread runs while the consumer is open and ends when the
 * consumer is closed (Kafka never closes assignors); a consumer it cannot follow for does not start.
 */
class ConsumerLifecycleTest {
    private static Map<String, Object> settings(String member, Object path) {
        Map<String, Object> p = new java.util.HashMap<>(Map.of(
            "bootstrap.servers", "127.0.0.1:9",
            "group.id", "g",
            "key.deserializer", ByteArrayDeserializer.class,
            "value.deserializer", ByteArrayDeserializer.class,
            "partition.assignment.strategy", PlanFollowingAssignor.class.getName(),
            PlanFollowingAssignor.POLL_MS, "20"));
        if (member != null) {
            p.put("group.instance.id", member);
            p.put("client.id", member);
        }
        if (path != null) {
            p.put(PlanFollowingAssignor.DOCUMENT_PATH, path.toString());
        }
        return p;
    }

    private static Optional<Thread> follower(String member) {
        return Thread.getAllStackTraces().keySet().stream()
            .filter(t -> t.getName().equals("kafka-rebalance-plan-" + member) && t.isAlive()).findFirst();
    }

    @Test
    void theDocumentThreadEndsWithItsConsumer(@TempDir Path dir) throws Exception {
        Path document = dir.resolve("assignment.json");
        Files.writeString(document, DocumentTrackerTest.doc("pod-7", 1, "0", ""));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(settings("pod-7", document));
        Thread thread = follower("pod-7").orElseThrow();
        Thread.sleep(200); // a few polls while the consumer is open: the thread keeps running
        assertTrue(thread.isAlive());
        consumer.close(Duration.ZERO);
        thread.join(10_000);
        assertFalse(thread.isAlive(), "the document thread outlived its consumer");
    }

    @Test
    void withoutAMemberNameOrPathTheConsumerDoesNotStart() {
        KafkaException error = assertThrows(KafkaException.class, () -> new KafkaConsumer<>(settings(null, null)));
        Throwable cause = error;
        while (cause.getCause() != null) {
            cause = cause.getCause();
        }
        assertTrue(cause.getMessage().contains(PlanFollowingAssignor.DOCUMENT_PATH), cause.getMessage());
    }
}
