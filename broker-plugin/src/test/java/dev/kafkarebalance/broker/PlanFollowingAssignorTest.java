package dev.kafkarebalance.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.junit.jupiter.api.Test;

/** The assignor as a pure function of (GroupSpec, topics, cached plans): hand-built specs. */
class PlanFollowingAssignorTest {
    private static final Uuid ORDERS = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAA");
    private static final Uuid AUDIT = Uuid.fromString("BBBBBBBBBBBBBBBBBBBBBA");
    private static final Clock NOW = Clock.fixed(Instant.parse("2026-01-01T00:10:00Z"), ZoneOffset.UTC);

    record Member(String instance, Set<Uuid> topics, Map<Uuid, Set<Integer>> current) {
    }

    static final class Spec implements GroupSpec {
        final Map<String, Member> members = new HashMap<>();

        Spec add(String memberId, String instance, Set<Uuid> topics, Map<Uuid, Set<Integer>> current) {
            members.put(memberId, new Member(instance, topics, current));
            return this;
        }

        Spec add(String memberId, String instance) {
            return add(memberId, instance, Set.of(ORDERS), Map.of());
        }

        @Override
        public Collection<String> memberIds() {
            return members.keySet();
        }

        @Override
        public SubscriptionType subscriptionType() {
            return SubscriptionType.HOMOGENEOUS;
        }

        @Override
        public boolean isPartitionAssigned(Uuid topicId, int partitionId) {
            return members.values().stream().anyMatch(m -> m.current.getOrDefault(topicId, Set.of()).contains(partitionId));
        }

        @Override
        public boolean isPartitionAssignable(Uuid topicId, int partitionId) {
            return true;
        }

        @Override
        public MemberSubscription memberSubscription(String memberId) {
            Member m = members.get(memberId);
            if (m == null) {
                throw new IllegalArgumentException(memberId);
            }
            return new MemberSubscription() {
                @Override
                public Optional<String> rackId() {
                    return Optional.empty();
                }

                @Override
                public Optional<String> instanceId() {
                    return Optional.ofNullable(m.instance);
                }

                @Override
                public Set<Uuid> subscribedTopicIds() {
                    return m.topics;
                }
            };
        }

        @Override
        public MemberAssignment memberAssignment(String memberId) {
            return new PlannedAssignment(members.get(memberId).current);
        }
    }

    static SubscribedTopicDescriber topics(Map<Uuid, Integer> counts) {
        return new SubscribedTopicDescriber() {
            @Override
            public int numPartitions(Uuid topicId) {
                return counts.getOrDefault(topicId, -1);
            }

            @Override
            public Set<String> racksForPartition(Uuid topicId, int partition) {
                return Set.of();
            }
        };
    }

    /** A plan naming the member ids these tests' groups use (a plan names its members, always). */
    static Plan plan(String group, Map<String, Map<Uuid, Set<Integer>>> members) {
        return new Plan(group, "uid-" + group, 7, "h", Instant.parse("2026-01-01T00:00:00Z").toEpochMilli(),
            Set.of("m-a", "m-b", "m-c", "m-new", "m-dyn"), members, Set.of());
    }

    static PlanFollowingAssignor assignor(PlanStore store, long maxAgeMs) {
        return new PlanFollowingAssignor(store, NOW, maxAgeMs);
    }

    static Set<Integer> owned(GroupAssignment result, String member, Uuid topic) {
        return new TreeSet<>(result.members().get(member).partitions().getOrDefault(topic, Set.of()));
    }

    static void assertExactlyOnce(GroupAssignment result, Uuid topic, int count) {
        List<Integer> all = new ArrayList<>();
        result.members().values().forEach(a -> all.addAll(a.partitions().getOrDefault(topic, Set.of())));
        assertEquals(count, all.size(), "each partition once: " + result);
        assertEquals(count, new HashSet<>(all).size(), "no partition twice: " + result);
    }

    @Test
    void membersFollowThePlanByInstanceIdEvenWhenUnbalanced() {
        PlanStore store = new PlanStore();
        store.put(plan("orders", Map.of(
            "orders-0", Map.of(ORDERS, Set.of(0)),
            "orders-1", Map.of(ORDERS, Set.of(1, 2, 3, 4)),
            "orders-2", Map.of(ORDERS, Set.of(5)))));
        Spec spec = new Spec().add("m-a", "orders-0").add("m-b", "orders-1").add("m-c", "orders-2");
        GroupAssignment result = assignor(store, 0).assign(spec, topics(Map.of(ORDERS, 6)));
        assertEquals(Set.of(0), owned(result, "m-a", ORDERS));
        assertEquals(Set.of(1, 2, 3, 4), owned(result, "m-b", ORDERS));
        assertEquals(Set.of(5), owned(result, "m-c", ORDERS));
    }

