// A Kafka Streams application (group.protocol=streams, KIP-1071) for the streams-group tests:
// one process = one instance = one streams-group member with one stream thread.
//
// Topologies (MODE):
//   stateless  INPUT -> filter (drops values starting with "noise") -> mapValues (upper case)
//              -> OUTPUT; at-least-once, commits every 200 ms. DELAY_MS > 0 sleeps that long per
//              record, which makes this instance slow.
//   count      INPUT -> groupByKey -> count (a RocksDB store with a changelog) -> OUTPUT as
//              (key, decimal count); exactly_once_v2, record cache off, so every input record
//              yields exactly one output record and a key's counts read 1, 2, 3, ... in order.
//
// Every 250 ms the instance prints its tasks when they change, as one line the tests parse
// (wall-clock milliseconds first):
//   1795000000000 tasks active=[0_0, 0_2] standby=[0_1]
// and "1795000000000 state RUNNING" etc. on every KafkaStreams state change.
//
// Compiled once per test session (javac, tests/integration/streams_apps.py) and run with the
// broker's libs/ and Kafka Streams' lib/ on the classpath (Toolchain.kafka_streams_classpath()):
//   java -cp <classes>:<classpath> StreamsTestApp MODE BOOTSTRAP APPLICATION_ID INPUT OUTPUT INSTANCE
//        STATE_DIR DELAY_MS
// INSTANCE is the client.id and the host of application.server (INSTANCE:7070), so the member
// can be told apart in StreamsGroupDescribe.
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsTestApp {
    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: StreamsTestApp MODE BOOTSTRAP APPLICATION_ID INPUT OUTPUT "
                + "INSTANCE STATE_DIR DELAY_MS");
            System.exit(2);
        }
        String mode = args[0];
        String input = args[3];
        String output = args[4];
        String instance = args[5];
        long delayMs = Long.parseLong(args[7]);

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.CLIENT_ID_CONFIG, instance);
        p.put(StreamsConfig.APPLICATION_SERVER_CONFIG, instance + ":7070");
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[6]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        p.put(StreamsConfig.consumerPrefix("max.poll.records"), 50);

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> in = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        if (mode.equals("stateless")) {
            p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
            p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
            in.filter((k, v) -> v != null && !v.startsWith("noise"))
                .mapValues(v -> {
                    if (delayMs > 0) {
                        try {
                            Thread.sleep(delayMs);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                    return v.toUpperCase();
                })
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        } else if (mode.equals("count")) {
            p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
            p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
            // a streams group takes its standby count from the group config
            // streams.num.standby.replicas (the harness sets it); this is the client's own view
            p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
            in.groupByKey()
                .count(Materialized.as("counts"))
                .toStream()
                .mapValues(c -> Long.toString(c))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        } else {
            System.err.println("unknown MODE " + mode + ": stateless or count");
            System.exit(2);
        }

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println(System.currentTimeMillis() + " state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("uncaught " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // a graceful close leaves the group at once (no session timeout for the others)
            streams.close(Duration.ofSeconds(15));
            done.countDown();
        }));
        streams.start();
        String seen = "";
        while (done.getCount() > 0) {
            TreeSet<String> active = new TreeSet<>();
            TreeSet<String> standby = new TreeSet<>();
            try {
                for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : t.activeTasks()) {
                        active.add(task.taskId().toString());
                    }
                    for (TaskMetadata task : t.standbyTasks()) {
                        standby.add(task.taskId().toString());
                    }
                }
            } catch (RuntimeException e) {
                // not running (yet, or any more): report nothing new
                done.await(250, java.util.concurrent.TimeUnit.MILLISECONDS);
                continue;
            }
            String now = "tasks active=" + List.copyOf(active) + " standby=" + List.copyOf(standby);
            if (!now.equals(seen)) {
                System.out.println(System.currentTimeMillis() + " " + now);
                System.out.flush();
                seen = now;
            }
            done.await(250, java.util.concurrent.TimeUnit.MILLISECONDS);
        }
    }
}
