// Java consumers that follow the operator's plans with the client-side assignor
// (client-assignor/, dev.kafkarebalance.client.PlanFollowingAssignor), for
// tests/integration/test_java_client_assignor.py. One JVM hosts every member (a JVM start is slow
// on a small machine); each member is its own KafkaConsumer with its own group.instance.id (the
// pod name) and its own mounted document path, exactly as one pod's consumer would be configured.
//
// Two kinds of member, both writing the project's ledger (devharness/kafka_rebalance_dev/demo/ledger.py) before
// committing, tagged with the group generation they consumed under:
//   plain  - a KafkaConsumer poll loop: write, flush, commitSync (retried after the next poll
//            when a rebalance is in progress; revoked partitions committed on revocation);
//   spring - a Spring Kafka @KafkaListener (batch) in its own application context, no Spring Boot;
//            the container commits after the listener returns (AckMode BATCH);
//   rogue  - a plain poll loop whose assignor lies: its subscription claims every partition
//            (0..N-1, `start MEMBER rogue N`) at epoch Long.MAX_VALUE, whatever its document says,
//            and it never asks for a rebalance. A plan-following leader must give it nothing
//            beyond the plan;
//   pinned - a plain poll loop whose assignor reads its document from PATH (`start MEMBER pinned
//            PATH`) instead of the mount the kubelet stand-in keeps current: the test writes
//            there what the member follows (a deleted policy incarnation's document, then the
//            current one).
//
// Commands on stdin, one per line: `start MEMBER plain|spring`, `start MEMBER rogue N`,
// `start MEMBER pinned PATH`, `quit`.
// Arguments: BOOTSTRAP GROUP TOPIC DOCUMENTS_DIR LEDGER_DIR
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.Collection;
import dev.kafkarebalance.client.PlanFollowingAssignor;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.MapPropertySource;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.listener.ContainerProperties;

public class PlanFollowingMembers {
    static String bootstrap;
    static String group;
    static String topic;
    static Path documents;
    static Path ledgers;

    /** What any consumer of a pod would set: the one assignor line, plus its identity. */
    static Map<String, Object> settings(String member) {
        Map<String, Object> p = new HashMap<>();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.instance.id", member);
        p.put("client.id", member);
        p.put("partition.assignment.strategy", "dev.kafkarebalance.client.PlanFollowingAssignor");
        // the test's stand-in for the kubelet mounts each pod's document here
        p.put("kafka-rebalance.document.path", documents.resolve(member).resolve("assignment.json").toString());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("max.poll.records", "50");
        p.put("session.timeout.ms", "10000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("key.deserializer", ByteArrayDeserializer.class);
        p.put("value.deserializer", ByteArrayDeserializer.class);
        return p;
    }

    /** The rogue's assignor: the real one, except for the claim it sends. */
    public static class RogueAssignor extends PlanFollowingAssignor {
        static volatile int partitions;

        @Override
        public ByteBuffer subscriptionUserData(Set<String> topics) {
            super.subscriptionUserData(topics); // its own bookkeeping, as an honest member's
            StringBuilder claim = new StringBuilder("{\"epoch\":" + Long.MAX_VALUE + ",\"partitions\":{\"");
            claim.append(topic).append("\":[");
            for (int p = 0; p < partitions; p++) {
                claim.append(p == 0 ? "" : ",").append(p);
            }
            claim.append("]}}");
            return ByteBuffer.wrap(claim.toString().getBytes(StandardCharsets.US_ASCII));
        }
    }

    static Map<String, Object> rogueSettings(String member) {
        Map<String, Object> p = settings(member);
        p.put("partition.assignment.strategy", List.of(RogueAssignor.class));
        p.put("kafka-rebalance.rejoin", "false");
        return p;
    }

    static synchronized void write(String member, int generation, List<ConsumerRecord<byte[], byte[]>> records)
            throws IOException {
        long ts = System.currentTimeMillis();
        StringBuilder lines = new StringBuilder();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            lines.append("{\"t\":\"").append(r.topic()).append("\",\"p\":").append(r.partition())
                .append(",\"o\":").append(r.offset()).append(",\"m\":\"").append(member)
                .append("\",\"e\":").append(generation).append(",\"ts\":").append(ts).append("}\n");
        }
        try (FileOutputStream out = new FileOutputStream(ledgers.resolve(member + ".jsonl").toFile(), true)) {
            out.write(lines.toString().getBytes(StandardCharsets.UTF_8));
            out.flush();
        }
    }

    static void report(String member, Consumer<?, ?> consumer, String[] seen) {
        TreeSet<Integer> owned = new TreeSet<>();
        for (TopicPartition tp : consumer.assignment()) {
            owned.add(tp.partition());
        }
        String now = owned.toString();
        if (!now.equals(seen[0])) {
            System.out.println("assigned " + member + " " + now);
            seen[0] = now;
        }
    }

    /** A plain poll loop. */
    static final class Plain implements Runnable {
        final String member;
        final AtomicBoolean running = new AtomicBoolean(true);
        final KafkaConsumer<byte[], byte[]> consumer;

