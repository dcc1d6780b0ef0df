package dev.kafkarebalance.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.junit.jupiter.api.Test;

/**
 * One plan record can only be a plan: the codec's bounds, and the reader's handling of a record
 * that is refused or throws. Surefire runs these under -Xmx64m (pom.xml), the heap in which an
 * unbounded range expansion runs out of memory.
 */
class PlanRecordsTest {
    private static final Uuid ORDERS = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAA");
    private static final Clock NOW = Clock.fixed(Instant.parse("2026-01-01T00:10:00Z"), ZoneOffset.UTC);

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String record(String members) {
        return "{\"version\":2,\"group\":\"orders\",\"epoch\":1,\"generatedAt\":\"2026-01-01T00:09:00Z\","
            + "\"memberIds\":[\"m-a\",\"m-b\"],\"members\":" + members + "}";
    }

    private static PlanRecords records(PlanStore store) {
        return new PlanRecords(store, PlanBounds.DEFAULT, name -> name.equals("orders") ? Optional.of(ORDERS) : Optional.empty());
    }

    @Test
    void aHugeRangeIsRefusedUnexpandedAndAValidPlanAfterItIsFollowed() {
        PlanStore store = new PlanStore();
        PlanRecords records = records(store);
        long started = System.nanoTime();
        records.handle("orders", bytes(record("{\"orders-0\":{\"orders\":\"0-2000000000\"}}")), "plans-0@0");
        long tookMs = (System.nanoTime() - started) / 1_000_000;
        System.out.println("refused \"0-2000000000\" in " + tookMs + " ms (max heap "
            + Runtime.getRuntime().maxMemory() / (1024 * 1024) + " MiB)");
        assertTrue(tookMs < 1_000, "decoded and refused within 1 s, took " + tookMs + " ms");
        assertEquals(1, records.refused());
        assertTrue(store.get("orders").isEmpty(), "refused: no plan for the group");

        records.handle("orders", bytes(record("{\"orders-0\":{\"orders\":\"0-3\"},\"orders-1\":{\"orders\":[4,5]}}")),
            "plans-0@1");
        assertEquals(1, records.refused());
        PlanFollowingAssignor assignor = new PlanFollowingAssignor(store, NOW, 0);
        PlanFollowingAssignorTest.Spec spec = new PlanFollowingAssignorTest.Spec().add("m-a", "orders-0").add("m-b", "orders-1");
        GroupAssignment result = assignor.assign(spec, PlanFollowingAssignorTest.topics(Map.of(ORDERS, 6)));
        assertEquals(Set.of(0, 1, 2, 3), PlanFollowingAssignorTest.owned(result, "m-a", ORDERS));
        assertEquals(Set.of(4, 5), PlanFollowingAssignorTest.owned(result, "m-b", ORDERS));
    }

    @Test
    void aRecordWhoseHandlingThrowsAnErrorIsCountedAndTheNextIsRead() {
        PlanStore store = new PlanStore();
        PlanRecords records = new PlanRecords(store, PlanBounds.DEFAULT, name -> {
            if (name.equals("boom")) {
                throw new OutOfMemoryError("simulated");
            }
            return Optional.of(ORDERS);
        });
        records.handle("orders", bytes(record("{\"orders-0\":{\"boom\":[0]}}")), "plans-0@0");
        assertEquals(1, records.refused());
        records.handle("orders", bytes(record("{\"orders-0\":{\"orders\":[0]}}")), "plans-0@1");
        assertEquals(Set.of(0), store.get("orders").orElseThrow().members().get("orders-0").get(ORDERS));
        records.handle(null, bytes("{}"), "plans-0@2");
        assertEquals(2, records.refused());
    }

    @Test
    void eachBoundIsCheckedAndNamedInOneLine() {
        PlanBounds small = new PlanBounds(400, 10, 6, 99);
        assertRefused(small, "max.record.bytes", "{\"a\":{\"t\":\"" + "0,".repeat(200) + "1\"}}");
        assertRefused(small, "plans.max.partitions.per.member)", "{\"a\":{\"t\":\"0-6\"}}");
        assertRefused(small, "plans.max.partitions.per.member)", "{\"a\":{\"t\":\"0-3\",\"u\":[0,1,2]}}");
        assertRefused(small, "plans.max.partitions)", "{\"a\":{\"t\":\"0-5\"},\"b\":{\"t\":\"6-10\"}}");
        assertRefused(small, "plans.max.partition)", "{\"a\":{\"t\":\"100\"}}");
        assertRefused(small, "plans.max.partition)", "{\"a\":{\"t\":[100]}}");
        byte[] bitmap = new byte[64];  // partition 511
        bitmap[63] = (byte) 0x80;
        assertRefused(small, "plans.max.partition)", "{\"a\":{\"t\":\"bits:" + Base64.getEncoder().encodeToString(bitmap) + "\"}}");
        assertRefused(PlanBounds.DEFAULT, "int32", "{\"a\":{\"t\":\"0-9999999999\"}}");
        assertRefused(PlanBounds.DEFAULT, "runs backwards", "{\"a\":{\"t\":\"5-1\"}}");
        assertRefused(PlanBounds.DEFAULT, "not above", "{\"a\":{\"t\":\"0-5,3\"}}");
        assertRefused(PlanBounds.DEFAULT, "listed twice", "{\"a\":{\"t\":[1,1]}}");
        assertRefused(PlanBounds.DEFAULT, "not base64", "{\"a\":{\"t\":\"bits:%%%\"}}");
    }

    @Test
    void rangesAndBitmapsDecodeToTheSamePartitions() throws Exception {
        byte[] bitmap = {(byte) 0b0000_0101, 0, (byte) 0b1000_0000};  // 0, 2, 23
        PlanDocument doc = PlanCodec.decode("orders", bytes(record("{\"a\":{\"t\":\"bits:"
            + Base64.getEncoder().encodeToString(bitmap) + "\"},\"b\":{\"t\":\"1,3-5,24\"}}")));
        assertEquals(Set.of(0, 2, 23), doc.members().get("a").get("t"));
        assertEquals(Set.of(1, 3, 4, 5, 24), doc.members().get("b").get("t"));
    }

    private static void assertRefused(PlanBounds bounds, String fragment, String members) {
        PlanFormatException e = assertThrows(PlanFormatException.class,
            () -> PlanCodec.decode("orders", bytes(record(members)), bounds));
        assertTrue(e.getMessage().contains(fragment), e.getMessage());
        assertTrue(!e.getMessage().contains("\n"), "one line: " + e.getMessage());
    }
}
