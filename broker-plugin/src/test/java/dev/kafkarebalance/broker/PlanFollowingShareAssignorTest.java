package dev.kafkarebalance.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.BiPredicate;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.junit.jupiter.api.Test;

/** The share assignor as a pure function of (GroupSpec, topics, cached plans): hand-built specs. */
class PlanFollowingShareAssignorTest {
    private static final Uuid JOBS = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAA");
    private static final Uuid AUDIT = Uuid.fromString("BBBBBBBBBBBBBBBBBBBBBA");
    private static final Clock NOW = Clock.fixed(Instant.parse("2026-01-01T00:10:00Z"), ZoneOffset.UTC);
    private static final SubscribedTopicDescriber TOPICS = topics(Map.of(JOBS, 4, AUDIT, 2));

    record Member(String rack, Set<Uuid> topics, Map<Uuid, Set<Integer>> current) {
    }

    static final class Spec implements GroupSpec {
        final Map<String, Member> members = new TreeMap<>();
        BiPredicate<Uuid, Integer> assignable = (t, p) -> true;

        Spec add(String memberId, Set<Uuid> topics, Map<Uuid, Set<Integer>> current) {
            members.put(memberId, new Member(null, topics, current));
            return this;
        }

        Spec add(String memberId) {
            return add(memberId, Set.of(JOBS), Map.of());
        }

        Spec trigger(String memberId) {
            members.put(memberId, new Member(PlanFollowingShareAssignor.TRIGGER_RACK, Set.of(JOBS), Map.of()));
            return this;
        }

        @Override
        public Collection<String> memberIds() {
            return members.keySet();
        }

        @Override
        public SubscriptionType subscriptionType() {
            return members.values().stream().map(Member::topics).distinct().count() <= 1
                ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
        }

        @Override
        public boolean isPartitionAssigned(Uuid topicId, int partitionId) {
            return members.values().stream().anyMatch(m -> m.current.getOrDefault(topicId, Set.of()).contains(partitionId));
        }

        @Override
        public boolean isPartitionAssignable(Uuid topicId, int partitionId) {
            return assignable.test(topicId, partitionId);
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
                    return Optional.ofNullable(m.rack);
                }

