import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

/**
 * The broker plug-in's streams side on a real broker (tests/integration/test_streams_plugin_broker.py
 * runs it with the broker's libs/ and kafka-streams on the class path):
 * two Kafka Streams instances ({@code group.protocol=streams}) run a one-subtopology stateless
 * topology; the check then
 * <ol>
 *   <li>sets the group config {@code streams.assignor.name} to the alternate name, back, and to the
 *       alternate again (each held 5 s, the last 15 s), and reports the group epoch before each and
 *       after the last (StreamsGroupDescribe): at least 15 s after every switch;</li>
 *   <li>adds the reserved tag key {@value #TRIGGER} to {@code streams.rack.aware.assignment.tags},
 *       then removes it, and reports the epoch each change bumped the group to;</li>
 *   <li>sets the name to one no assignor has and reports the exact error;</li>
 *   <li>publishes a signed streams plan (uneven: 3 tasks on one member, 1 on the other, which the
 *       sticky assignor would never choose), triggers once, and reports when the members'
 *       assignments equal the plan.</li>
 * </ol>
 * Each result is one JSON line on stdout starting with {@code RESULT }. Arguments: bootstrap,
 * group (application.id), plan topic, plan key file, state directory.
 */
public class StreamsPluginCheck {
    static final String NAME = "kafka-rebalance-plan";
    static final String ALT = "kafka-rebalance-plan-alt";
    static final int PARTITIONS = 4;
    static final String TRIGGER = "kafka-rebalance-trigger";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String group = args[1];
        String planTopic = args[2];
        String key = firstKey(Path.of(args[3]));
        Path state = Path.of(args[4]);
        String input = group + "-in";
        String output = group + "-out";
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            create(admin, new NewTopic(input, PARTITIONS, (short) 1));
            create(admin, new NewTopic(output, 1, (short) 1));
            create(admin, new NewTopic(planTopic, 1, (short) 1).configs(Map.of("cleanup.policy", "compact")));
            List<KafkaStreams> apps = new ArrayList<>();
            try {
                for (String instance : List.of("a", "b")) {
                    apps.add(start(bootstrap, group, input, output, state.resolve(instance)));
                }
                StreamsGroupDescription settled = await(admin, group, "both members settled", 120,
                    d -> d.members().size() == 2 && stable(d));
                result("initial", settled, 0);

                // The name switch: ALT, back to NAME, ALT again. Each name is held one heartbeat
                // interval (5 s) before the next, the last is watched for 15 s (3 heartbeats), and
                // every switch is reported against the epoch read after that watch: a bump caused by
                // any switch shows there, so each switch is watched for at least 15 s, in 25 s of
                // wall where a 15 s watch per switch took 45 s.
                List<String> names = List.of(ALT, NAME, ALT);
                List<Integer> epochsBefore = new ArrayList<>();
                List<String> shown = new ArrayList<>();
                for (int i = 0; i < names.size(); i++) {
                    String name = names.get(i);
                    epochsBefore.add(describe(admin, group).groupEpoch());
                    setAssignor(admin, group, name);
                    Thread.sleep(i < names.size() - 1 ? 5_000 : 15_000);
                    shown.add(await(admin, group, "the assignor name shown as " + name, 30,
                        d -> d.assignorName().orElse("").equals(name)).assignorName().orElse(""));
                }
                int epochAfter = describe(admin, group).groupEpoch();
                for (int i = 0; i < names.size(); i++) {
                    System.out.println("RESULT {\"step\":\"name\",\"name\":\"" + names.get(i) + "\",\"epochBefore\":"
                        + epochsBefore.get(i) + ",\"epochAfter\":" + epochAfter + ",\"assignorName\":\"" + shown.get(i) + "\"}");
                }
                for (boolean add : List.of(true, false)) {  // the reserved rack-aware tag key, added then removed
                    trigger(admin, group, add, add ? "add" : "remove");
                }
                int before = describe(admin, group).groupEpoch();
                String error;
                try {
                    setAssignor(admin, group, "no-such-assignor");
                    error = "accepted";
                } catch (ExecutionException e) {
                    error = e.getCause().getClass().getName() + ": " + e.getCause().getMessage();
                }
                Thread.sleep(2_000);
                StreamsGroupDescription unchanged = describe(admin, group);
                System.out.println("RESULT {\"step\":\"unknown\",\"error\":" + quote(error) + ",\"epochBefore\":" + before
                    + ",\"epochAfter\":" + unchanged.groupEpoch() + "}");

                List<String> members = new ArrayList<>(new TreeSet<>(
                    unchanged.members().stream().map(StreamsGroupMemberDescription::memberId).toList()));
                String subtopology = unchanged.subtopologies().iterator().next().subtopologyId();
                Map<String, List<Integer>> plan = new TreeMap<>(Map.of(
                    members.get(0), List.of(0, 1, 2), members.get(1), List.of(3)));
                long started = System.nanoTime();
                publish(bootstrap, planTopic, group, key, members, subtopology, plan);
                Thread.sleep(2_000);  // the plug-in's reader polls every 500 ms
                int planEpoch = trigger(admin, group, true, "plan-trigger");
                StreamsGroupDescription followed = await(admin, group, "the plan followed", 60,
                    d -> d.groupEpoch() >= planEpoch && stable(d) && matches(d, subtopology, plan));
                result("plan", followed, (System.nanoTime() - started) / 1_000_000);
            } finally {
                for (KafkaStreams app : apps) {
                    app.close(java.time.Duration.ofSeconds(10));
                }
            }
        }
    }

    static void create(Admin admin, NewTopic topic) throws Exception {
        try {
            admin.createTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
    }

    static KafkaStreams start(String bootstrap, String group, String input, String output, Path state) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, group);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input).mapValues(v -> v.toUpperCase()).to(output);
        KafkaStreams app = new KafkaStreams(builder.build(), props);
        app.start();
        return app;
    }

    static void setAssignor(Admin admin, String group, String name) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry("streams.assignor.name", name), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get(30, TimeUnit.SECONDS);
    }

    /** Adds or removes the reserved tag key; reports and returns the epoch it bumped the group to. */
    static int trigger(Admin admin, String group, boolean add, String step) throws Exception {
        int before = describe(admin, group).groupEpoch();
        long started = System.nanoTime();
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        ConfigEntry entry = new ConfigEntry("streams.rack.aware.assignment.tags", TRIGGER);
        AlterConfigOp op = new AlterConfigOp(entry, add ? AlterConfigOp.OpType.SET : AlterConfigOp.OpType.DELETE);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get(30, TimeUnit.SECONDS);
        StreamsGroupDescription after = await(admin, group, "epoch bump after " + step, 60,
            d -> d.groupEpoch() > before && stable(d));
        System.out.println("RESULT {\"step\":\"" + step + "\",\"epochBefore\":" + before + ",\"epochAfter\":"
            + after.groupEpoch() + ",\"settledMs\":" + (System.nanoTime() - started) / 1_000_000
            + ",\"assignorName\":\"" + after.assignorName().orElse("") + "\"}");
        return after.groupEpoch();
    }

    static StreamsGroupDescription describe(Admin admin, String group) throws Exception {
        return admin.describeStreamsGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS);
    }

    /** Every member at the group's target epoch with its assignment equal to its target. */
    static boolean stable(StreamsGroupDescription d) {
        if (d.targetAssignmentEpoch() != d.groupEpoch()) {
            return false;
        }
        for (StreamsGroupMemberDescription m : d.members()) {
            if (m.memberEpoch() != d.groupEpoch() || !tasks(m.assignment()).equals(tasks(m.targetAssignment()))) {
                return false;
            }
        }
        return true;
    }

    static boolean matches(StreamsGroupDescription d, String subtopology, Map<String, List<Integer>> plan) {
        for (StreamsGroupMemberDescription m : d.members()) {
            Map<String, TreeSet<Integer>> active = tasks(m.assignment());
            if (!active.getOrDefault(subtopology, new TreeSet<>()).equals(new TreeSet<>(plan.getOrDefault(m.memberId(), List.of())))) {
                return false;
            }
        }
        return true;
    }

    static Map<String, TreeSet<Integer>> tasks(StreamsGroupMemberAssignment assignment) {
        Map<String, TreeSet<Integer>> out = new TreeMap<>();
        for (StreamsGroupMemberAssignment.TaskIds ids : assignment.activeTasks()) {
            out.computeIfAbsent(ids.subtopologyId(), s -> new TreeSet<>()).addAll(ids.partitions());
        }
        return out;
    }

    static StreamsGroupDescription await(Admin admin, String group, String what, int seconds,
                                         Predicate<StreamsGroupDescription> done) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        StreamsGroupDescription last = null;
        while (System.nanoTime() < deadline) {
            try {
                last = describe(admin, group);
                if (done.test(last)) {
                    return last;
                }
            } catch (ExecutionException e) {
                // the group does not exist yet, or the coordinator is loading: ask again
            }
            Thread.sleep(250);
        }
        throw new IllegalStateException("timed out waiting for " + what + "; last: " + last);
    }

    static void result(String step, StreamsGroupDescription d, long ms) {
        StringBuilder members = new StringBuilder();
        for (StreamsGroupMemberDescription m : d.members()) {
            members.append(members.length() == 0 ? "" : ",").append(quote(m.memberId())).append(":")
                .append(quote(tasks(m.assignment()).toString()));
        }
        System.out.println("RESULT {\"step\":\"" + step + "\",\"epoch\":" + d.groupEpoch() + ",\"assignorName\":\""
            + d.assignorName().orElse("") + "\",\"ms\":" + ms + ",\"members\":{" + members + "}}");
    }

    /** A streams plan record, signed as docs/kip848.md says (PlanKeys.java is the reference). */
    static void publish(String bootstrap, String topic, String group, String key, List<String> memberIds,
                        String subtopology, Map<String, List<Integer>> plan) throws Exception {
        StringBuilder members = new StringBuilder();
        for (Map.Entry<String, List<Integer>> e : plan.entrySet()) {
            members.append(members.length() == 0 ? "" : ",").append(quote(e.getKey())).append(":{")
                .append(quote(subtopology)).append(":").append(e.getValue().toString().replace(" ", "")).append("}");
        }
        String ids = String.join(",", memberIds.stream().map(StreamsPluginCheck::quote).toList());
        String value = "{\"version\":2,\"kind\":\"streams\",\"group\":" + quote(group) + ",\"incarnation\":\"check\","
            + "\"epoch\":1,\"planHash\":\"check\",\"generatedAt\":\"" + java.time.Instant.now() + "\","
            + "\"memberIds\":[" + ids + "],\"members\":{" + members + "}}";
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        ProducerRecord<String, byte[]> record = new ProducerRecord<>(topic, group, bytes);
        record.headers().add("kafka-rebalance-signature", sign(key, group, bytes).getBytes(StandardCharsets.US_ASCII));
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(
                Map.of("bootstrap.servers", bootstrap), new StringSerializer(), new ByteArraySerializer())) {
            producer.send(record).get(30, TimeUnit.SECONDS);
        }
    }

    static String sign(String key, String group, byte[] value) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        byte[] g = group.getBytes(StandardCharsets.UTF_8);
        mac.update("kafka-rebalance-plan\0".getBytes(StandardCharsets.US_ASCII));
        mac.update(java.nio.ByteBuffer.allocate(4).putInt(g.length).array());
        mac.update(g);
        mac.update((byte) 1);
        mac.update(value);
        return "hmac-sha256:" + java.util.HexFormat.of().formatHex(mac.doFinal());
    }

    static String firstKey(Path file) throws Exception {
        for (String line : Files.readAllLines(file)) {
            String k = line.strip();
            if (!k.isEmpty() && !k.startsWith("#")) {
                return k;
            }
        }
        throw new IllegalArgumentException("no key in " + file);
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }
}
