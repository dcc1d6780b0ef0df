package dev.kafkarebalance.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared streams plan vectors (tests/data/wire/streams_plan_vectors.json), which the
 * operator's encoder is checked against too: the bytes the operator writes decode here to the
 * plan it meant, their signature verifies, and each rejected value is refused naming its field.
 */
class StreamsPlanVectorsTest {
    @TempDir
    Path dir;

    @Test
    void theOperatorsStreamsRecordsDecodeToTheirInputAndVerify() throws Exception {
        String path = System.getProperty("wire.vectors", "../tests/data/wire/streams_plan_vectors.json");
        JsonNode doc = new ObjectMapper().readTree(Files.readAllBytes(Path.of(path)));
        Path keyFile = dir.resolve("keys");
        Files.writeString(keyFile, doc.get("key").asText() + "\n");
        PlanKeys keys = PlanKeys.fromFile(keyFile);
        int records = 0;
        for (JsonNode record : doc.get("records")) {
            JsonNode input = record.get("input");
            String group = input.get("group").asText();
            byte[] value = record.get("value").asText().getBytes(StandardCharsets.UTF_8);
            PlanDocument decoded = PlanCodec.decode(group, value);
            assertEquals(PlanKind.STREAMS, decoded.kind());
            assertEquals(input.get("epoch").asLong(), decoded.epoch());
            assertEquals(input.get("plan_hash").asText(), decoded.planHash());
            assertEquals(input.get("incarnation").asText(), decoded.incarnation());
            Set<String> ids = new HashSet<>();
            input.get("member_ids").forEach(id -> ids.add(id.asText()));
            assertEquals(ids, decoded.memberIds());
            Map<String, Map<String, Set<Integer>>> expected = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> m = input.get("tasks").fields(); m.hasNext(); ) {
                Map.Entry<String, JsonNode> member = m.next();
                Map<String, Set<Integer>> subtopologies = new HashMap<>();
                member.getValue().fields().forEachRemaining(s -> {
                    Set<Integer> partitions = new HashSet<>();
                    s.getValue().forEach(p -> partitions.add(p.asInt()));
                    subtopologies.put(s.getKey(), partitions);
                });
                expected.put(member.getKey(), subtopologies);
            }
            Map<String, Map<String, Set<Integer>>> actual = new HashMap<>();
            decoded.members().forEach((member, subtopologies) -> {
                Map<String, Set<Integer>> copy = new HashMap<>();
                subtopologies.forEach((s, p) -> copy.put(s, new HashSet<>(p)));
                actual.put(member, copy);
            });
            assertEquals(expected, actual);
            JsonNode standbys = input.get("standbys");
            if (standbys == null) {
                assertNull(decoded.standbys(), group);
            } else {
                Map<String, Map<String, Set<Integer>>> want = new HashMap<>();
                standbys.fields().forEachRemaining(m -> {
                    Map<String, Set<Integer>> subtopologies = new HashMap<>();
                    m.getValue().fields().forEachRemaining(s -> {
                        Set<Integer> partitions = new HashSet<>();
                        s.getValue().forEach(p -> partitions.add(p.asInt()));
                        subtopologies.put(s.getKey(), partitions);
                    });
                    want.put(m.getKey(), subtopologies);
                });
                Map<String, Map<String, Set<Integer>>> got = new HashMap<>();
                decoded.standbys().forEach((member, subtopologies) -> {
                    Map<String, Set<Integer>> copy = new HashMap<>();
                    subtopologies.forEach((s, p) -> copy.put(s, new HashSet<>(p)));
                    got.put(member, copy);
                });
                assertEquals(want, got, group);
            }
            assertNull(keys.verify(group, value, record.get("signature").asText().getBytes(StandardCharsets.US_ASCII)));
            records++;
        }
        assertTrue(records >= 2, "vectors read: " + records);
        for (JsonNode reject : doc.get("reject")) {
            byte[] value = reject.get("value").asText().getBytes(StandardCharsets.UTF_8);
            PlanFormatException e = assertThrows(PlanFormatException.class, () -> PlanCodec.decode("g", value));
            assertTrue(e.getMessage().contains(reject.get("field").asText()), e.getMessage());
        }
    }
}
