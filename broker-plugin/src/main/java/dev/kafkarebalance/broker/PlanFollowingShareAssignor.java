package dev.kafkarebalance.broker;

import java.time.Clock;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.ShareGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A KIP-932 share assignor ({@code group.share.assignors=dev.kafkarebalance.broker.PlanFollowingShareAssignor},
 * a cluster-wide broker setting: Kafka 4.4 has no per-group share assignor) that follows the
 * operator's share plans (records of {@code kind:"share"}, {@link PlanCodec}): per share member id
 * the partitions it consumes, a partition under several members where the plan wants several.
 *
 * <p>The group's plan is the one share plan naming one of its member ids
 * ({@link PlanStore#selectShare}). A group with no usable plan (none, another group's, another
 * kind, stale, or one whose planned members have all left) gets exactly the assignment of Kafka's
 * built-in {@code simple} share assignor, so one cluster serves planned and unplanned groups.
 *
 * <p>Following a plan, whatever it says, the result honours what the coordinator expects of a
 * share assignment: a member gets only partitions of topics it subscribes to, below the topic's
 * partition count, and {@link GroupSpec#isPartitionAssignable assignable} (for share groups: the
 * share-partitions already initialized in the share coordinator); every assignable subscribed
 * partition gets at least one member (a planned partition whose members left goes to a current
 * holder if one remains, else to the subscribed member holding fewest partitions); a member the
 * plan leaves without partitions (joined since the plan) takes the least-shared partition it
 * subscribes to, so no consumer idles until the next plan.
 *
 * <p>Recompute trigger: a member whose rack id is {@value #TRIGGER_RACK} (the operator's join and
 * leave, docs/share-groups.md) is given nothing and hidden from the fallback, so the trigger bumps
 * the group epoch twice and changes no one's partitions but by the new plan.
 *
 * <p>{@link #assign} runs inline on the group coordinator thread in 4.4: it only reads the
 * in-memory {@link PlanStore} the shared background {@link PlanTopicReader} fills; no I/O.
 * Deterministic for the same inputs and plan.
 */
public class PlanFollowingShareAssignor implements ShareGroupPartitionAssignor, Configurable, AutoCloseable {
    public static final String NAME = "kafka-rebalance-plan";
    /** The rack id the operator's trigger member sends: it is assigned nothing. */
    public static final String TRIGGER_RACK = "kafka-rebalance-trigger";
    private static final Logger LOG = LoggerFactory.getLogger(PlanFollowingShareAssignor.class);
    private static final Comparator<Uuid> BY_ID = Comparator.comparing(Uuid::toString);

    private final ShareGroupPartitionAssignor fallback = new SimpleAssignor();
    private final OnceLog once = new OnceLog();
    private final PlanSource source;
    private final Clock clock;

    /** What the broker instantiates (public no-argument constructor). */
    public PlanFollowingShareAssignor() {
        this(new PlanStore(), Clock.systemUTC(), PluginConfig.DEFAULT_MAX_AGE_MS);
    }

    /** For tests and embedding: plans come from `store`, which the caller fills. */
    public PlanFollowingShareAssignor(PlanStore store, Clock clock, long maxAgeMs) {
        this.source = new PlanSource(store, maxAgeMs);
        this.clock = clock;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public void configure(Map<String, ?> configs) {
        source.configure(configs, name(), "Kafka's simple share assignment");
    }

    @Override
    public void close() {
        source.close();
    }

    @Override
    public GroupAssignment assign(GroupSpec groupSpec, SubscribedTopicDescriber topics)
        throws PartitionAssignorException {
        List<String> members = new ArrayList<>();
        List<String> triggers = new ArrayList<>();
        for (String member : new TreeSet<>(groupSpec.memberIds())) {
            boolean trigger = groupSpec.memberSubscription(member).rackId().map(TRIGGER_RACK::equals).orElse(false);
            (trigger ? triggers : members).add(member);
        }
        GroupSpec visible = triggers.isEmpty() ? groupSpec : new WithoutMembers(groupSpec, members);
        Optional<Plan> plan = usablePlan(members);
        if (plan.isEmpty()) {
            return withTriggers(fallback.assign(visible, topics), triggers);
        }
        Map<String, Map<Uuid, TreeSet<Integer>>> assignment = new TreeMap<>();
        Map<String, Set<Uuid>> subscriptions = new HashMap<>();
        for (String member : members) {
            assignment.put(member, new TreeMap<>(BY_ID));
            subscriptions.put(member, groupSpec.memberSubscription(member).subscribedTopicIds());
        }
        int planned = 0;
        int dropped = 0;
        for (Map.Entry<String, Map<Uuid, Set<Integer>>> entry : new TreeMap<>(plan.get().members()).entrySet()) {
            Map<Uuid, TreeSet<Integer>> own = assignment.get(entry.getKey());
            if (own == null) {
                continue;  // planned member gone: its partitions are covered below
            }
            for (Map.Entry<Uuid, Set<Integer>> topic : entry.getValue().entrySet()) {
                for (int partition : topic.getValue()) {
                    if (assignable(groupSpec, topics, subscriptions.get(entry.getKey()), topic.getKey(), partition)) {
                        own.computeIfAbsent(topic.getKey(), t -> new TreeSet<>()).add(partition);
                        planned++;
                    } else {
                        dropped++;
                    }
                }
            }
        }
        if (planned == 0) {
            LOG.warn("{}: simple share assignment: {} places no partition on this group's {} members", name(),
                plan.get().describe(), members.size());
            return withTriggers(fallback.assign(visible, topics), triggers);
        }
        Map<Uuid, int[]> counts = holderCounts(topics, subscriptions, assignment);
        int covered = cover(groupSpec, topics, members, subscriptions, assignment, counts);
        int filled = fillIdle(groupSpec, topics, members, subscriptions, assignment, counts);
        String summary = "{}: following {} for {} members: {} planned member-partitions, {} partitions covered "
            + "for absent members, {} idle members given one";
        if (dropped > 0 || !plan.get().unresolved().isEmpty()) {
            LOG.warn(summary + "; {} planned member-partitions ignored (not subscribed, beyond the partition count "
                + "or not yet initialized), unknown topics {}", name(), plan.get().describe(), members.size(), planned,
                covered, filled, dropped, plan.get().unresolved());
        } else {
            LOG.info(summary, name(), plan.get().describe(), members.size(), planned, covered, filled);
        }
        Map<String, MemberAssignment> result = new HashMap<>();
        assignment.forEach((member, parts) -> result.put(member, new PlannedAssignment(freeze(parts))));
        triggers.forEach(member -> result.put(member, new PlannedAssignment(Map.of())));
        return new GroupAssignment(result);
    }

    private static boolean assignable(GroupSpec spec, SubscribedTopicDescriber topics, Set<Uuid> subscribed,
                                      Uuid topic, int partition) {
        return subscribed.contains(topic) && partition >= 0 && partition < topics.numPartitions(topic)
            && spec.isPartitionAssignable(topic, partition);
    }

    /** Every assignable subscribed partition without a member gets one; returns how many. */
    private static int cover(GroupSpec spec, SubscribedTopicDescriber topics, List<String> members,
                             Map<String, Set<Uuid>> subscriptions, Map<String, Map<Uuid, TreeSet<Integer>>> assignment,
                             Map<Uuid, int[]> counts) {
        int covered = 0;
        for (Uuid topic : subscribedTopics(subscriptions)) {
            List<String> readers = members.stream().filter(m -> subscriptions.get(m).contains(topic)).toList();
            for (int partition = 0; partition < Math.max(0, topics.numPartitions(topic)); partition++) {
                if (!spec.isPartitionAssignable(topic, partition) || counts.get(topic)[partition] > 0) {
                    continue;
                }
                final int p = partition;
                String chosen = readers.stream()
                    .filter(m -> spec.memberAssignment(m).partitions().getOrDefault(topic, Set.of()).contains(p))
                    .findFirst()
                    .orElseGet(() -> readers.stream().min(Comparator.comparingInt((String m) -> count(assignment.get(m)))
                        .thenComparing(Comparator.naturalOrder())).orElseThrow());
                assignment.get(chosen).computeIfAbsent(topic, t -> new TreeSet<>()).add(partition);
                counts.get(topic)[partition]++;
                covered++;
            }
        }
        return covered;
    }

    /** Each member without partitions takes the least-shared one it may read; returns how many. */
    private static int fillIdle(GroupSpec spec, SubscribedTopicDescriber topics, List<String> members,
                                Map<String, Set<Uuid>> subscriptions, Map<String, Map<Uuid, TreeSet<Integer>>> assignment,
                                Map<Uuid, int[]> counts) {
        int filled = 0;
        for (String member : members) {
            if (count(assignment.get(member)) > 0) {
                continue;
            }
            Uuid bestTopic = null;
            int bestPartition = -1;
            int bestHolders = Integer.MAX_VALUE;
            List<Uuid> own = new ArrayList<>(subscriptions.get(member));
            own.sort(BY_ID);
            for (Uuid topic : own) {
                for (int partition = 0; partition < Math.max(0, topics.numPartitions(topic)); partition++) {
                    if (!spec.isPartitionAssignable(topic, partition)) {
                        continue;
                    }
                    int holders = counts.get(topic)[partition];
                    if (holders < bestHolders) {
                        bestTopic = topic;
                        bestPartition = partition;
                        bestHolders = holders;
                    }
                }
            }
            if (bestTopic != null) {
                assignment.get(member).computeIfAbsent(bestTopic, t -> new TreeSet<>()).add(bestPartition);
                counts.get(bestTopic)[bestPartition]++;
                filled++;
            }
        }
        return filled;
    }

    private static Collection<Uuid> subscribedTopics(Map<String, Set<Uuid>> subscriptions) {
        TreeSet<Uuid> all = new TreeSet<>(BY_ID);
        subscriptions.values().forEach(all::addAll);
        return all;
    }

    /** Subscribed topic -> members holding each of its partitions (kept current as members are added). */
    private static Map<Uuid, int[]> holderCounts(SubscribedTopicDescriber topics, Map<String, Set<Uuid>> subscriptions,
                                                 Map<String, Map<Uuid, TreeSet<Integer>>> assignment) {
        Map<Uuid, int[]> counts = new HashMap<>();
        for (Uuid topic : subscribedTopics(subscriptions)) {
            counts.put(topic, new int[Math.max(0, topics.numPartitions(topic))]);
        }
        for (Map<Uuid, TreeSet<Integer>> parts : assignment.values()) {
            parts.forEach((topic, partitions) -> partitions.forEach(p -> counts.get(topic)[p]++));
        }
        return counts;
    }

    private static int count(Map<Uuid, TreeSet<Integer>> parts) {
        return parts.values().stream().mapToInt(Set::size).sum();
    }

    private static GroupAssignment withTriggers(GroupAssignment assignment, List<String> triggers) {
        if (triggers.isEmpty()) {
            return assignment;
        }
        Map<String, MemberAssignment> result = new HashMap<>(assignment.members());
        triggers.forEach(member -> result.put(member, new PlannedAssignment(Map.of())));
        return new GroupAssignment(result);
    }

    /** The plan to follow, or empty (and a broker-log line saying why) if there is none. */
    private Optional<Plan> usablePlan(List<String> members) {
        PlanStore.Selection selection = source.store().selectShare(members);
        if (selection.plan().isEmpty()) {
            if (!selection.logOnce() || once.first(selection.reason())) {
                LOG.debug("{}: simple share assignment for {} members: {}", name(), members.size(), selection.reason());
            }
            return Optional.empty();
        }
        Plan plan = selection.plan().get();
        long limit = source.maxAgeMs();
        if (limit > 0 && plan.generatedAtMs() > 0) {
            long age = clock.millis() - plan.generatedAtMs();
            if (age > limit) {
                LOG.warn("{}: simple share assignment: {} is stale ({} ms old, {} allows {} ms)",
                    name(), plan.describe(), age, PluginConfig.MAX_AGE, limit);
                return Optional.empty();
            }
        }
        return Optional.of(plan);
    }

    private static Map<Uuid, Set<Integer>> freeze(Map<Uuid, TreeSet<Integer>> parts) {
        Map<Uuid, Set<Integer>> out = new HashMap<>();
        parts.forEach((topic, partitions) -> out.put(topic, Set.copyOf(partitions)));
        return out;
    }

    /** The group as the simple assignor should see it: only the listed members (trigger members hidden). */
    private static final class WithoutMembers implements GroupSpec {
        private final GroupSpec spec;
        private final List<String> members;

        WithoutMembers(GroupSpec spec, List<String> members) {
            this.spec = spec;
            this.members = List.copyOf(members);
        }

        @Override
        public Collection<String> memberIds() {
            return members;
        }

        /** Homogeneous when the listed members all subscribe to the same topics (as Kafka decides it). */
        @Override
        public SubscriptionType subscriptionType() {
            long distinct = members.stream().map(m -> spec.memberSubscription(m).subscribedTopicIds()).distinct().count();
            return distinct <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
        }

        @Override
        public boolean isPartitionAssigned(Uuid topicId, int partitionId) {
            return spec.isPartitionAssigned(topicId, partitionId);
        }

        @Override
        public boolean isPartitionAssignable(Uuid topicId, int partitionId) {
            return spec.isPartitionAssignable(topicId, partitionId);
        }

        @Override
        public MemberSubscription memberSubscription(String memberId) {
            return spec.memberSubscription(memberId);
        }

        @Override
        public MemberAssignment memberAssignment(String memberId) {
            return spec.memberAssignment(memberId);
        }
    }
}
