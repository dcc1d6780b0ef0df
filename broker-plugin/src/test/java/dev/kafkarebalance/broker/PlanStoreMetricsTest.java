package dev.kafkarebalance.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import javax.management.AttributeNotFoundException;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.Uuid;
import org.junit.jupiter.api.Test;

/** The plan store's counters, read through the platform MBean server as a JMX client reads them. */
class PlanStoreMetricsTest {
    private static final Uuid ORDERS = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAA");
    private static final MBeanServer SERVER = ManagementFactory.getPlatformMBeanServer();

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static byte[] plan(String group, String incarnation, long epoch, String generatedAt) {
        return bytes(PlanTrustTest.record(group, incarnation, epoch, generatedAt, "[\"m-a\"]",
            "{\"a\":{\"orders\":[0,1]}}"));
    }

    private static long read(ObjectName name, String attribute) throws Exception {
        return (Long) SERVER.getAttribute(name, attribute);
    }

    @Test
    void refusalsPerReasonEvictionsAndPlansHeldAreReadThroughJmx() throws Exception {
        PlanStore store = new PlanStore(0, 2, 1_000);
        PlanRecords records = new PlanRecords(store, PlanBounds.DEFAULT, name -> Optional.of(ORDERS));
        ObjectName name = PlanStoreMetrics.register(store, "plans-metrics-test");
        assertNotNull(name);
        try {
            assertEquals(new ObjectName("kafka.rebalance:type=PlanStore,topic=plans-metrics-test"), name);
            // every known reason shows before it happens, at 0
            Set<String> attributes = Set.copyOf(Arrays.stream(SERVER.getMBeanInfo(name).getAttributes())
                .map(MBeanAttributeInfo::getName).toList());
            for (String reason : RefusalCounts.KNOWN) {
                assertTrue(attributes.contains("refused-" + reason + "-total"), attributes.toString());
                assertEquals(0L, read(name, "refused-" + reason + "-total"));
            }
            records.handle("orders", plan("orders", "uid-1", 4, "2026-01-01T00:01:00Z"), "p@0");
            records.handle("orders", plan("orders", "uid-1", 3, "2026-01-01T00:02:00Z"), "p@1"); // stale-epoch
            records.handle("orders", plan("orders", "uid-2", 9, "2026-01-01T00:03:00Z"), "p@2"); // other-incarnation
            records.handle("orders", plan("orders", "uid-2", 9, "2026-01-01T00:03:00Z"), "p@3"); // other-incarnation
            records.handle("orders", bytes("{not json"), "p@4"); // malformed (drops the plan)
            records.handle(null, plan("x", "uid", 1, "2026-01-01T00:04:00Z"), "p@5"); // no-key
            records.handle("orders", null, "p@6"); // tombstone-unnamed
            for (int i = 0; i < 3; i++) { // a bound of two groups: the oldest one is evicted
                records.handle("g" + i, plan("g" + i, "uid", 1, "2026-01-01T00:1" + i + ":00Z"), "q@" + i);
            }
            assertEquals(1L, read(name, "refused-stale-epoch-total"));
            assertEquals(2L, read(name, "refused-other-incarnation-total"));
            assertEquals(1L, read(name, "refused-malformed-total"));
            assertEquals(1L, read(name, "refused-no-key-total"));
            assertEquals(1L, read(name, "refused-tombstone-unnamed-total"));
            assertEquals(0L, read(name, "refused-unauthenticated-total"));
            assertEquals(6L, read(name, "refused-total"));
            assertEquals(1L, read(name, "evictions-total"));
            assertEquals(2L, read(name, "plans-held"));
            assertEquals(4L, read(name, "planned-partitions"));
            assertEquals(records.refusedByReason(), store.refusals().counted());
            assertThrows(AttributeNotFoundException.class, () -> SERVER.getAttribute(name, "refused-"));
        } finally {
            PlanStoreMetrics.unregister(name);
        }
        assertFalse(SERVER.isRegistered(name));
    }

    @Test
    void aSecondStoreReadingTheSameTopicGetsItsOwnName() throws Exception {
        PlanStore first = new PlanStore();
        PlanStore second = new PlanStore();
        ObjectName a = PlanStoreMetrics.register(first, "plans-twice");
        ObjectName b = PlanStoreMetrics.register(second, "plans-twice");
        try {
            assertEquals(new ObjectName("kafka.rebalance:type=PlanStore,topic=plans-twice,reader=1"), b);
            second.refusals().increment("stale-epoch");
            assertEquals(0L, read(a, "refused-stale-epoch-total"));
            assertEquals(1L, read(b, "refused-stale-epoch-total"));
        } finally {
            PlanStoreMetrics.unregister(a);
            PlanStoreMetrics.unregister(b);
        }
    }

    @Test
    void aReasonNotKnownAheadShowsOnceCounted() {
        RefusalCounts counts = new RefusalCounts();
        counts.increment("something-new");
        Map<String, Long> all = counts.all();
        assertEquals(1L, all.get("something-new"));
        assertEquals(0L, all.get("stale-epoch"));
        assertEquals(Map.of("something-new", 1L), counts.counted());
        assertEquals(1L, counts.total());
    }
}
