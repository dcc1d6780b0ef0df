import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Share consumers for the integration tests (KIP-932): {@code count} {@link KafkaShareConsumer}s of
 * one share group in one JVM, each on its own thread, with explicit acknowledgement (every record
 * is acknowledged ACCEPT after {@code workMs} of "work").
 *
 * <p>Usage: {@code ShareConsumers <bootstrap> <topic> <group> <count> <client-id-prefix> <workMs>},
 * where {@code workMs} is one number for all consumers or a comma-separated list, one per
 * consumer (a slow consumer among fast ones). It first sets the group config
 * {@code share.auto.offset.reset=earliest} (a share group reads from the log end by default),
 * then starts the consumers (client ids {@code <prefix>-0..}) and prints {@code READY}. A line
 * {@code stop <i>} on standard input closes consumer i (it leaves the group). When standard input
 * closes it closes the rest and prints one line per consumer and partition,
 * {@code ACKED <client id> <partition> <count>}, one per partition with the number of distinct
 * offsets acknowledged by any consumer, {@code DISTINCT <partition> <count>} (offsets whose acknowledgement the broker confirmed), and {@code DONE}.
 * Errors of a consumer thread are printed as {@code ERROR <client id> <error>}.
 */
public final class ShareConsumers {
    private ShareConsumers() {
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);
        String prefix = args[4];
        String[] work = args[5].split(",");

        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get(30, TimeUnit.SECONDS);
        }

        Map<String, Map<Integer, AtomicLong>> acked = new ConcurrentHashMap<>();
        Map<Integer, BitSet> distinct = new ConcurrentHashMap<>();
        List<Thread> threads = new ArrayList<>();
        List<AtomicBoolean> running = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String clientId = prefix + "-" + i;
            long workMs = Long.parseLong(work[Math.min(i, work.length - 1)].trim());
            Map<Integer, AtomicLong> mine = new ConcurrentHashMap<>();
            acked.put(clientId, mine);
            AtomicBoolean on = new AtomicBoolean(true);
            running.add(on);
            Thread thread = new Thread(() -> consume(bootstrap, topic, group, clientId, workMs, on, mine, distinct),
                clientId);
            thread.start();
            threads.add(thread);
        }
        System.out.println("READY");
        System.out.flush();

        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("stop ")) {
                    int i = Integer.parseInt(line.substring(5).trim());
                    running.get(i).set(false);
                    threads.get(i).join(30_000);
                    System.out.println("STOPPED " + prefix + "-" + i);
                    System.out.flush();
                }
            }
        }
        running.forEach(on -> on.set(false));
        for (Thread thread : threads) {
            thread.join(30_000);
        }
        for (Map.Entry<String, Map<Integer, AtomicLong>> e : new TreeMap<>(acked).entrySet()) {
            for (Map.Entry<Integer, AtomicLong> p : new TreeMap<>(e.getValue()).entrySet()) {
                System.out.println("ACKED " + e.getKey() + " " + p.getKey() + " " + p.getValue().get());
            }
        }
        for (Map.Entry<Integer, BitSet> p : new TreeMap<>(distinct).entrySet()) {
            synchronized (p.getValue()) {
                System.out.println("DISTINCT " + p.getKey() + " " + p.getValue().cardinality());
            }
        }
        System.out.println("DONE");
        System.out.flush();
    }

    private static void consume(String bootstrap, String topic, String group, String clientId, long workMs,
                                AtomicBoolean running, Map<Integer, AtomicLong> acked,
                                Map<Integer, BitSet> distinct) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", clientId);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("max.poll.records", "20");
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props,
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            // an offset counts as acknowledged once the broker confirmed its acknowledgement
            consumer.setAcknowledgementCommitCallback((offsets, error) -> {
                if (error != null) {
                    return;
                }
                offsets.forEach((tp, done) -> {
                    BitSet seen = distinct.computeIfAbsent(tp.partition(), p -> new BitSet());
                    synchronized (seen) {
                        done.forEach(offset -> seen.set(offset.intValue()));
                    }
                });
            });
            consumer.subscribe(List.of(topic));
            while (running.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    if (workMs > 0) {
                        Thread.sleep(workMs);
                    }
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    acked.computeIfAbsent(record.partition(), p -> new AtomicLong()).incrementAndGet();
                }
                if (!records.isEmpty()) {
                    consumer.commitSync(Duration.ofSeconds(10));
                }
            }
        } catch (Throwable t) {
            System.out.println("ERROR " + clientId + " " + t.toString().replace('\n', ' '));
            System.out.flush();
        }
    }
}