                @Override
                public Optional<String> instanceId() {
                    return Optional.empty();
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

    static Plan plan(String group, Map<String, Map<Uuid, Set<Integer>>> members) {
        return Plan.share(group, "uid-" + group, 3, "h", Instant.parse("2026-01-01T00:00:00Z").toEpochMilli(),
            members.keySet(), members, Set.of());
    }

    static PlanFollowingShareAssignor assignor(PlanStore store) {
        return new PlanFollowingShareAssignor(store, NOW, 0);
    }

    static Map<String, Map<Uuid, Set<Integer>>> result(GroupAssignment assignment) {
        Map<String, Map<Uuid, Set<Integer>>> out = new TreeMap<>();
        assignment.members().forEach((member, parts) -> {
            Map<Uuid, Set<Integer>> topics = new HashMap<>();
            parts.partitions().forEach((topic, partitions) -> {
                if (!partitions.isEmpty()) {
                    topics.put(topic, new TreeSet<>(partitions));
                }
            });
            out.put(member, topics);
        });
        return out;
    }

    static Set<String> holders(GroupAssignment assignment, Uuid topic, int partition) {
        Set<String> out = new TreeSet<>();
        assignment.members().forEach((member, parts) -> {
            if (parts.partitions().getOrDefault(topic, Set.of()).contains(partition)) {
                out.add(member);
            }
        });
        return out;
    }

    @Test
    void withoutAPlanTheGroupGetsExactlyWhatSimpleGives() {
        Spec[] specs = {
            new Spec().add("m1").add("m2").add("m3"),
            new Spec().add("m1").add("m2").add("m3").add("m4").add("m5").add("m6"),
            new Spec().add("m1", Set.of(JOBS, AUDIT), Map.of(JOBS, Set.of(0, 1))).add("m2", Set.of(AUDIT), Map.of()),
        };
        for (Spec spec : specs) {
            GroupAssignment expected = new SimpleAssignor().assign(spec, TOPICS);
            assertEquals(result(expected), result(assignor(new PlanStore()).assign(spec, TOPICS)));
        }
    }

    @Test
    void aPublishedPlanIsFollowedWithSeveralMembersOnTheHotPartition() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of(
            "m1", Map.of(JOBS, Set.of(0)),
            "m2", Map.of(JOBS, Set.of(0, 1)),
            "m3", Map.of(JOBS, Set.of(0, 2, 3)))));
        Spec spec = new Spec().add("m1").add("m2").add("m3");
        GroupAssignment got = assignor(store).assign(spec, TOPICS);
        assertEquals(Set.of("m1", "m2", "m3"), holders(got, JOBS, 0));
        assertEquals(Map.of(JOBS, Set.of(0, 2, 3)), result(got).get("m3"));
        // simple: one member per partition while members <= partitions
        assertEquals(1, holders(new SimpleAssignor().assign(spec, TOPICS), JOBS, 0).size());
    }

    @Test
    void partitionsNotYetAssignableAreNeverPlacedEvenWhenPlanned() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 3)), "m2", Map.of(JOBS, Set.of(0, 1, 2)))));
        Spec spec = new Spec().add("m1").add("m2");
        spec.assignable = (topic, partition) -> partition != 3;  // not initialized in the share coordinator
        GroupAssignment got = assignor(store).assign(spec, TOPICS);
        assertEquals(Set.of(), holders(got, JOBS, 3));
        assertEquals(Set.of("m1", "m2"), holders(got, JOBS, 0));
    }

    @Test
    void unsubscribedAndOutOfRangePlannedPartitionsAreDroppedAndEveryPartitionIsCovered() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 9), AUDIT, Set.of(0)), "gone", Map.of(JOBS, Set.of(1, 2, 3)))));
        Spec spec = new Spec().add("m1").add("m2");
        GroupAssignment got = assignor(store).assign(spec, TOPICS);
        assertEquals(Set.of(), holders(got, AUDIT, 0));  // nobody subscribes to audit
        for (int p = 0; p < 4; p++) {
            assertTrue(!holders(got, JOBS, p).isEmpty(), "partition " + p + " has no member");
        }
        assertTrue(result(got).get("m1").get(JOBS).contains(0));
        assertEquals(2, result(got).get("m2").get(JOBS).size());  // the gone member's three, spread by count
    }

    @Test
    void aMemberTheGoneMembersPartitionsWereWithKeepsThemFirst() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 1)), "m2", Map.of(JOBS, Set.of(0)),
            "gone", Map.of(JOBS, Set.of(2, 3)))));
        Spec spec = new Spec().add("m1").add("m2", Set.of(JOBS), Map.of(JOBS, Set.of(3)));
        GroupAssignment got = assignor(store).assign(spec, TOPICS);
        assertEquals(Set.of("m2"), holders(got, JOBS, 3));  // its current holder
        assertEquals(Set.of("m2"), holders(got, JOBS, 2));  // m2 held fewest (1 against 2)
    }

    @Test
    void aMemberJoinedSinceThePlanTakesTheLeastSharedPartition() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 1)), "m2", Map.of(JOBS, Set.of(0, 2, 3)))));
        Spec spec = new Spec().add("m1").add("m2").add("m9");
        GroupAssignment got = assignor(store).assign(spec, TOPICS);
        assertEquals(Map.of(JOBS, Set.of(1)), result(got).get("m9"));
    }

    @Test
    void theTriggerMemberGetsNothingAndIsHiddenFromSimple() {
        Spec withTrigger = new Spec().add("m1").add("m2").trigger("zz-trigger");
        Spec without = new Spec().add("m1").add("m2");
        GroupAssignment got = assignor(new PlanStore()).assign(withTrigger, TOPICS);
        assertEquals(Map.of(), result(got).get("zz-trigger"));
        Map<String, Map<Uuid, Set<Integer>>> others = result(got);
        others.remove("zz-trigger");
        assertEquals(result(new SimpleAssignor().assign(without, TOPICS)), others);

        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 1)), "m2", Map.of(JOBS, Set.of(0, 2, 3)))));
        GroupAssignment planned = assignor(store).assign(withTrigger, TOPICS);
        assertEquals(Map.of(), result(planned).get("zz-trigger"));
        assertEquals(Set.of("m1", "m2"), holders(planned, JOBS, 0));
    }

    @Test
    void aConsumerPlanNamingTheMembersIsNotFollowed() {
        PlanStore store = new PlanStore();
        store.put(new Plan("jobs", "uid", 1, "h", 0, Set.of("m1"), Map.of("m1", Map.of(JOBS, Set.of(0, 1, 2, 3))), Set.of()));
        Spec spec = new Spec().add("m1").add("m2");
        assertEquals(result(new SimpleAssignor().assign(spec, TOPICS)), result(assignor(store).assign(spec, TOPICS)));
        assertTrue(store.selectShare(Set.of("m1", "m2")).reason().contains("of kind 'consumer'"));
    }

    @Test
    void aStalePlanGivesSimple() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 1, 2, 3)), "m2", Map.of(JOBS, Set.of(0)))));
        Spec spec = new Spec().add("m1").add("m2");
        PlanFollowingShareAssignor strict = new PlanFollowingShareAssignor(store, NOW, 60_000);  // plan is 10 min old
        assertEquals(result(new SimpleAssignor().assign(spec, TOPICS)), result(strict.assign(spec, TOPICS)));
    }

    @Test
    void sharePlansMayPlanAPartitionForSeveralMembersOtherKindsMayNot() throws Exception {
        String share = "{\"version\":2,\"kind\":\"share\",\"group\":\"g\",\"epoch\":1,"
            + "\"members\":{\"a\":{\"t\":[0,1]},\"b\":{\"t\":\"0-1\"}}}";
        PlanDocument doc = PlanCodec.decode("g", share.getBytes(StandardCharsets.UTF_8));
        assertEquals(PlanKind.SHARE, doc.kind());
        assertEquals(Set.of(0, 1), doc.members().get("b").get("t"));
        String consumer = share.replace("\"kind\":\"share\",", "");
        PlanFormatException e = assertThrows(PlanFormatException.class,
            () -> PlanCodec.decode("g", consumer.getBytes(StandardCharsets.UTF_8)));
        assertTrue(e.getMessage().contains("also planned"), e.getMessage());
    }

    @Test
    void aSharePlanRecordIsResolvedAndStoredAsAShareKindPlan() {
        PlanStore store = new PlanStore();
        PlanRecords records = new PlanRecords(store, PlanBounds.DEFAULT, name -> Optional.of(JOBS));
        String value = "{\"version\":2,\"kind\":\"share\",\"group\":\"g\",\"epoch\":4,\"memberIds\":[\"a\",\"b\"],"
            + "\"members\":{\"a\":{\"jobs\":[0]},\"b\":{\"jobs\":[0,1]}}}";
        records.handle("g", value.getBytes(StandardCharsets.UTF_8), "t-0@0");
        Plan plan = store.selectShare(Set.of("b")).plan().orElseThrow();
        assertEquals(PlanKind.SHARE, plan.kind());
        assertEquals(Set.of(0, 1), plan.members().get("b").get(JOBS));
        assertTrue(store.select(new HashSet<>(Set.of("a")), Set.of("a")).plan().isEmpty());
        assertTrue(store.selectStreams(Set.of("a")).plan().isEmpty());
        assertEquals(3, PlanStore.size(plan));
    }

    @Test
    void plansOfTwoGroupsNamingTheMembersAreNotFollowed() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 1, 2, 3)), "m2", Map.of(JOBS, Set.of(0)))));
        store.put(plan("other", Map.of("m2", Map.of(JOBS, Set.of(0, 1, 2, 3)))));
        Spec spec = new Spec().add("m1").add("m2");
        assertEquals(result(new SimpleAssignor().assign(spec, TOPICS)), result(assignor(store).assign(spec, TOPICS)));
        assertTrue(store.selectShare(Set.of("m1", "m2")).reason().contains("several groups"));
    }

    @Test
    void aGroupWithNoInitializedPartitionGetsNothingFromThePlan() {
        PlanStore store = new PlanStore();
        store.put(plan("jobs", Map.of("m1", Map.of(JOBS, Set.of(0, 1)), "m2", Map.of(JOBS, Set.of(2, 3)))));
        Spec spec = new Spec().add("m1").add("m2");
        spec.assignable = (topic, partition) -> false;  // the coordinator passes an empty initialized map
        GroupAssignment got = assignor(store).assign(spec, TOPICS);
        assertEquals(Map.of("m1", Map.of(), "m2", Map.of()), result(got));
    }
}
