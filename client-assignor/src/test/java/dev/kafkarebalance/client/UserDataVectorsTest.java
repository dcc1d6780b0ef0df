package dev.kafkarebalance.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared user_data vectors (tests/data/wire/user_data_vectors.json), which the Python wire
 * module is checked against too (tests/test_wire_user_data_vectors.py): the same bytes out, the
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
                null, "", "", "");
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
}
