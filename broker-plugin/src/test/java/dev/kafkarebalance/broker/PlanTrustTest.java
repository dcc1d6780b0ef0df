package dev.kafkarebalance.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Only the operator's plans count, and only for their own group: signatures, order, selection. */
class PlanTrustTest {
    private static final Uuid ORDERS = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAA");
    private static final Clock NOW = Clock.fixed(Instant.parse("2026-01-01T00:10:00Z"), ZoneOffset.UTC);
    private static final String KEY_A = "key-a-0123456789abcdef";
    private static final String KEY_B = "key-b-0123456789abcdef";

    @TempDir
    Path dir;

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String record(String group, String incarnation, long epoch, String generatedAt, String memberIds, String members) {
        return "{\"version\":2,\"group\":\"" + group + "\",\"incarnation\":\"" + incarnation + "\",\"epoch\":" + epoch
            + ",\"generatedAt\":\"" + generatedAt + "\",\"memberIds\":" + memberIds + ",\"members\":" + members + "}";
    }

    private static byte[] sign(String secret, String key, byte[] value) {
        return bytes(PlanKeys.SCHEME + HexFormat.of().formatHex(PlanKeys.mac(bytes(secret), key, value)));
    }

    private PlanKeys keys(String... lines) throws IOException {
        Path file = dir.resolve("plan-keys");
        Files.write(file, List.of(lines));
        return PlanKeys.fromFile(file);
    }

    private static PlanRecords records(PlanStore store, PlanKeys keys) {
        return new PlanRecords(store, keys, PlanBounds.DEFAULT, name -> Optional.of(ORDERS));
    }

    @Test
    void theSignatureMatchesTheOperatorsEncoderByteForByte() {
        // kafka_rebalance_common.wire.plan_record.sign(b"key-a-0123456789abcdef", "orders", b"{}")
        assertEquals("hmac-sha256:" + PYTHON_VECTOR, new String(sign(KEY_A, "orders", bytes("{}")), StandardCharsets.US_ASCII));
    }

    static final String PYTHON_VECTOR = "612b3edb81313e26d4693e52dff13d87c71f6ae6606594aae5ea48b7b54a37c5";

    @Test
    void onlySignedRecordsCountAndEitherOfTwoKeysSigns() throws IOException {
        PlanStore store = new PlanStore();
        PlanRecords records = records(store, keys("# rotation: old and new", KEY_A, "", KEY_B));
        byte[] plan1 = bytes(record("orders", "uid-1", 1, "2026-01-01T00:09:00Z", "[\"m-a\"]", "{\"orders-0\":{\"orders\":\"0-3\"}}"));
        records.handle("orders", plan1, null, "p@0");
        records.handle("orders", plan1, sign("key-c-0123456789abcdef", "orders", plan1), "p@1");
        records.handle("orders", plan1, bytes("hmac-sha256:zz"), "p@2");
        assertEquals(3, records.unauthenticated());
        assertTrue(store.get("orders").isEmpty());
        records.handle("orders", plan1, sign(KEY_A, "orders", plan1), "p@3");
        assertEquals(1, store.get("orders").orElseThrow().epoch());
        byte[] plan2 = bytes(record("orders", "uid-1", 2, "2026-01-01T00:09:30Z", "[\"m-a\"]", "{\"orders-0\":{\"orders\":\"0-1\"}}"));
        records.handle("orders", plan2, sign(KEY_B, "orders", plan2), "p@4");
        assertEquals(2, store.get("orders").orElseThrow().epoch());
        // a forged record under the group's key, and an unsigned tombstone, change nothing
        records.handle("orders", bytes("{not json"), null, "p@5");
        records.handle("orders", null, null, bytes("uid-1"), bytes("2"), "p@6");
        assertEquals(2, store.get("orders").orElseThrow().epoch());
        assertEquals(5, records.unauthenticated());
        // a signature is bound to its key: the same value signed for another group fails here
        records.handle("orders", plan2, sign(KEY_A, "billing", plan2), "p@7");
        assertEquals(6, records.unauthenticated());
        // a tombstone signed for another incarnation or epoch than its headers say fails
        records.handle("orders", null, tombstone(KEY_A, "orders", "uid-9", 2), bytes("uid-1"), bytes("2"), "p@8");
        assertEquals(7, records.unauthenticated());
        // an authentic tombstone of the plan's incarnation deletes
        records.handle("orders", null, tombstone(KEY_A, "orders", "uid-1", 2), bytes("uid-1"), bytes("2"), "p@9");
        assertTrue(store.get("orders").isEmpty());
        assertEquals(0, records.refused());
    }

