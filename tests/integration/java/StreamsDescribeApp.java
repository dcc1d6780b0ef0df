// The smallest Kafka Streams application whose streams group (group.protocol=streams, KIP-1071)
// has both kinds of subtopology, for tests/integration/test_streams_describe.py:
//   subtopology 0: INPUT -> re-key by value -> a repartition topic (stateless)
//   subtopology 1: the repartition topic -> count (a state store with a changelog) -> OUTPUT
// Compiled (the test caches its classes: devenv/java_classes.py) against the broker's libs/ and
// Kafka Streams' jars, and run as
//   java -cp <classes>:<classpath> StreamsDescribeApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT CLIENT_ID STATE_DIR
// It prints "state RUNNING" etc. on each state change, and stops on SIGTERM.
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsDescribeApp {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.CLIENT_ID_CONFIG, args[4]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
            .groupBy((key, value) -> value, Grouped.as("by-value"))
            .count()
            .toStream()
            .mapValues(Object::toString)
            .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> System.out.println("state " + now));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }
}
