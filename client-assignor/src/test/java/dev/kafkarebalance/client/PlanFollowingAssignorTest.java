package dev.kafkarebalance.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * The assignor through Kafka's own interface: the leader composes from the members' claims (as
 * Java members or Python sidecars encode them), falls back to cooperative-sticky for the rest, and
 * moves a partition in two rounds, never giving it to one member while another still owns it.
 */
class PlanFollowingAssignorTest {
    private static final String T = "orders";

    private static Cluster cluster(int partitions) {
        List<PartitionInfo> infos = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            infos.add(new PartitionInfo(T, p, null, new Node[0], new Node[0]));
        }
        return new Cluster("c", List.of(), infos, Set.of(), Set.of());
    }

    private static ByteBuffer claim(long epoch, Integer... partitions) {
        StringBuilder text = new StringBuilder("{\"epoch\":" + epoch + ",\"partitions\":{");
        if (partitions.length > 0) {
            text.append("\"" + T + "\":").append(List.of(partitions).toString().replace(" ", ""));
        }
        return ByteBuffer.wrap(text.append("}}").toString().getBytes(StandardCharsets.US_ASCII));
    }

    /** A claim naming incarnation {@code policy}, as a member of this version sends it. */
    private static ByteBuffer claimOf(String policy, long epoch, Integer... partitions) {
        SortedMap<String, List<Integer>> parts = new TreeMap<>();
        parts.put(T, List.of(partitions));
        return ByteBuffer.wrap(UserData.encodeClaim(
            new AssignmentDocument("g", "m", epoch, parts, null, "", "", policy)));
    }

    private static Subscription member(String instance, ByteBuffer userData, Integer... owned) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p : owned) {
            tps.add(new TopicPartition(T, p));
        }
        Subscription s = new Subscription(List.of(T), userData, tps);
        s.setGroupInstanceId(Optional.ofNullable(instance));
        return s;
    }

    /** A leader that read its own document at `epoch`: the bound on the claims it trusts. */
    static PlanFollowingAssignor leaderAt(long epoch) {
        return leaderAt(epoch, "");
    }

    /** A leader whose own document is at {@code epoch} of incarnation {@code policy} ("": none). */
    static PlanFollowingAssignor leaderAt(long epoch, String policy) {
        DocumentTracker tracker = new DocumentTracker(null, null);
        tracker.offer(DocumentTrackerTest.doc("pod-leader", epoch, "", policy), "test");
        return PlanFollowingAssignor.following(tracker);
    }

    private static Map<String, List<Integer>> run(Cluster cluster, Map<String, Subscription> members) {
        return run(leaderAt(100), cluster, members);
    }

    private static Map<String, List<Integer>> run(PlanFollowingAssignor leader, Cluster cluster,
                                                  Map<String, Subscription> members) {
        Map<String, Assignment> result = leader
            .assign(cluster, new GroupSubscription(members)).groupAssignment();
        Map<String, List<Integer>> out = new TreeMap<>();
        result.forEach((m, a) -> {
            List<Integer> parts = new ArrayList<>();
            a.partitions().forEach(tp -> parts.add(tp.partition()));
            parts.sort(null);
            out.put(m, parts);
        });
        return out;
    }

    @Test
    void theHighestEpochClaimWinsAndTheLeaderSaysWhatItSaw() {
        Map<String, Subscription> members = new TreeMap<>();
        members.put("a", member("pod-a", claim(3, 0, 1, 2)));
        members.put("b", member("pod-b", claim(4, 2, 3)));
        members.put("c", member("pod-c", claim(4, 4, 5)));
        Map<String, Assignment> result = leaderAt(4)
            .assign(cluster(6), new GroupSubscription(members)).groupAssignment();
        assertEquals(List.of(new TopicPartition(T, 0), new TopicPartition(T, 1)), result.get("a").partitions());
        assertEquals(List.of(new TopicPartition(T, 2), new TopicPartition(T, 3)), result.get("b").partitions());
        assertEquals("{\"claimEpoch\":3,\"composedEpoch\":4}",
            StandardCharsets.US_ASCII.decode(result.get("a").userData()).toString());
    }

    @Test
    void aClaimAboveTheLeadersPlanEpochGetsNoExtraPartition() {
        Map<String, Subscription> members = new TreeMap<>();
        members.put("a", member("pod-a", claim(7, 0, 1, 2)));
        members.put("b", member("pod-b", claim(7, 3, 4, 5)));
        members.put("x", member("pod-x", claim(Long.MAX_VALUE, 0, 1, 2, 3, 4, 5)));
        Map<String, List<Integer>> got = run(leaderAt(7), cluster(6), members);
        assertEquals(List.of(0, 1, 2), got.get("a"));
        assertEquals(List.of(3, 4, 5), got.get("b"));
        assertEquals(List.of(), got.get("x"), "the huge claim is treated as no claim");
        // a leader with no document of its own trusts no claim: everything falls back, evenly
        Map<String, List<Integer>> blind = run(PlanFollowingAssignor.following(new DocumentTracker(null, null)),
            cluster(6), members);
        assertEquals(2, blind.get("x").size());
    }

    @Test
    void aRecreatedPolicysPlanWinsOverTheOldIncarnationsHigherClaims() {
        // the policy was deleted at epoch 40 and created again: the leader's document is epoch 1
        Map<String, Subscription> members = new TreeMap<>();
        members.put("a", member("pod-a", claim(40, 0, 1, 2, 3)));
        members.put("b", member("pod-b", claim(1, 0, 1)));
        members.put("c", member("pod-c", claim(1, 2, 3)));
        Map<String, List<Integer>> got = run(leaderAt(1), cluster(4), members);
        assertEquals(List.of(0, 1), got.get("b"));
        assertEquals(List.of(2, 3), got.get("c"));
        assertEquals(List.of(), got.get("a"));
    }

    @Test
    void aClaimOfAnotherIncarnationGetsNothingAtAnyEpoch() {
        // the policy was recreated; pod-0 still follows the old incarnation's document, at the
        // leader's epoch and first in the tie order (the lowest instance id)
        Map<String, Subscription> members = new TreeMap<>();
        members.put("old", member("pod-0", claimOf("uid-old", 3, 0, 1, 2, 3)));
        members.put("a", member("pod-a", claimOf("uid-new", 3, 0, 1)));
        members.put("b", member("pod-b", claimOf("uid-new", 2, 2, 3)));
        Map<String, Assignment> result = leaderAt(3, "uid-new")
            .assign(cluster(4), new GroupSubscription(members)).groupAssignment();
        assertEquals(List.of(), result.get("old").partitions());
        assertEquals(List.of(new TopicPartition(T, 0), new TopicPartition(T, 1)), result.get("a").partitions());
        assertEquals(List.of(new TopicPartition(T, 2), new TopicPartition(T, 3)), result.get("b").partitions());
        assertEquals("{\"claimEpoch\":-1,\"composedEpoch\":3}",
            StandardCharsets.US_ASCII.decode(result.get("old").userData()).toString());
        // a leader still on the old incarnation would give pod-0 everything: the check is what stops it
        Map<String, List<Integer>> unchecked = run(leaderAt(3), cluster(4), members);
        assertEquals(List.of(0, 1, 2, 3), unchecked.get("old"));
    }

    @Test
    void aClaimNamingNoIncarnationIsJudgedByItsEpochAlone() {
        assertEquals(Composer.Trust.TRUSTED, Composer.trust(claimed(5, ""), 5, "uid-new"));
        assertEquals(Composer.Trust.ABOVE_EPOCH, Composer.trust(claimed(6, ""), 5, "uid-new"));
        assertEquals(Composer.Trust.TRUSTED, Composer.trust(claimed(5, "uid-x"), 5, ""));
        assertEquals(Composer.Trust.TRUSTED, Composer.trust(claimed(5, "uid-new"), 5, "uid-new"));
        assertEquals(Composer.Trust.OTHER_INCARNATION, Composer.trust(claimed(1, "uid-old"), 5, "uid-new"));
        assertEquals(Composer.Trust.OTHER_INCARNATION, Composer.trust(claimed(9, "uid-old"), 5, "uid-new"));
        assertEquals(Composer.Trust.TRUSTED, Composer.trust(null, UserData.NO_EPOCH, ""));
    }

    private static UserData.Claim claimed(long epoch, String policy) {
        return new UserData.Claim(epoch, new TreeMap<>(), policy);
    }

    @Test
    void ownedPartitionsCountOnlyFromTheCurrentGeneration() {
        Map<String, Subscription> members = new TreeMap<>();
        members.put("a", member("pod-a", claim(3, 0, 1)));
        Subscription stale = new Subscription(List.of(T), claim(3, 2, 3), List.of(new TopicPartition(T, 0)), 4, null);
        stale.setGroupInstanceId(Optional.of("pod-b"));
        Subscription current = new Subscription(List.of(T), claim(3, 0, 1), List.of(), 5, null);
        current.setGroupInstanceId(Optional.of("pod-a"));
        members.put("a", current);
        members.put("b", stale);
        Map<String, List<Integer>> got = run(leaderAt(3), cluster(4), members);
        // b's claim of 0 from generation 4 does not withhold 0 from a in generation 5
        assertEquals(List.of(0, 1), got.get("a"));
        assertEquals(List.of(2, 3), got.get("b"));
    }

    @Test
    void whatNoClaimCoversGoesOutCooperativeStickyCountingClaimedPartitions() {
        Map<String, Subscription> members = new TreeMap<>();
        members.put("a", member("pod-a", claim(2, 0, 1, 2, 3)));
        // b has no document yet; c is a member of another assignor's (user_data is not a claim)
        members.put("b", member("pod-b", ByteBuffer.allocate(0)));
        members.put("c", member("pod-c", new CooperativeStickyAssignor().subscriptionUserData(Set.of(T))));
        Map<String, List<Integer>> got = run(cluster(8), members);
        assertEquals(List.of(0, 1, 2, 3), got.get("a"));
        assertEquals(2, got.get("b").size());
        assertEquals(2, got.get("c").size());
        Composer.Composition c = Composer.compose(List.of(
            new Composer.MemberView("a", "pod-a", List.of(T), UserData.decodeClaim(UserData.bytes(claim(2, 0, 1, 2, 3))), Map.of()),
            new Composer.MemberView("b", "pod-b", List.of(T), null, Map.of())), Map.of(T, 8));
        assertEquals(4, c.claimedPartitions());
        assertEquals(4, c.fallbackPartitions());
    }

    @Test
    void fallbackIsStickyToCurrentOwners() {
        Map<String, Subscription> members = new TreeMap<>();
        members.put("a", member("pod-a", ByteBuffer.allocate(0), 1, 4, 5));
        members.put("b", member("pod-b", ByteBuffer.allocate(0), 0, 2, 3));
        Map<String, List<Integer>> got = run(cluster(6), members);
        assertEquals(List.of(1, 4, 5), got.get("a"));
        assertEquals(List.of(0, 2, 3), got.get("b"));
    }

    @Test
    void aMovingPartitionIsRevokedFirstAndGrantedOnlyOnceNobodyOwnsIt() {
        // the plan moves 2 and 3 from a to b; everyone holds the new claims
        Map<String, Set<Integer>> owned = new HashMap<>(Map.of("a", Set.of(0, 1, 2, 3), "b", Set.of(4, 5)));
        Map<String, ByteBuffer> claims = Map.of("a", claim(7, 0, 1), "b", claim(7, 2, 3, 4, 5));
        int rounds = 0;
        while (true) {
            rounds++;
            Map<String, Subscription> members = new TreeMap<>();
            owned.forEach((m, parts) -> members.put(m, member("pod-" + m, claims.get(m).duplicate(),
                parts.stream().sorted().toArray(Integer[]::new))));
            Map<String, List<Integer>> got = run(cluster(6), members);
            for (String m : got.keySet()) {
                for (int p : got.get(m)) {
                    for (String other : owned.keySet()) {
                        assertTrue(other.equals(m) || !owned.get(other).contains(p),
                            "round " + rounds + ": " + p + " given to " + m + " while " + other + " owns it");
                    }
                }
            }
            Map<String, Set<Integer>> next = new HashMap<>();
            got.forEach((m, parts) -> next.put(m, new HashSet<>(parts)));
            if (next.equals(owned)) {
                break;
            }
            owned = next;
        }
        assertEquals(Map.of("a", Set.of(0, 1), "b", Set.of(2, 3, 4, 5)), owned);
        assertEquals(3, rounds); // revoke, grant, and the round that changes nothing
    }

    @Test
    void aMemberSendsItsDocumentAndKnowsWhenTheGroupIsBehindIt() throws Exception {
        DocumentTracker tracker = new DocumentTracker("g", "pod-a");
        PlanFollowingAssignor assignor = PlanFollowingAssignor.following(tracker);
        assertEquals(0, assignor.subscriptionUserData(Set.of(T)).remaining());
        tracker.offer(DocumentTrackerTest.doc("pod-a", 5, "1,0", ""), "test");
        assertEquals("{\"epoch\":5,\"partitions\":{\"t\":[0,1]}}",
            StandardCharsets.US_ASCII.decode(assignor.subscriptionUserData(Set.of(T))).toString());
        assertNull(assignor.rebalanceReason()); // never joined: the first JoinGroup carries it
        ConsumerGroupMetadata meta = new ConsumerGroupMetadata("g", 3, "m-1", Optional.of("pod-a"));
        assignor.onAssignment(new Assignment(List.of(), ByteBuffer.wrap(UserData.encodeComposed(5, 5))), meta);
        assertNull(assignor.rebalanceReason());
        tracker.offer(DocumentTrackerTest.doc("pod-a", 6, "1", ""), "test");
        assertTrue(assignor.rebalanceReason().startsWith("new document epoch 6"));
        assignor.subscriptionUserData(Set.of(T));
        // the round was composed from the new epoch through others, but the leader saw our old claim
        assignor.onAssignment(new Assignment(List.of(), ByteBuffer.wrap(UserData.encodeComposed(6, 5))), meta);
        assertEquals("the leader saw the claim of epoch 5 from this member, document is at 6", assignor.rebalanceReason());
        assignor.onAssignment(new Assignment(List.of(), ByteBuffer.wrap(UserData.encodeComposed(6, 6))), meta);
        assertNull(assignor.rebalanceReason());
        assertEquals("assignment composed from epoch 4, document is at 6", PlanFollowingAssignor.staleReason(6, 4L, 6L));
    }

    @Test
    void aRecreatedPolicysDocumentAtALowerEpochStillAsksForARebalance() {
        DocumentTracker tracker = new DocumentTracker("g", "pod-a");
        PlanFollowingAssignor assignor = PlanFollowingAssignor.following(tracker);
        tracker.offer(DocumentTrackerTest.doc("pod-a", 40, "0", "uid-old"), "test");
        assertEquals("{\"epoch\":40,\"partitions\":{\"t\":[0]},\"policy\":\"uid-old\"}",
            StandardCharsets.US_ASCII.decode(assignor.subscriptionUserData(Set.of(T))).toString());
        ConsumerGroupMetadata meta = new ConsumerGroupMetadata("g", 3, "m-1", Optional.of("pod-a"));
        assignor.onAssignment(new Assignment(List.of(), ByteBuffer.wrap(UserData.encodeComposed(40, 40))), meta);
        assertNull(assignor.rebalanceReason());
        // the policy is deleted and created again: epoch 1 of a new incarnation, below what was sent
        tracker.offer(DocumentTrackerTest.doc("pod-a", 1, "1", "uid-new"), "test");
        assertEquals("new policy incarnation uid-new (the group has the claim of incarnation uid-old)",
            assignor.rebalanceReason());
        assignor.subscriptionUserData(Set.of(T));
        assignor.onAssignment(new Assignment(List.of(), ByteBuffer.wrap(UserData.encodeComposed(1, 1))), meta);
        assertNull(assignor.rebalanceReason());
    }
}
