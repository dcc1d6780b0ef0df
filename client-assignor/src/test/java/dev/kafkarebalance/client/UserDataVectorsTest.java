package dev.kafkarebalance.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared user_data vectors (tests/data/wire/user_data_vectors.json), which the Python wire
 * module is checked against too (tests/unit/wire/test_wire_user_data_vectors.py): the same bytes out, the
 * same values in, the same fields named on refusal.
 */
class UserDataVectorsTest {
    private static final JsonNode VECTORS = load();

    private static JsonNode load() {
        String path = System.getProperty("wire.vectors", "../tests/data/wire/user_data_vectors.json");
        try {
            return new ObjectMapper().readTree(Path.of(path).toFile());
        } catch (java.io.IOException e) {
            throw new IllegalStateException("cannot read the shared vectors " + path + ": " + e, e);
        }
    }

    private static Stream<JsonNode> entries(String kind) {
        List<JsonNode> list = new ArrayList<>();
        VECTORS.get(kind).forEach(list::add);
        assertFalse(list.isEmpty(), kind);
        return list.stream();
    }

    private static byte[] raw(JsonNode entry) {
        return entry.has("base64") ? Base64.getDecoder().decode(entry.get("base64").asText())
            : entry.get("text").asText().getBytes(StandardCharsets.UTF_8);
    }

    private static Map<String, List<Integer>> partitions(JsonNode node) {
        Map<String, List<Integer>> result = new TreeMap<>();
        node.fields().forEachRemaining(e -> {
            List<Integer> parts = new ArrayList<>();
            e.getValue().forEach(p -> parts.add(p.intValue()));
            result.put(e.getKey(), parts);
        });
        return result;
    }

    @TestFactory
    Stream<DynamicTest> claimsEncodeToTheSharedBytes() {
        return entries("encode_claim").map(entry -> DynamicTest.dynamicTest(entry.toString(), () -> {
            JsonNode source = entry.get("document");
            AssignmentDocument document = source.isNull() ? null : new AssignmentDocument("g", "m",
                source.get("epoch").longValue(), new TreeMap<>(partitions(source.get("partitions"))),
                null, "", "", source.has("policyUid") ? source.get("policyUid").asText() : "");
            assertArrayEquals(entry.get("text").asText().getBytes(StandardCharsets.US_ASCII),
                UserData.encodeClaim(document));
        }));
    }

    @TestFactory
    Stream<DynamicTest> composedEncodesToTheSharedBytes() {
        return entries("encode_composed").map(entry -> DynamicTest.dynamicTest(entry.toString(), () ->
            assertArrayEquals(entry.get("text").asText().getBytes(StandardCharsets.US_ASCII),
                UserData.encodeComposed(entry.get("composedEpoch").longValue(), entry.get("claimEpoch").longValue()))));
    }

    @TestFactory
    Stream<DynamicTest> claimsDecodeToTheSharedValues() {
        return entries("decode_claim").map(entry -> DynamicTest.dynamicTest(entry.toString(), () -> {
            UserData.Claim claim = UserData.parseClaim(raw(entry));
            assertEquals(entry.get("epoch").longValue(), claim.epoch());
            assertEquals(partitions(entry.get("partitions")), claim.partitions());
            assertEquals(entry.has("policy") ? entry.get("policy").asText() : "", claim.policy());
        }));
    }

    @TestFactory
    Stream<DynamicTest> composedDecodesToTheSharedValues() {
        return entries("decode_composed").map(entry -> DynamicTest.dynamicTest(entry.toString(), () -> {
            UserData.Composed composed = UserData.parseComposed(raw(entry));
            assertEquals(entry.get("composedEpoch").longValue(), composed.composedEpoch());
            JsonNode claim = entry.get("claimEpoch");
            assertEquals(claim.isNull() ? null : claim.longValue(), composed.claimEpoch());
            assertEquals(composed.composedEpoch(), UserData.decodeComposed(raw(entry)));
        }));
    }

    @TestFactory
    Stream<DynamicTest> badClaimsAreRefusedNamingTheSharedField() {
        return entries("reject_claim").map(entry -> DynamicTest.dynamicTest(entry.toString(), () -> {
            UserDataException error = assertThrows(UserDataException.class, () -> UserData.parseClaim(raw(entry)));
            assertEquals(entry.get("field").asText(), error.field(), error.getMessage());
            assertNull(UserData.decodeClaim(raw(entry)));
        }));
    }

    @TestFactory
    Stream<DynamicTest> badComposedAreRefusedNamingTheSharedField() {
        return entries("reject_composed").map(entry -> DynamicTest.dynamicTest(entry.toString(), () -> {
            UserDataException error = assertThrows(UserDataException.class, () -> UserData.parseComposed(raw(entry)));
            assertEquals(entry.get("field").asText(), error.field(), error.getMessage());
        }));
    }

