package dev.kafkarebalance.broker;

import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The background thread that keeps {@link PlanStore} equal to the compacted plan topic: it reads
 * every partition from the beginning with no consumer group (nothing committed, nothing to
 * rebalance) and hands each record to {@link PlanRecords}, resolving topic names to ids with an
 * admin client. All network I/O of the plug-in happens here, never on the coordinator thread.
 *
 * <p>Invariant: the thread runs until {@link #close}. Whatever one record does (a refusal, an
 * exception, an {@code Error} such as OutOfMemoryError) is logged and the next record is read; a
 * failure of the clients themselves restarts them after 5 s from the positions already read, and
 * a record the consumer itself cannot hand over is skipped.
 */
final class PlanTopicReader implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PlanTopicReader.class);
    private static final Duration POLL = Duration.ofMillis(500);
    private static final long RESOLVE_RETRY_MS = 5_000;

    private final PluginConfig config;
    private final PlanStore store;
    private final PlanKeys keys;
    private final Thread thread;
    // Topic name -> (id, when resolved). Entries older than TOPIC_ID_TTL_MS are resolved again, so a
    // topic deleted and created again (a new id under the same name) is followed by the next plan
    // record within that time; at most MAX_TOPIC_IDS names are kept, the least recently used go.
    private static final long TOPIC_ID_TTL_MS = 60_000;
    private static final int MAX_TOPIC_IDS = 10_000;
    private final Map<String, ResolvedTopic> topicIds = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, ResolvedTopic> eldest) {
            return size() > MAX_TOPIC_IDS;
        }
    };

    private record ResolvedTopic(Uuid id, long atMs) { }
    private final Map<TopicPartition, Long> positions = new HashMap<>();
    private volatile boolean running = true;
    private volatile KafkaConsumer<String, byte[]> consumer;

    PlanTopicReader(PluginConfig config, PlanStore store, PlanKeys keys) {
        this.config = config;
        this.store = store;
        this.keys = keys;
        this.thread = new Thread(this::run, "kafka-rebalance-plan-reader");
        this.thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    @Override
    public void close() {
        running = false;
        KafkaConsumer<String, byte[]> c = consumer;
        if (c != null) {
            c.wakeup();
        }
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private Map<String, Object> clientProps() {
        Map<String, Object> props = new HashMap<>(config.client());
        props.put("bootstrap.servers", config.bootstrapServers());
        props.put("client.id", "kafka-rebalance-plan-reader");
        return props;
    }

    private void run() {
        while (running) {
            try {
                follow();
            } catch (WakeupException e) {
                if (!running) {
                    return;
                }
            } catch (Throwable t) {  // an Error too: the reader outlives any failure
                LOG.warn("{}: plan reader failed ({}); retrying in 5 s; groups keep their last plans",
                    PlanFollowingAssignor.NAME, PlanRecords.oneLine(t));
                sleep(RESOLVE_RETRY_MS);
            }
        }
    }

    private void follow() {
        Map<String, Object> props = clientProps();
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (Admin admin = Admin.create(clientProps());
             KafkaConsumer<String, byte[]> c = new KafkaConsumer<>(props, new StringDeserializer(), new ByteArrayDeserializer())) {
            consumer = c;
            PlanRecords records = new PlanRecords(store, keys, config.bounds(), name -> resolve(admin, name));
            List<TopicPartition> partitions = waitForTopic(c);
            if (partitions.isEmpty()) {
                return;
            }
            c.assign(partitions);
            for (TopicPartition tp : partitions) {
                Long next = positions.get(tp);
                if (next == null) {
                    c.seekToBeginning(List.of(tp));
                } else {
                    c.seek(tp, next);
                }
            }
            long lastResolve = 0;
            while (running) {
                records.reloadKeys();
                for (ConsumerRecord<String, byte[]> record : poll(c)) {
                    records.handle(record.key(), record.value(), header(record, PlanKeys.HEADER),
                        header(record, PlanKeys.INCARNATION_HEADER), header(record, PlanKeys.EPOCH_HEADER),
                        record.topic() + "-" + record.partition() + "@" + record.offset());
                    positions.put(new TopicPartition(record.topic(), record.partition()), record.offset() + 1);
                }
                if (records.hasUnresolved() && System.currentTimeMillis() - lastResolve > RESOLVE_RETRY_MS) {
                    lastResolve = System.currentTimeMillis();
                    records.retryUnresolved();
                }
            }
        } finally {
            consumer = null;
        }
    }

    private static byte[] header(ConsumerRecord<String, byte[]> record, String name) {
        Header header = record.headers().lastHeader(name);
        return header == null ? null : header.value();
    }

    /** One poll; a record the consumer cannot hand over is logged and skipped. */
    private Iterable<ConsumerRecord<String, byte[]>> poll(KafkaConsumer<String, byte[]> c) {
        try {
            return c.poll(POLL);
        } catch (RecordDeserializationException e) {
            LOG.error("{}: skipped the unreadable plan record at {}@{}: {}", PlanFollowingAssignor.NAME,
                e.topicPartition(), e.offset(), PlanRecords.oneLine(e));
            c.seek(e.topicPartition(), e.offset() + 1);
            positions.put(e.topicPartition(), e.offset() + 1);
            return List.of();
        }
    }

    private Optional<Uuid> resolve(Admin admin, String name) {
        ResolvedTopic known = topicIds.get(name);
        long now = System.currentTimeMillis();
        if (known != null && now - known.atMs() < TOPIC_ID_TTL_MS) {
            return Optional.of(known.id());
        }
        try {
            Map<String, TopicDescription> found = admin.describeTopics(TopicCollection.ofTopicNames(Set.of(name)))
                .allTopicNames().get(10, TimeUnit.SECONDS);
            Uuid id = found.get(name).topicId();
            topicIds.put(name, new ResolvedTopic(id, now));
            return Optional.of(id);
        } catch (ExecutionException | TimeoutException e) {
            return Optional.empty();  // stays unknown: its partitions fall back until it can be resolved
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }

    private List<TopicPartition> waitForTopic(KafkaConsumer<String, byte[]> c) {
        boolean told = false;
        while (running) {
            List<PartitionInfo> infos = c.partitionsFor(config.topic(), Duration.ofSeconds(10));
            if (infos != null && !infos.isEmpty()) {
                return infos.stream().map(i -> new TopicPartition(i.topic(), i.partition())).toList();
            }
            if (!told) {
                LOG.info("{}: plan topic '{}' does not exist yet; waiting for it",
                    PlanFollowingAssignor.NAME, config.topic());
                told = true;
            }
            sleep(RESOLVE_RETRY_MS);
        }
        return List.of();
    }

    private void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            running = false;
        }
    }
}