    private static byte[] tombstone(String secret, String key, String incarnation, long epoch) {
        return bytes(PlanKeys.SCHEME + HexFormat.of().formatHex(
            PlanKeys.tombstoneMac(bytes(secret), key, incarnation, epoch)));
    }

    @Test
    void theTombstoneSignatureMatchesTheOperatorsEncoderByteForByte() {
        // kafka_rebalance_common.wire.plan_record.sign_tombstone(
        //     b"key-a-0123456789abcdef", "orders", "3f0c1a52-uid", 7)
        assertEquals("hmac-sha256:53ead61ec16f6953e1fe7f3fed772f8da4582b1c9bd0596622e76e438e77b13d",
            new String(tombstone(KEY_A, "orders", "3f0c1a52-uid", 7), StandardCharsets.US_ASCII));
    }

    @Test
    void aGroupIsBoundToOneIncarnationUntilItsTombstoneAndTombstonesDoNotReplay() throws IOException {
        PlanStore store = new PlanStore();
        PlanRecords records = records(store, keys(KEY_A));
        byte[] old1 = bytes(record("orders", "uid-1", 3, "2026-01-01T00:01:00Z", "[\"m-a\"]", "{\"a\":{\"orders\":[0]}}"));
        byte[] tomb1 = tombstone(KEY_A, "orders", "uid-1", 3);
        records.handle("orders", old1, sign(KEY_A, "orders", old1), "p@0");
        // another incarnation's plan, however new, waits for uid-1's tombstone
        byte[] new1 = bytes(record("orders", "uid-2", 1, "2026-01-01T00:02:00Z", "[\"m-a\"]", "{\"a\":{\"orders\":[1]}}"));
        records.handle("orders", new1, sign(KEY_A, "orders", new1), "p@1");
        assertEquals("uid-1", store.get("orders").orElseThrow().incarnation());
        // a tombstone of a lower epoch than the plan held does not delete it
        records.handle("orders", null, tombstone(KEY_A, "orders", "uid-1", 2), bytes("uid-1"), bytes("2"), "p@2");
        assertEquals("uid-1", store.get("orders").orElseThrow().incarnation());
        records.handle("orders", null, tomb1, bytes("uid-1"), bytes("3"), "p@3");
        assertTrue(store.get("orders").isEmpty());
        records.handle("orders", new1, sign(KEY_A, "orders", new1), "p@4");
        assertEquals("uid-2", store.get("orders").orElseThrow().incarnation());
        // replayed: uid-1's plan and its tombstone change nothing now
        records.handle("orders", old1, sign(KEY_A, "orders", old1), "p@5");
        records.handle("orders", null, tomb1, bytes("uid-1"), bytes("3"), "p@6");
        assertEquals("uid-2", store.get("orders").orElseThrow().incarnation());
        assertEquals(1, store.get("orders").orElseThrow().epoch());
        // a tombstone that names no incarnation is refused
        records.handle("orders", null, sign(KEY_A, "orders", bytes("")), "p@7");
        assertTrue(store.get("orders").isPresent());
        Map<String, Long> counted = records.refusedByReason();
        // uid-2's first plan and uid-1's replayed tombstone; uid-1's replayed plan; the low tombstone
        assertEquals(2L, counted.get("other-incarnation"), counted.toString());
        assertEquals(1L, counted.get("retired-incarnation"), counted.toString());
        assertEquals(1L, counted.get("stale-epoch"), counted.toString());
        assertEquals(1L, counted.get("tombstone-unnamed"), counted.toString());
    }