    @TestFactory
    Stream<DynamicTest> aJavaLeaderComposesTheSharedAssignment() {
        return entries("compose").map(entry -> DynamicTest.dynamicTest(entry.get("about").asText(), () -> {
            List<Composer.MemberView> views = new ArrayList<>();
            Map<String, Long> claimEpochs = new TreeMap<>();
            for (JsonNode m : entry.get("members")) {
                List<String> topics = new ArrayList<>();
                m.get("topics").forEach(t -> topics.add(t.asText()));
                UserData.Claim claim = UserData.decodeClaim(m.get("claim").asText().getBytes(StandardCharsets.UTF_8));
                claimEpochs.put(m.get("id").asText(), claim != null ? claim.epoch() : UserData.NO_EPOCH);
                views.add(new Composer.MemberView(m.get("id").asText(),
                    m.get("instance").isNull() ? null : m.get("instance").asText(), topics, claim,
                    partitions(m.get("owned"))));
            }
            Map<String, Integer> counts = new TreeMap<>();
            entry.get("partitions").fields().forEachRemaining(e -> counts.put(e.getKey(), e.getValue().intValue()));
            Composer.Composition composition = Composer.compose(views, counts);
            Map<String, Map<String, List<Integer>>> expected = new TreeMap<>();
            entry.get("assignment").fields().forEachRemaining(e -> expected.put(e.getKey(), partitions(e.getValue())));
            assertEquals(expected, new TreeMap<>(composition.assignment()));
            List<String> withheld = new ArrayList<>();
            composition.withheld().forEach(tp -> withheld.add(tp.topic() + "-" + tp.partition()));
            List<String> expectedWithheld = new ArrayList<>();
            entry.get("withheld").forEach(w -> expectedWithheld.add(w.get(0).asText() + "-" + w.get(1).asInt()));
            assertEquals(expectedWithheld, withheld);
            assertEquals(entry.get("ignored").intValue(), composition.ignoredClaims());
            entry.get("userData").fields().forEachRemaining(e -> assertEquals(e.getValue().asText(),
                new String(UserData.encodeComposed(composition.epoch(), claimEpochs.get(e.getKey())), StandardCharsets.US_ASCII)));
        }));
    }

    @TestFactory
    Stream<DynamicTest> aJavaLeaderTrustsClaimsAsTheSharedVectorsSay() {
        return entries("lead").map(entry -> DynamicTest.dynamicTest(entry.get("about").asText(), () -> {
            PlanFollowingAssignor leader = PlanFollowingAssignorTest.leaderAt(entry.get("leaderEpoch").longValue(),
                entry.has("leaderPolicy") ? entry.get("leaderPolicy").asText() : "");
            Map<String, ConsumerPartitionAssignor.Subscription> members = new TreeMap<>();
            for (JsonNode m : entry.get("members")) {
                List<String> topics = new ArrayList<>();
                m.get("topics").forEach(t -> topics.add(t.asText()));
                List<TopicPartition> owned = new ArrayList<>();
                partitions(m.get("owned")).forEach((t, ps) -> ps.forEach(p -> owned.add(new TopicPartition(t, p))));
                ConsumerPartitionAssignor.Subscription s = new ConsumerPartitionAssignor.Subscription(topics,
                    ByteBuffer.wrap(m.get("claim").asText().getBytes(StandardCharsets.UTF_8)), owned,
                    m.get("generation").intValue(), Optional.empty());
                s.setGroupInstanceId(Optional.ofNullable(m.get("instance").isNull() ? null : m.get("instance").asText()));
                members.put(m.get("id").asText(), s);
            }
            List<PartitionInfo> infos = new ArrayList<>();
            entry.get("partitions").fields().forEachRemaining(e -> {
                for (int p = 0; p < e.getValue().intValue(); p++) {
                    infos.add(new PartitionInfo(e.getKey(), p, null, new Node[0], new Node[0]));
                }
            });
            Map<String, ConsumerPartitionAssignor.Assignment> result = leader.assign(
                new Cluster("c", List.of(), infos, Set.of(), Set.of()),
                new ConsumerPartitionAssignor.GroupSubscription(members)).groupAssignment();
            Map<String, Map<String, List<Integer>>> got = new TreeMap<>();
            Map<String, String> userData = new TreeMap<>();
            result.forEach((member, a) -> {
                Map<String, List<Integer>> byTopic = new TreeMap<>();
                a.partitions().forEach(tp -> byTopic.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition()));
                byTopic.values().forEach(java.util.Collections::sort);
                got.put(member, byTopic);
                userData.put(member, new String(UserData.bytes(a.userData()), StandardCharsets.US_ASCII));
            });
            Map<String, Map<String, List<Integer>>> expected = new TreeMap<>();
            entry.get("assignment").fields().forEachRemaining(e -> expected.put(e.getKey(), partitions(e.getValue())));
            assertEquals(expected, got);
            Map<String, String> expectedUserData = new TreeMap<>();
            entry.get("userData").fields().forEachRemaining(e -> expectedUserData.put(e.getKey(), e.getValue().asText()));
            assertEquals(expectedUserData, userData);
            List<String> withheld = new ArrayList<>();
            leader.lastComposition().withheld().forEach(tp -> withheld.add(tp.topic() + "-" + tp.partition()));
            List<String> expectedWithheld = new ArrayList<>();
            entry.get("withheld").forEach(w -> expectedWithheld.add(w.get(0).asText() + "-" + w.get(1).asInt()));
            assertEquals(expectedWithheld, withheld);
        }));
    }
}
