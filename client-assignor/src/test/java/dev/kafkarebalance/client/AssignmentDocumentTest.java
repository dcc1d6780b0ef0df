package dev.kafkarebalance.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The document as the operator writes it (versions 1 and 2), and what is refused, by field. */
class AssignmentDocumentTest {
    private static final String V1 = "{\"epoch\":12,\"generatedAt\":\"2026-01-01T00:00:00Z\",\"group\":\"g\","
        + "\"member\":\"orders-0\",\"partitions\":{\"orders\":[2,0]},\"planHash\":\"h\",\"revoking\":{\"orders\":[1]},"
        + "\"policyUid\":\"u1\",\"unknownKey\":1}";

    @Test
    void version1IsReadWithEveryField() throws Exception {
        AssignmentDocument d = AssignmentDocument.decode(V1);
        assertEquals("g", d.group());
        assertEquals("orders-0", d.member());
        assertEquals(12, d.epoch());
        assertEquals(Map.of("orders", List.of(0, 2)), d.partitions());
        assertEquals(Map.of("orders", List.of(1)), d.revoking());
        assertEquals("h", d.planHash());
        assertEquals("u1", d.policyUid());
    }

    @Test
    void version2RangesAndBitmapsMeanTheSameAsLists() throws Exception {
        AssignmentDocument ranges = AssignmentDocument.decode("{\"version\":2,\"epoch\":1,\"group\":\"g\","
            + "\"member\":\"m\",\"partitions\":{\"a\":\"0-3,7\",\"b\":\"bits:BQ==\"}}");
        assertEquals(Map.of("a", List.of(0, 1, 2, 3, 7), "b", List.of(0, 2)), ranges.partitions());
        AssignmentDocument lists = AssignmentDocument.decode("{\"epoch\":1,\"group\":\"g\",\"member\":\"m\","
            + "\"partitions\":{\"a\":[7,3,2,1,0],\"b\":[2,0]}}");
        assertTrue(ranges.samePlan(lists));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "not json|input",
        "[]|input",
        "{\"group\":\"g\",\"member\":\"m\",\"partitions\":{}}|epoch",
        "{\"epoch\":-1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{}}|epoch",
        "{\"epoch\":1.0,\"group\":\"g\",\"member\":\"m\",\"partitions\":{}}|epoch",
        "{\"epoch\":1,\"member\":\"m\",\"partitions\":{}}|group",
        "{\"epoch\":1,\"group\":2,\"member\":\"m\",\"partitions\":{}}|group",
        "{\"epoch\":1,\"group\":\"g\",\"member\":\"m\"}|partitions",
        "{\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":[0,0]}}|partitions.t",
        "{\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":[-1]}}|partitions.t[0]",
        "{\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":\"0-3\"}}|partitions.t",
        "{\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":[1]},\"revoking\":{\"t\":[1]}}|revoking.t",
        "{\"version\":3,\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{}}|version",
        "{\"version\":2,\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":[1]}}|partitions.t",
        "{\"version\":2,\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":\"3-1\"}}|partitions.t",
        "{\"version\":2,\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":\"0-2147483648\"}}|partitions.t",
        "{\"version\":2,\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":\"0-2147483646\"}}|partitions.t",
        "{\"version\":2,\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":\"bits:AA==\"}}|partitions.t",
        "{\"version\":2,\"epoch\":1,\"group\":\"g\",\"member\":\"m\",\"partitions\":{\"t\":\"bits:*\"}}|partitions.t",
    })
    void aBadDocumentIsRefusedNamingTheField(String text, String field) {
        DocumentException error = assertThrows(DocumentException.class, () -> AssignmentDocument.decode(text));
        assertEquals(field, error.field(), error.getMessage());
        assertTrue(!error.getMessage().contains("\n"));
    }
}