    @Test
    void aBoundPlanPastTheMaxAgeNoLongerHoldsItsGroup() {
        PlanStore store = new PlanStore(15 * 60_000, 100, 1_000);
        store.put(new Plan("orders", "uid-1", 4, "h", Instant.parse("2026-01-01T00:00:00Z").toEpochMilli(),
            Set.of("m-a"), Map.of("a", Map.of(ORDERS, Set.of(0))), Set.of()));
        Plan newer = new Plan("orders", "uid-2", 1, "h", Instant.parse("2026-01-01T00:10:00Z").toEpochMilli(),
            Set.of("m-a"), Map.of("a", Map.of(ORDERS, Set.of(1))), Set.of());
        assertEquals(PlanStore.Refusal.OTHER_INCARNATION, store.put(newer).orElseThrow().reason());
        Plan later = new Plan("orders", "uid-2", 1, "h", Instant.parse("2026-01-01T00:16:00Z").toEpochMilli(),
            Set.of("m-a"), Map.of("a", Map.of(ORDERS, Set.of(1))), Set.of());
        assertTrue(store.put(later).isEmpty(), "uid-1's plan is past the max age");
    }

    @Test
    void theStoreKeepsAtMostItsBoundsEvictingTheOldestPlans() {
        PlanStore store = new PlanStore(0, 3, 10);
        for (int i = 0; i < 5; i++) {
            store.put(new Plan("g" + i, "uid", 1, "h", 1_000L * i, Set.of("m"),
                Map.of("a", Map.of(ORDERS, Set.of(0, 1))), Set.of()));
        }
        assertEquals(3, store.size());
        assertEquals(2, store.evictions());
        assertTrue(store.get("g0").isEmpty() && store.get("g1").isEmpty() && store.get("g4").isPresent());
        // one plan of 9 partitions: the total bound of 10 leaves room for it alone
        store.put(new Plan("big", "uid", 1, "h", 9_000L, Set.of("m"),
            Map.of("a", Map.of(ORDERS, Set.of(0, 1, 2, 3, 4, 5, 6, 7, 8))), Set.of()));
        assertEquals(Set.of("big"), Set.of(store.get("big").orElseThrow().group()));
        assertEquals(1, store.size());
        assertEquals(9, store.partitions());
        assertEquals(5, store.evictions());
    }

    @Test
    void aKeyFileWithAShortKeyOrNoKeyIsRefused() throws IOException {
        assertThrows(IllegalArgumentException.class, () -> keys("short"));
        assertThrows(IllegalArgumentException.class, () -> keys("# nothing", ""));
    }

    @Test
    void aLowerEpochNeverReplacesAHigherOneWithinAnIncarnation() {
        PlanStore store = new PlanStore();
        PlanRecords records = records(store, PlanKeys.none());
        records.handle("orders", bytes(record("orders", "uid-1", 5, "2026-01-01T00:05:00Z", "[]", "{\"a\":{\"orders\":[0]}}")), "p@0");
        records.handle("orders", bytes(record("orders", "uid-1", 4, "2026-01-01T00:06:00Z", "[]", "{\"a\":{\"orders\":[1]}}")), "p@1");
        assertEquals(5, store.get("orders").orElseThrow().epoch());
        assertEquals(1, records.stale());
        // the same epoch again (the operator's refresh) is taken
        records.handle("orders", bytes(record("orders", "uid-1", 5, "2026-01-01T00:07:00Z", "[]", "{\"a\":{\"orders\":[0]}}")), "p@2");
        assertEquals(Instant.parse("2026-01-01T00:07:00Z").toEpochMilli(), store.get("orders").orElseThrow().generatedAtMs());
        // a new incarnation (policy deleted and created again) starts over at epoch 1 once the old
        // one's tombstone has retired it ...
        records.handle("orders", null, null, bytes("uid-1"), bytes("5"), "p@3");
        records.handle("orders", bytes(record("orders", "uid-2", 1, "2026-01-01T00:08:00Z", "[]", "{\"a\":{\"orders\":[2]}}")), "p@4");
        assertEquals("uid-2", store.get("orders").orElseThrow().incarnation());
        // ... and an older incarnation's record replayed after it does not come back
        records.handle("orders", bytes(record("orders", "uid-1", 9, "2026-01-01T00:07:30Z", "[]", "{\"a\":{\"orders\":[3]}}")), "p@5");
        assertEquals("uid-2", store.get("orders").orElseThrow().incarnation());
        assertEquals(2, records.stale());
    }