    @Test
    void partitionsOfAnAbsentPlannedMemberAndNewPartitionsFallBackToTheLightMembers() {
        PlanStore store = new PlanStore();
        store.put(plan("orders", Map.of(
            "orders-0", Map.of(ORDERS, Set.of(0, 1, 2)),
            "orders-1", Map.of(ORDERS, Set.of(3)),
            "orders-9", Map.of(ORDERS, Set.of(4, 5)))));
        Spec spec = new Spec().add("m-a", "orders-0").add("m-b", "orders-1").add("m-new", "orders-3");
        GroupAssignment result = assignor(store, 0).assign(spec, topics(Map.of(ORDERS, 8)));
        assertEquals(Set.of(0, 1, 2), owned(result, "m-a", ORDERS));
        assertTrue(owned(result, "m-b", ORDERS).contains(3));
        assertExactlyOnce(result, ORDERS, 8);
        // 4,5 (orders-9 is gone) and the new 6,7 go to the members the plan left light
        assertEquals(Set.of(3, 5, 7), owned(result, "m-b", ORDERS));
        assertEquals(Set.of(4, 6), owned(result, "m-new", ORDERS));
    }

    @Test
    void withoutAPlanTheFallbackIsBalancedAndKeepsCurrentOwners() {
        Spec spec = new Spec()
            .add("m-a", "x-0", Set.of(ORDERS), Map.of(ORDERS, Set.of(0, 1, 2, 3, 4, 5)))
            .add("m-b", "x-1", Set.of(ORDERS), Map.of())
            .add("m-c", "x-2", Set.of(ORDERS), Map.of());
        GroupAssignment result = assignor(new PlanStore(), 0).assign(spec, topics(Map.of(ORDERS, 6)));
        assertExactlyOnce(result, ORDERS, 6);
        assertEquals(Set.of(0, 1), owned(result, "m-a", ORDERS), "keeps its first two (quota 2)");
        assertEquals(2, owned(result, "m-b", ORDERS).size());
        assertEquals(2, owned(result, "m-c", ORDERS).size());
    }

    @Test
    void aStalePlanIsNotFollowed() {
        PlanStore store = new PlanStore();
        store.put(plan("orders", Map.of("orders-0", Map.of(ORDERS, Set.of(0, 1, 2, 3)), "orders-1", Map.of())));
        Spec spec = new Spec().add("m-a", "orders-0").add("m-b", "orders-1");
        GroupAssignment fresh = assignor(store, 3_600_000).assign(spec, topics(Map.of(ORDERS, 4)));
        assertEquals(Set.of(0, 1, 2, 3), owned(fresh, "m-a", ORDERS));
        GroupAssignment stale = assignor(store, 60_000).assign(spec, topics(Map.of(ORDERS, 4)));  // plan is 10 min old
        assertEquals(2, owned(stale, "m-a", ORDERS).size());
        assertEquals(2, owned(stale, "m-b", ORDERS).size());
    }

    @Test
    void planEntriesForUnsubscribedTopicsOrMissingPartitionsAreIgnored() {
        PlanStore store = new PlanStore();
        store.put(plan("orders", Map.of(
            "orders-0", Map.of(ORDERS, Set.of(0, 1, 9), AUDIT, Set.of(0)),
            "orders-1", Map.of())));
        Spec spec = new Spec().add("m-a", "orders-0").add("m-b", "orders-1");
        GroupAssignment result = assignor(store, 0).assign(spec, topics(Map.of(ORDERS, 4, AUDIT, 1)));
        assertEquals(Set.of(0, 1), owned(result, "m-a", ORDERS));
        assertEquals(Set.of(), owned(result, "m-a", AUDIT), "not subscribed: not given");
        assertEquals(Set.of(2, 3), owned(result, "m-b", ORDERS));
        assertExactlyOnce(result, ORDERS, 4);
    }

    @Test
    void instanceIdsNamedByTwoGroupsPlansAreAmbiguousAndFallBack() {
        PlanStore store = new PlanStore();
        store.put(plan("orders", Map.of("worker-0", Map.of(ORDERS, Set.of(0, 1, 2, 3)))));
        store.put(plan("billing", Map.of("worker-0", Map.of(ORDERS, Set.of(0)))));
        Spec spec = new Spec().add("m-a", "worker-0").add("m-b", "worker-1");
        GroupAssignment result = assignor(store, 0).assign(spec, topics(Map.of(ORDERS, 4)));
        assertEquals(2, owned(result, "m-a", ORDERS).size());
        assertEquals(2, owned(result, "m-b", ORDERS).size());
    }

