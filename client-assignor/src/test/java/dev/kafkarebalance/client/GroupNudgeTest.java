package dev.kafkarebalance.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The nudge member connects as the consumer does but is never taken for it. */
class GroupNudgeTest {
    @Test
    void theNudgeKeepsConnectionSettingsAndDropsTheMembersIdentity() {
        Map<String, Object> settings = GroupNudge.settings(Map.of(
            "bootstrap.servers", "b:9092", "group.id", "g", "group.instance.id", "orders-0",
            "client.id", "orders-0", "security.protocol", "SASL_SSL", "interceptor.classes", "x.Y",
            "group.protocol", "consumer", PlanFollowingAssignor.DOCUMENT_PATH, "/etc/doc.json"));
        assertEquals("b:9092", settings.get("bootstrap.servers"));
        assertEquals("g", settings.get("group.id"));
        assertEquals("SASL_SSL", settings.get("security.protocol"));
        assertEquals("orders-0-rebalance-nudge", settings.get("client.id"));
        assertEquals("classic", settings.get("group.protocol"));
        assertEquals(PlanFollowingAssignor.ROLE_NUDGE, settings.get(PlanFollowingAssignor.ROLE));
        assertFalse(settings.containsKey("group.instance.id"));
        assertFalse(settings.containsKey("interceptor.classes"));
        assertFalse(settings.containsKey(PlanFollowingAssignor.DOCUMENT_PATH));
    }
}