    @Test
    void theGroupFollowsItsOwnPlanNotAnotherGroupsPlanNamingItsInstanceIds() {
        PlanStore store = new PlanStore();
        PlanRecords records = records(store, PlanKeys.none());
        records.handle("orders", bytes(record("orders", "uid-1", 3, "2026-01-01T00:09:00Z", "[\"m-a\",\"m-b\"]",
            "{\"consumer-0\":{\"orders\":\"0-4\"},\"consumer-1\":{\"orders\":\"5\"}}")), "p@0");
        records.handle("billing", bytes(record("billing", "uid-9", 8, "2026-01-01T00:09:30Z", "[\"x-1\",\"x-2\"]",
            "{\"consumer-0\":{\"orders\":\"5\"},\"consumer-1\":{\"orders\":\"0-4\"}}")), "p@1");
        PlanFollowingAssignor assignor = new PlanFollowingAssignor(store, NOW, PluginConfig.DEFAULT_MAX_AGE_MS);
        PlanFollowingAssignorTest.Spec orders = new PlanFollowingAssignorTest.Spec()
            .add("m-a", "consumer-0").add("m-b", "consumer-1");
        GroupAssignment result = assignor.assign(orders, PlanFollowingAssignorTest.topics(Map.of(ORDERS, 6)));
        assertEquals(Set.of(0, 1, 2, 3, 4), PlanFollowingAssignorTest.owned(result, "m-a", ORDERS));
        assertEquals(Set.of(5), PlanFollowingAssignorTest.owned(result, "m-b", ORDERS));
        // one member restarted (a new member id): still this group's plan
        PlanFollowingAssignorTest.Spec restarted = new PlanFollowingAssignorTest.Spec()
            .add("m-a2", "consumer-0").add("m-b", "consumer-1");
        result = assignor.assign(restarted, PlanFollowingAssignorTest.topics(Map.of(ORDERS, 6)));
        assertEquals(Set.of(0, 1, 2, 3, 4), PlanFollowingAssignorTest.owned(result, "m-a2", ORDERS));
        // the billing group follows billing's plan
        PlanFollowingAssignorTest.Spec billing = new PlanFollowingAssignorTest.Spec()
            .add("x-1", "consumer-0").add("x-2", "consumer-1");
        result = assignor.assign(billing, PlanFollowingAssignorTest.topics(Map.of(ORDERS, 6)));
        assertEquals(Set.of(5), PlanFollowingAssignorTest.owned(result, "x-1", ORDERS));
        // a group none of whose member ids any plan knows falls back
        PlanStore.Selection none = store.select(List.of("consumer-0"), List.of("q-1"));
        assertTrue(none.plan().isEmpty());
        assertTrue(none.reason().contains("[billing, orders]"), none.reason());
    }

    @Test
    void plansExpireByDefault() {
        PlanStore store = new PlanStore();
        store.put(new Plan("orders", "uid", 1, "h", Instant.parse("2026-01-01T00:10:00Z").minusSeconds(16 * 60).toEpochMilli(),
            Set.of("m-a"), Map.of("orders-0", Map.of(ORDERS, Set.of(0, 1, 2, 3))), Set.of()));
        PlanFollowingAssignorTest.Spec spec = new PlanFollowingAssignorTest.Spec().add("m-a", "orders-0").add("m-b", "orders-1");
        GroupAssignment result = new PlanFollowingAssignor(store, NOW, PluginConfig.from(Map.of()).maxAgeMs())
            .assign(spec, PlanFollowingAssignorTest.topics(Map.of(ORDERS, 4)));
        assertEquals(2, PlanFollowingAssignorTest.owned(result, "m-a", ORDERS).size(), "16 minutes old: fallback");
        assertNotNull(store.get("orders").orElse(null));
        assertNull(PluginConfig.from(Map.of()).keysFile().isEmpty() ? null : "keys");
    }
}
