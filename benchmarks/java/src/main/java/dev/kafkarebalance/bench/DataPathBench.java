package dev.kafkarebalance.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Java client on the data path benchmark ({@code benchmarks/datapath.py}): the ceiling a
 * Python consumer is compared against, and a fast way to fill a topic.
 *
 * <p>{@code DataPathBench produce BOOTSTRAP TOPIC PARTITIONS COUNT SIZE}: COUNT records of SIZE
 * random bytes (no key), spread round-robin over the partitions, acks=all; exits once all are
 * acknowledged.
 *
 * <p>{@code DataPathBench consume BOOTSTRAP TOPIC PARTITIONS EXPECTED GROUP [latency]}: assigns
 * every partition, polls and counts until EXPECTED records were seen (no commits: the same work
 * as the raw kafka-python consumer it is compared with). Prints one JSON line with the same
 * fields the Python consumers print: monotonic seconds of start, first and last batch, process
 * CPU seconds at the first and last batch, peak resident memory, and with {@code latency} the
 * per-record milliseconds from the record's timestamp to its poll. Prints {@code READY} first,
 * once the partitions have positions (the latency run starts producing then).
 */
public final class DataPathBench {
    private DataPathBench() {}

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]),
                    Long.parseLong(args[4]), Integer.parseInt(args[5]));
            case "consume" -> consume(args[1], args[2], Integer.parseInt(args[3]),
                    Long.parseLong(args[4]), args[5], args.length > 6 && args[6].equals("latency"));
            default -> throw new IllegalArgumentException("expected produce or consume: " + args[0]);
        }
    }

    private static void produce(String bootstrap, String topic, int partitions, long count, int size)
            throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Random random = new Random(13);
        byte[][] values = new byte[64][];
        for (int i = 0; i < values.length; i++) {
            values[i] = new byte[size];
            random.nextBytes(values[i]);
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (long i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, (int) (i % partitions), null,
                        values[(int) (i % values.length)]));
            }
            producer.flush();
        }
    }

    private static double cpuSeconds() {
        var os = (com.sun.management.OperatingSystemMXBean)
                ManagementFactory.getOperatingSystemMXBean();
        return os.getProcessCpuTime() / 1e9;
    }

    private static long peakRssKb() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return -1;
    }

    private static void consume(String bootstrap, String topic, int partitions, long expected,
            String group, boolean latency) throws Exception {
        double started = System.nanoTime() / 1e9;
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
        List<TopicPartition> assigned = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            assigned.add(new TopicPartition(topic, p));
        }
        long seen = 0;
        long bytes = 0;
        long firstCount = 0;
        double first = 0;
        double last = 0;
        double cpuFirst = 0;
        double cpuLast = 0;
        List<Long> latencies = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(assigned);
            for (TopicPartition tp : assigned) {
                consumer.position(tp);
            }
            System.out.println("READY");
            System.out.flush();
            double deadline = started + 600;
            while (seen < expected && System.nanoTime() / 1e9 < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                long now = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    bytes += record.serializedValueSize();
                    if (latency) {
                        latencies.add(now - record.timestamp());
                    }
                }
                seen += records.count();
                last = System.nanoTime() / 1e9;
                cpuLast = cpuSeconds();
                if (first == 0) {
                    first = last;
                    cpuFirst = cpuLast;
                    firstCount = seen;
                }
            }
        }
        Map<String, Object> out = new HashMap<>();
        out.put("records", seen);
        out.put("bytes", bytes);
        out.put("first_count", firstCount);
        out.put("t_start", started);
        out.put("t_first", first);
        out.put("t_last", last);
        out.put("cpu_first", cpuFirst);
        out.put("cpu_last", cpuLast);
        out.put("peak_rss_kb", peakRssKb());
        out.put("latencies_ms", latencies);
        System.out.println(toJson(out));
    }

    private static String toJson(Map<String, Object> values) {
        StringBuilder json = new StringBuilder("{");
        for (Map.Entry<String, Object> entry : values.entrySet()) {
            if (json.length() > 1) {
                json.append(',');
            }
            json.append('"').append(entry.getKey()).append("\":").append(entry.getValue());
        }
        return json.append('}').toString();
    }
}