        Plain(String member) {
            this(member, settings(member));
        }

        Plain(String member, Map<String, Object> settings) {
            this.member = member;
            this.consumer = new KafkaConsumer<>(settings);
        }

        @Override
        public void run() {
            String[] seen = {""};
            boolean uncommitted = false;
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        // cooperative: exactly the partitions moving away; commit what was processed
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (TopicPartition tp : partitions) {
                            offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
                        }
                        try {
                            consumer.commitSync(offsets);
                        } catch (RuntimeException e) {
                            System.out.println("commit on revoke failed " + member + ": " + e);
                        }
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    }
                });
                while (running.get()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                    report(member, consumer, seen);
                    if (!records.isEmpty()) {
                        List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>();
                        records.forEach(batch::add);
                        write(member, consumer.groupMetadata().generationId(), batch);
                        uncommitted = true;
                    }
                    if (uncommitted) {
                        try {
                            consumer.commitSync();
                            uncommitted = false;
                        } catch (RebalanceInProgressException e) {
                            // retried after the next poll, which completes the rebalance
                        }
                    }
                }
            } catch (WakeupException stopping) {
                // quit
            } catch (Exception e) {
                System.out.println("member " + member + " failed: " + e);
                e.printStackTrace(System.out);
            } finally {
                consumer.close(Duration.ofSeconds(5));
            }
        }

        void stop() {
            running.set(false);
            consumer.wakeup();
        }
    }

    /** The Spring side: one application context per member, as one pod's app would have. */
    @Configuration(proxyBeanMethods = false)
    @EnableKafka
    public static class SpringApp {
        static String member;

        @Bean
        public ConcurrentKafkaListenerContainerFactory<byte[], byte[]> kafkaListenerContainerFactory() {
            ConcurrentKafkaListenerContainerFactory<byte[], byte[]> factory = new ConcurrentKafkaListenerContainerFactory<>();
            factory.setConsumerFactory(new DefaultKafkaConsumerFactory<>(settings(member)));
            factory.setBatchListener(true);
            factory.getContainerProperties().setAckMode(ContainerProperties.AckMode.BATCH);
            // Spring appends "-<index>" to client.id and group.instance.id by default; the
            // operator knows a member by its pod name, so a pod's one listener keeps it as is
            factory.setContainerCustomizer(container -> container.setAlwaysClientIdSuffix(false));
            return factory;
        }

        @Bean
        public Listener listener() {
            return new Listener(member);
        }
    }

    public static class Listener {
        final String member;
        final String[] seen = {""};

        Listener(String member) {
            this.member = member;
        }

        @KafkaListener(topics = "${ledger.topic}", id = "ledger", idIsGroup = false)
        public void onBatch(List<ConsumerRecord<byte[], byte[]>> records, Consumer<?, ?> consumer) throws IOException {
            report(member, consumer, seen);
            if (!records.isEmpty()) {
                write(member, consumer.groupMetadata().generationId(), records);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        group = args[1];
        topic = args[2];
        documents = Path.of(args[3]);
        ledgers = Path.of(args[4]);
        List<Plain> plains = new ArrayList<>();
        List<AnnotationConfigApplicationContext> contexts = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ready");
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("quit")) {
                break;
            }
            if (words[0].equals("start") && words.length == 4 && words[2].equals("rogue")) {
                String member = words[1];
                RogueAssignor.partitions = Integer.parseInt(words[3]);
                Plain plain = new Plain(member, rogueSettings(member));
                plains.add(plain);
                new Thread(plain, "member-" + member).start();
                System.out.println("started " + member + " rogue");
            } else if (words[0].equals("start") && words.length == 4 && words[2].equals("pinned")) {
                String member = words[1];
                Map<String, Object> settings = settings(member);
                settings.put("kafka-rebalance.document.path", words[3]);
                Plain plain = new Plain(member, settings);
                plains.add(plain);
                new Thread(plain, "member-" + member).start();
                System.out.println("started " + member + " pinned " + words[3]);
            } else if (words[0].equals("start") && words.length == 3) {
                String member = words[1];
                if (words[2].equals("spring")) {
                    SpringApp.member = member;
                    AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
                    context.getEnvironment().getPropertySources().addFirst(
                        new MapPropertySource("test", Map.of("ledger.topic", topic)));
                    context.register(SpringApp.class);
                    context.refresh();
                    contexts.add(context);
                } else {
                    Plain plain = new Plain(member);
                    plains.add(plain);
                    Thread thread = new Thread(plain, "member-" + member);
                    thread.start();
                }
                System.out.println("started " + member + " " + words[2]);
            } else {
                System.out.println("unknown command: " + line);
            }
        }
        for (Plain plain : plains) {
            plain.stop();
        }
        for (AnnotationConfigApplicationContext context : contexts) {
            context.close();
        }
        Thread.sleep(2000);
        System.out.println("stopped");
        System.exit(0);
    }
}
