package dev.kafkarebalance.broker;

import java.time.Clock;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A KIP-848 server-side assignor ({@code group.remote.assignor=kafka-rebalance-plan}) that follows
 * the operator's lag-aware plans (consumer-group plans only: a {@code kind:"streams"} record is
 * for {@link PlanFollowingTaskAssignor}). The group's plan is the one that names its members' instance
 * ids and shares a KIP-848 member id with it ({@link PlanStore#select}); members are matched to
 * the plan by {@code group.instance.id};
 * members and partitions the plan does not cover, and every partition of a group whose plan is
 * missing, stale or unusable, get a uniform-style sticky assignment ({@link StickyFallback}), and
 * the broker log says why. The group is never left without an assignment because of a plan.
 *
 * <p>{@link #assign} runs on the group coordinator's thread: it only reads the in-memory
 * {@link PlanStore}; the plans are fetched by a background {@link PlanTopicReader}
 * (docs/kip848.md). Broker configs read (the coordinator passes the broker's originals to
 * {@link #configure}): see {@link PluginConfig}.
 */
public class PlanFollowingAssignor implements ConsumerGroupPartitionAssignor, Configurable, AutoCloseable {
    public static final String NAME = "kafka-rebalance-plan";
    private static final Logger LOG = LoggerFactory.getLogger(PlanFollowingAssignor.class);

    private final PlanSource source;
    private final Clock clock;
    private final OnceLog once = new OnceLog();

    /** What the broker instantiates (public no-argument constructor). */
    public PlanFollowingAssignor() {
        this(new PlanStore(), Clock.systemUTC(), PluginConfig.DEFAULT_MAX_AGE_MS);
    }

    /** For tests and embedding: plans come from `store`, which the caller fills. */
    public PlanFollowingAssignor(PlanStore store, Clock clock, long maxAgeMs) {
        this.source = new PlanSource(store, maxAgeMs);
        this.clock = clock;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public void configure(Map<String, ?> configs) {
        source.configure(configs, name(), "the uniform-style sticky fallback");
    }

    @Override
    public void close() {
        source.close();
    }

    @Override
    public GroupAssignment assign(GroupSpec groupSpec, SubscribedTopicDescriber topics) {
        List<String> memberIds = new ArrayList<>(new TreeSet<>(groupSpec.memberIds()));
        Map<String, Set<Uuid>> subscriptions = new HashMap<>();
        Map<String, String> instances = new TreeMap<>();
        Map<String, Map<Uuid, Set<Integer>>> current = new HashMap<>();
        Map<String, Map<Uuid, Set<Integer>>> assignment = new HashMap<>();
        for (String member : memberIds) {
            MemberSubscription subscription = groupSpec.memberSubscription(member);
            subscriptions.put(member, subscription.subscribedTopicIds());
            subscription.instanceId().ifPresent(instance -> instances.put(instance, member));
            current.put(member, groupSpec.memberAssignment(member).partitions());
            assignment.put(member, new HashMap<>());
        }
        Set<StickyFallback.TopicPartitionId> planned = new HashSet<>();
        Optional<Plan> plan = usablePlan(instances.keySet(), memberIds);
        int dropped = 0;
        if (plan.isPresent()) {
            for (Map.Entry<String, Map<Uuid, Set<Integer>>> entry : plan.get().members().entrySet()) {
                String member = instances.get(entry.getKey());
                if (member == null) {
                    continue;  // a planned member that is not in the group now: its partitions fall back
                }
                for (Map.Entry<Uuid, Set<Integer>> topic : entry.getValue().entrySet()) {
                    int count = topics.numPartitions(topic.getKey());
                    boolean subscribed = subscriptions.get(member).contains(topic.getKey());
                    for (int partition : topic.getValue()) {
                        if (!subscribed || partition >= count) {
                            dropped++;
                            continue;
                        }
                        assignment.get(member).computeIfAbsent(topic.getKey(), t -> new TreeSet<>()).add(partition);
                        planned.add(new StickyFallback.TopicPartitionId(topic.getKey(), partition));
                    }
                }
            }
        }
        List<StickyFallback.TopicPartitionId> leftover = new ArrayList<>();
        Set<Uuid> subscribedTopics = new TreeSet<>((a, b) -> a.toString().compareTo(b.toString()));
        subscriptions.values().forEach(subscribedTopics::addAll);
        for (Uuid topic : subscribedTopics) {
            for (int partition = 0; partition < Math.max(0, topics.numPartitions(topic)); partition++) {
                StickyFallback.TopicPartitionId tp = new StickyFallback.TopicPartitionId(topic, partition);
                if (!planned.contains(tp)) {
                    leftover.add(tp);
                }
            }
        }
        StickyFallback.place(assignment, leftover, subscriptions, current);
        if (plan.isPresent()) {
            long covered = plan.get().members().keySet().stream().filter(instances::containsKey).count();
            String summary = "{}: following {} for {} of {} members; {} partitions planned, {} by fallback";
            if (dropped > 0 || !plan.get().unresolved().isEmpty()) {
                LOG.warn(summary + "; {} planned partitions ignored (topic not subscribed by that member or "
                        + "partition beyond the topic's count), unknown topics {}",
                    NAME, plan.get().describe(), covered, memberIds.size(), planned.size(), leftover.size(),
                    dropped, plan.get().unresolved());
            } else {
                LOG.info(summary, NAME, plan.get().describe(), covered, memberIds.size(), planned.size(),
                    leftover.size());
            }
        }
        Map<String, MemberAssignment> result = new HashMap<>();
        assignment.forEach((member, parts) -> result.put(member, new PlannedAssignment(freeze(parts))));
        return new GroupAssignment(result);
    }

    /** The plan to follow, or empty (and a broker-log line saying why) if there is none. */
    private Optional<Plan> usablePlan(Set<String> instanceIds, List<String> memberIds) {
        PlanStore.Selection selection = source.store().select(instanceIds, memberIds);
        if (selection.plan().isEmpty()) {
            if (!selection.logOnce() || once.first(selection.reason())) {
                LOG.warn("{}: uniform-style sticky fallback for members {}: {}", NAME, instanceIds, selection.reason());
            }
            return Optional.empty();
        }
        Plan plan = selection.plan().get();
        long maxAgeMs = source.maxAgeMs();
        if (maxAgeMs > 0 && plan.generatedAtMs() > 0) {
            long age = clock.millis() - plan.generatedAtMs();
            if (age > maxAgeMs) {
                LOG.warn("{}: uniform-style sticky fallback: {} is stale ({} ms old, {} allows {} ms)",
                    NAME, plan.describe(), age, PluginConfig.MAX_AGE, maxAgeMs);
                return Optional.empty();
            }
        }
        return Optional.of(plan);
    }

    private static Map<Uuid, Set<Integer>> freeze(Map<Uuid, Set<Integer>> parts) {
        Map<Uuid, Set<Integer>> out = new HashMap<>();
        parts.forEach((topic, partitions) -> out.put(topic, Collections.unmodifiableSet(new TreeSet<>(partitions))));
        return out;
    }
}