    @Test
    void aPlanThatNamesNoMemberIdsIsNeverFollowed() {
        PlanStore store = new PlanStore();
        store.put(new Plan("orders", 7, "h", Instant.parse("2026-01-01T00:00:00Z").toEpochMilli(),
            Map.of("orders-0", Map.of(ORDERS, Set.of(0, 1, 2, 3))), Set.of()));
        Spec spec = new Spec().add("m-a", "orders-0").add("m-b", "orders-1");
        GroupAssignment result = assignor(store, 0).assign(spec, topics(Map.of(ORDERS, 4)));
        assertEquals(2, owned(result, "m-a", ORDERS).size(), "the fallback, not the plan");
        assertTrue(store.select(List.of("orders-0"), List.of("m-a")).plan().isEmpty());
    }

    @Test
    void membersWithoutInstanceIdsGetOnlyFallbackPartitions() {
        PlanStore store = new PlanStore();
        store.put(plan("orders", Map.of("orders-0", Map.of(ORDERS, Set.of(0)))));
        Spec spec = new Spec().add("m-a", "orders-0").add("m-dyn", null);
        GroupAssignment result = assignor(store, 0).assign(spec, topics(Map.of(ORDERS, 3)));
        assertExactlyOnce(result, ORDERS, 3);
        // 1 and 2 are the fallback's: the lighter member first, ties to the smaller member id
        assertEquals(Set.of(0, 2), owned(result, "m-a", ORDERS));
        assertEquals(Set.of(1), owned(result, "m-dyn", ORDERS));
    }

    @Test
    void codecReadsListsAndRangeStringsAndRefusesBadPlansNamingTheField() throws Exception {
        PlanDocument doc = PlanCodec.decode("orders", bytes(
            "{\"group\":\"orders\",\"epoch\":3,\"generatedAt\":\"2026-01-01T00:00:00Z\","
                + "\"members\":{\"orders-0\":{\"orders\":[0,2]},\"orders-1\":{\"orders\":\"1,3-5\"}}}"));
        assertEquals(3, doc.epoch());
        assertEquals(Set.of(0, 2), doc.members().get("orders-0").get("orders"));
        assertEquals(Set.of(1, 3, 4, 5), doc.members().get("orders-1").get("orders"));
        assertRefused("not JSON", "orders", "{nope");
        assertRefused("published under key", "billing", "{\"group\":\"orders\",\"epoch\":1,\"members\":{}}");
        assertRefused("epoch", "orders", "{\"group\":\"orders\",\"members\":{}}");
        assertRefused("also planned for", "orders",
            "{\"group\":\"orders\",\"epoch\":1,\"members\":{\"a\":{\"t\":[0]},\"b\":{\"t\":\"0-1\"}}}");
        assertRefused("members.a.t", "orders", "{\"group\":\"orders\",\"epoch\":1,\"members\":{\"a\":{\"t\":[-1]}}}");
        assertRefused("version", "orders", "{\"version\":3,\"group\":\"orders\",\"epoch\":1,\"members\":{}}");
    }

    private static void assertRefused(String fragment, String key, String json) {
        PlanFormatException e = assertThrows(PlanFormatException.class, () -> PlanCodec.decode(key, bytes(json)));
        assertTrue(e.getMessage().contains(fragment), e.getMessage());
        assertTrue(!e.getMessage().contains("\n"), "one line: " + e.getMessage());
    }

    @Test
    void instancesOfOneConfigurationShareOneReaderThatStopsWithTheLast() {
        Map<String, Object> configs = Map.of(
            PluginConfig.BOOTSTRAP, "127.0.0.1:1", PluginConfig.TOPIC, "plans-shared-test");
        PlanFollowingAssignor first = new PlanFollowingAssignor();
        PlanFollowingAssignor second = new PlanFollowingAssignor();
        int before = SharedPlans.readers();
        first.configure(configs);
        second.configure(configs);
        assertEquals(before + 1, SharedPlans.readers(), "one reader for both instances");
        first.close();
        assertEquals(before + 1, SharedPlans.readers(), "still used by the second instance");
        second.close();
        assertEquals(before, SharedPlans.readers(), "stopped with the last instance");
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
