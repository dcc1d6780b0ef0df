// A KIP-848 consumer (group.protocol=consumer) for the broker-mode tests: static member
// `member` (group.instance.id), subscribes to one topic, writes every record it processes to
// the project's ledger format (devharness/kafka_rebalance_dev/demo/ledger.py) and commits after the write, so
// the ledger shows every acknowledged record, tagged with the member epoch it was consumed
// under. Prints "assigned [..]" on every change.
//
// Compiled once by the test (devenv/java_classes.py caches the classes) and run as
// java -cp <classes>:<kafka-clients, slf4j-api> Kip848LedgerConsumer
//   BOOTSTRAP GROUP TOPIC MEMBER LEDGER_FILE
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

public class Kip848LedgerConsumer {
    public static void main(String[] args) throws IOException {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[1]);
        p.put("group.protocol", "consumer");
        p.put("group.instance.id", args[3]);
        p.put("client.id", args[3]);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("max.poll.records", "50");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        String member = args[3];
        AtomicBoolean running = new AtomicBoolean(true);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running.set(false);
            consumer.wakeup();
            try {
                main.join(10_000);
            } catch (InterruptedException ignored) {
            }
        }));
        String seen = "";
        try (FileOutputStream ledger = new FileOutputStream(args[4], true)) {
            consumer.subscribe(List.of(args[2]));
            while (running.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                TreeSet<Integer> owned = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) {
                    owned.add(tp.partition());
                }
                String now = owned.toString();
                if (!now.equals(seen)) {
                    System.out.println("assigned " + now);
                    System.out.flush();
                    seen = now;
                }
                if (records.isEmpty()) {
                    continue;
                }
                long ts = System.currentTimeMillis();
                // under KIP-848 the "generation" is this member's epoch, which moves whenever its
                // assignment does: the ledger's spans per (member, epoch) are ownership periods
                int epoch = consumer.groupMetadata().generationId();
                StringBuilder lines = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    lines.append("{\"t\":\"").append(r.topic()).append("\",\"p\":").append(r.partition())
                        .append(",\"o\":").append(r.offset()).append(",\"m\":\"").append(member)
                        .append("\",\"e\":").append(epoch).append(",\"ts\":").append(ts).append("}\n");
                }
                ledger.write(lines.toString().getBytes(StandardCharsets.UTF_8));
                ledger.flush();
                try {
                    consumer.commitSync();
                } catch (RuntimeException e) {
                    // a partition moved meanwhile: its new owner processes these records again
                    System.out.println("commit failed: " + e);
                }
            }
        } catch (WakeupException stopping) {
            // shutdown hook: leave below
        } finally {
            consumer.close(Duration.ofSeconds(5));
        }
    }
}
