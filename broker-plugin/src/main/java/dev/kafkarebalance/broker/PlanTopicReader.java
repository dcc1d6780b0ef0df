package dev.kafkarebalance.broker;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
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
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The background thread that keeps {@link PlanStore} equal to the compacted plan topic: it reads
 * every partition from the beginning with no consumer group (nothing committed, nothing to
 * rebalance), decodes each record ({@link PlanCodec}), resolves topic names to ids with an admin
 * client, and replaces the group's plan. A tombstone removes it; a malformed record removes it
 * too (the group falls back rather than follow a plan the operator has since replaced) and is
 * logged. All network I/O of the plug-in happens here, never on the coordinator thread.
 */
final class PlanTopicReader implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PlanTopicReader.class);
    private static final Duration POLL = Duration.ofMillis(500);
    private static final long RESOLVE_RETRY_MS = 5_000;

    private final PluginConfig config;
    private final PlanStore store;
    private final Thread thread;
    private final Map<String, Uuid> topicIds = new HashMap<>();
    private final Map<String, PlanDocument> unresolved = new HashMap<>();
    private volatile boolean running = true;
    private volatile KafkaConsumer<String, byte[]> consumer;

    PlanTopicReader(PluginConfig config, PlanStore store) {
        this.config = config;
        this.store = store;
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
                return;
            } catch (RuntimeException e) {
                LOG.warn("{}: plan reader failed ({}); retrying in 5 s; groups keep their last plans",
                    PlanFollowingAssignor.NAME, e.toString());
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
            List<TopicPartition> partitions = waitForTopic(c);
            if (partitions.isEmpty()) {
                return;
            }
            c.assign(partitions);
            c.seekToBeginning(partitions);
            long lastResolve = 0;
            while (running) {
                for (ConsumerRecord<String, byte[]> record : c.poll(POLL)) {
                    apply(admin, record);
                }
                if (!unresolved.isEmpty() && System.currentTimeMillis() - lastResolve > RESOLVE_RETRY_MS) {
                    lastResolve = System.currentTimeMillis();
                    for (PlanDocument document : List.copyOf(unresolved.values())) {
                        publish(admin, document);
                    }
                }
            }
        } finally {
            consumer = null;
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

    private void apply(Admin admin, ConsumerRecord<String, byte[]> record) {
        String group = record.key();
        if (group == null) {
            LOG.warn("{}: ignored a plan record with no key at {}-{}@{}", PlanFollowingAssignor.NAME,
                record.topic(), record.partition(), record.offset());
            return;
        }
        unresolved.remove(group);
        if (record.value() == null) {
            store.remove(group);
            LOG.info("{}: plan for group '{}' deleted; the group gets the fallback from its next rebalance",
                PlanFollowingAssignor.NAME, group);
            return;
        }
        try {
            publish(admin, PlanCodec.decode(group, record.value()));
        } catch (PlanFormatException e) {
            store.remove(group);
            LOG.warn("{}: malformed plan for group '{}' at {}-{}@{}: {}; the group gets the fallback until "
                    + "a valid plan is published", PlanFollowingAssignor.NAME, group, record.topic(),
                record.partition(), record.offset(), e.getMessage());
        }
    }

    /** Resolves the document's topic names (asking the cluster for unknown ones) and stores it. */
    private void publish(Admin admin, PlanDocument document) {
        Set<String> names = new HashSet<>();
        document.members().values().forEach(topics -> names.addAll(topics.keySet()));
        Set<String> unknown = new HashSet<>(names);
        unknown.removeAll(topicIds.keySet());
        if (!unknown.isEmpty()) {
            for (String name : unknown) {
                try {
                    Map<String, TopicDescription> found = admin.describeTopics(TopicCollection.ofTopicNames(Set.of(name)))
                        .allTopicNames().get(10, TimeUnit.SECONDS);
                    topicIds.put(name, found.get(name).topicId());
                } catch (ExecutionException | TimeoutException e) {
                    // stays unknown: its partitions fall back until it can be resolved
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
        Set<String> missing = new HashSet<>(names);
        missing.removeAll(topicIds.keySet());
        Map<String, Map<Uuid, Set<Integer>>> members = new HashMap<>();
        document.members().forEach((instance, topics) -> {
            Map<Uuid, Set<Integer>> byId = new HashMap<>();
            topics.forEach((name, partitions) -> {
                Uuid id = topicIds.get(name);
                if (id != null) {
                    byId.put(id, Set.copyOf(partitions));
                }
            });
            members.put(instance, byId);
        });
        Plan plan = new Plan(document.group(), document.epoch(), document.planHash(),
            document.generatedAtMs(), members, missing);
        store.put(plan);
        if (missing.isEmpty()) {
            unresolved.remove(document.group());
        } else {
            unresolved.put(document.group(), document);
        }
        LOG.info("{}: cached {} ({} members){}", PlanFollowingAssignor.NAME, plan.describe(), members.size(),
            missing.isEmpty() ? "" : "; unknown topics " + missing + " fall back until they exist");
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
