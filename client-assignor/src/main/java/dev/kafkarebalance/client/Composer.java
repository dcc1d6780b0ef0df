package dev.kafkarebalance.client;

import dev.kafkarebalance.client.UserData.Claim;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * The leader's composition: the group assignment from the members' claims. Pure (no I/O); the same
 * rule as the Python sidecar's {@code plan_following.compose}, so either may lead a mixed group:
 *
 * <ul>
 * <li>per partition, the present claimant with the highest epoch that subscribes to the topic
 * wins (ties: static members first, then the lower instance id, then member id), so a fresher plan
 * overrides a stale one and no partition is given twice; a claim of a partition that does not
 * exist is ignored;</li>
 * <li>partitions no present member claims (the operator is down, a pod is gone, a topic grew) go
 * out by Kafka's own {@link CooperativeStickyAssignor} among present members, sticky to their
 * current owners. It sees only the unclaimed partitions (renumbered per topic) plus, per member, a
 * private topic with as many partitions as its claims placed, which only that member subscribes to
 * and owns: claims never move, yet its balance counts the claimed partitions too;</li>
 * <li>cooperative (KIP-429): a partition currently owned by another present member is withheld
 * this round; its owner revokes it and rejoins, and the next round grants it once nobody owns
 * it. So no partition ever has two owners, which Kafka's own leader-side check also demands.</li>
 * </ul>
 */
public final class Composer {
    // A space is not allowed in Kafka topic names: no clash with a real topic.
    private static final String PINNED_PREFIX = "claimed by ";
    private static final String WITHHELD = "\u0000withheld";

    private Composer() {
    }

    /** One member as the leader sees it. */
    public record MemberView(
        String memberId, String instanceId, Collection<String> topics, Claim claim,
        Map<String, ? extends Collection<Integer>> owned) {
    }

    /** The result: every member present in {@code assignment} (possibly empty). */
    public record Composition(
        Map<String, Map<String, List<Integer>>> assignment,
        long epoch,
        int claimedPartitions,
        int fallbackPartitions,
        List<TopicPartition> withheld,
        int ignoredClaims) {
    }

    /** What the leader makes of one member's claim ({@link #trust}). */
    public enum Trust {
        /** Composed from as the member states it. */
        TRUSTED,
        /** Above the epoch of the leader's own document: counts as no claim. */
        ABOVE_EPOCH,
        /** Names another policy incarnation than the leader's own document: counts as no claim. */
        OTHER_INCARNATION
    }

    /**
     * The leader's trust in {@code claim} (null: none, TRUSTED), given the epoch and incarnation
     * ({@code policyUid}, "" when it names none) of the leader's own document; the Python
     * sidecar's {@code plan_following.trusted}. Invariants: a claim kept is at most
     * {@code leaderEpoch} (NO_EPOCH when the leader has no document, so then none is kept); a claim
     * kept names the leader's incarnation whenever both name one, so after a policy is recreated a
     * member still on the old incarnation's document wins nothing with it, whatever its epoch. A
     * claim that names none (a member of an older version), or any claim when the leader's document
     * names none, is judged by the epoch alone: "not said" is the same incarnation, as for
     * documents ({@link AssignmentDocument#sameIncarnation}), so a rolling upgrade keeps the plan.
     * Another incarnation is reported before an epoch above the bound.
     */
    public static Trust trust(Claim claim, long leaderEpoch, String leaderPolicy) {
        if (claim == null) {
            return Trust.TRUSTED;
        }
        if (leaderPolicy != null && !leaderPolicy.isEmpty() && !claim.policy().isEmpty()
                && !claim.policy().equals(leaderPolicy)) {
            return Trust.OTHER_INCARNATION;
        }
        return claim.epoch() > leaderEpoch ? Trust.ABOVE_EPOCH : Trust.TRUSTED;
    }

    private static final Comparator<MemberView> BEST_CLAIM_FIRST = Comparator
        .comparingLong((MemberView v) -> -(v.claim() != null ? v.claim().epoch() : UserData.NO_EPOCH))
        .thenComparingInt(v -> v.instanceId() != null ? 0 : 1)
        .thenComparing(v -> v.instanceId() != null ? v.instanceId() : "")
        .thenComparing(MemberView::memberId);

    /**
     * @param partitionsPerTopic topic -> partition count for the topics the leader has metadata
     *                           for; a subscription to a topic missing here gets nothing from it
     */
    public static Composition compose(List<MemberView> members, Map<String, Integer> partitionsPerTopic) {
        Map<String, Set<String>> subscriptions = new HashMap<>();
        for (MemberView m : members) {
            Set<String> topics = new HashSet<>(m.topics());
            topics.retainAll(partitionsPerTopic.keySet());
            subscriptions.put(m.memberId(), topics);
        }
        Map<String, String[]> table = new TreeMap<>();
        partitionsPerTopic.forEach((t, n) -> table.put(t, new String[n]));

        long epoch = UserData.NO_EPOCH;
        int ignored = 0;
        List<MemberView> claimants = new ArrayList<>();
        for (MemberView m : members) {
            if (m.claim() != null) {
                claimants.add(m);
            }
        }
        claimants.sort(BEST_CLAIM_FIRST);
        for (MemberView view : claimants) {
            Set<String> subscribed = subscriptions.get(view.memberId());
            for (Map.Entry<String, List<Integer>> e : view.claim().partitions().entrySet()) {
                String[] owners = table.get(e.getKey());
                if (owners == null || !subscribed.contains(e.getKey())) {
                    ignored += e.getValue().size();
                    continue;
                }
                boolean placed = false;
                for (int p : e.getValue()) {
                    if (p < 0 || p >= owners.length) {
                        ignored++;
                    } else if (owners[p] == null) {
                        owners[p] = view.memberId();
                        placed = true;
                    }
                }
                if (placed && view.claim().epoch() > epoch) {
                    epoch = view.claim().epoch();
                }
            }
        }
        int claimed = 0;
        for (String[] owners : table.values()) {
            for (String o : owners) {
                if (o != null) {
                    claimed++;
                }
            }
        }
        int fallback = fallback(members, table, subscriptions);
        withhold(members, table);

        Map<String, Map<String, List<Integer>>> assignment = new LinkedHashMap<>();
        for (MemberView m : members) {
            assignment.put(m.memberId(), new TreeMap<>());
        }
        List<TopicPartition> withheld = new ArrayList<>();
        for (Map.Entry<String, String[]> e : table.entrySet()) {
            String[] owners = e.getValue();
            for (int p = 0; p < owners.length; p++) {
                String owner = owners[p];
                if (owner == WITHHELD) {
                    withheld.add(new TopicPartition(e.getKey(), p));
                } else if (owner != null) {
                    assignment.get(owner).computeIfAbsent(e.getKey(), k -> new ArrayList<>()).add(p);
                }
            }
        }
        return new Composition(assignment, epoch, claimed, fallback, withheld, ignored);
    }

    /** Fill the unowned partitions of subscribed topics with Kafka's cooperative-sticky assignor. */
    private static int fallback(List<MemberView> members, Map<String, String[]> table,
                                Map<String, Set<String>> subscriptions) {
        Set<String> subscribedTopics = new TreeSet<>();
        subscriptions.values().forEach(subscribedTopics::addAll);
        Map<String, int[]> free = new TreeMap<>(); // topic -> real partition per virtual index
        for (String topic : subscribedTopics) {
            String[] owners = table.get(topic);
            int[] unowned = java.util.stream.IntStream.range(0, owners.length)
                .filter(p -> owners[p] == null).toArray();
            if (unowned.length > 0) {
                free.put(topic, unowned);
            }
        }
        if (free.isEmpty()) {
            return 0;
        }
        Map<String, Integer> claimedCount = new HashMap<>();
        for (String[] owners : table.values()) {
            for (String o : owners) {
                if (o != null) {
                    claimedCount.merge(o, 1, Integer::sum);
                }
            }
        }
        Map<String, List<PartitionInfo>> partitionsPerTopic = new HashMap<>();
        free.forEach((topic, parts) -> partitionsPerTopic.put(topic, partitionInfos(topic, parts.length)));
        Map<String, Subscription> subscriptionsByMember = new HashMap<>();
        for (MemberView view : members) {
            List<TopicPartition> owned = new ArrayList<>();
            for (Map.Entry<String, ? extends Collection<Integer>> e : view.owned().entrySet()) {
                int[] parts = free.get(e.getKey());
                if (parts == null) {
                    continue;
                }
                for (int p : e.getValue()) {
                    int index = Arrays.binarySearch(parts, p);
                    if (index >= 0) {
                        owned.add(new TopicPartition(e.getKey(), index));
                    }
                }
            }
            List<String> topics = new ArrayList<>(new TreeSet<>(subscriptions.get(view.memberId())));
            topics.retainAll(free.keySet());
            int pinned = claimedCount.getOrDefault(view.memberId(), 0);
            if (pinned > 0) {
                String privateTopic = PINNED_PREFIX + view.memberId();
                partitionsPerTopic.put(privateTopic, partitionInfos(privateTopic, pinned));
                topics.add(privateTopic);
                for (int i = 0; i < pinned; i++) {
                    owned.add(new TopicPartition(privateTopic, i));
                }
            }
            subscriptionsByMember.put(view.memberId(), new Subscription(topics, null, owned));
        }
        Map<String, List<TopicPartition>> result =
            new CooperativeStickyAssignor().assignPartitions(partitionsPerTopic, subscriptionsByMember);
        int placed = 0;
        for (Map.Entry<String, List<TopicPartition>> e : result.entrySet()) {
            for (TopicPartition tp : e.getValue()) {
                int[] parts = free.get(tp.topic());
                if (parts == null) {
                    continue; // the member's own claimed partitions, which stay where they are
                }
                table.get(tp.topic())[parts[tp.partition()]] = e.getKey();
                placed++;
            }
        }
        return placed;
    }

    private static List<PartitionInfo> partitionInfos(String topic, int count) {
        List<PartitionInfo> infos = new ArrayList<>(count);
        for (int p = 0; p < count; p++) {
            infos.add(new PartitionInfo(topic, p, null, new Node[0], new Node[0]));
        }
        return infos;
    }

    /** KIP-429: hold back every partition another present member says it owns now. */
    private static void withhold(List<MemberView> members, Map<String, String[]> table) {
        for (MemberView view : members) {
            for (Map.Entry<String, ? extends Collection<Integer>> e : view.owned().entrySet()) {
                String[] owners = table.get(e.getKey());
                if (owners == null) {
                    continue;
                }
                for (int p : e.getValue()) {
                    if (p >= 0 && p < owners.length) {
                        String target = owners[p];
                        if (target != null && target != WITHHELD && !target.equals(view.memberId())) {
                            owners[p] = WITHHELD;
                        }
                    }
                }
            }
        }
    }
}
