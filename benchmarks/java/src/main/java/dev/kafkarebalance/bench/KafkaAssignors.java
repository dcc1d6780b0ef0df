package dev.kafkarebalance.bench;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

/**
 * Adapters that feed one benchmark case to Kafka's own assignors.
 *
 * <p>Each adapter splits the work into an untimed {@link Trial#prepare()} (building the inputs Kafka
 * would already hold: subscriptions, encoded user data, the group spec) and a timed {@link
 * Trial#call()} (the bare {@code assign}), so the figure compares like with like with the Python
 * strategy function.
 */
final class KafkaAssignors {

    /** Member id -> topic -> partitions: the one shape written back to the Python runner. */
    static final class Plan extends TreeMap<String, Map<String, List<Integer>>> {}

    /** A case as the plan contract writes it (topics, members with topics/owned/generation). */
    static final class BenchCase {
        final Map<String, Integer> topics = new TreeMap<>();
        final Map<String, List<String>> subscriptions = new TreeMap<>();
        final Map<String, List<TopicPartition>> owned = new TreeMap<>();
        final Map<String, Integer> generations = new TreeMap<>();

        static BenchCase parse(JsonNode document) {
            BenchCase c = new BenchCase();
            document.get("topics").fields().forEachRemaining(e -> c.topics.put(e.getKey(), e.getValue().asInt()));
            document.get("members").fields().forEachRemaining(e -> {
                String member = e.getKey();
                JsonNode spec = e.getValue();
                List<String> topics = new ArrayList<>();
                spec.get("topics").forEach(t -> topics.add(t.asText()));
                Collections.sort(topics);
                c.subscriptions.put(member, topics);
                List<TopicPartition> owned = new ArrayList<>();
                JsonNode ownedNode = spec.get("owned");
                if (ownedNode != null) {
                    ownedNode.fields().forEachRemaining(o -> o.getValue()
                        .forEach(p -> owned.add(new TopicPartition(o.getKey(), p.asInt()))));
                }
                c.owned.put(member, owned);
                JsonNode generation = spec.get("generation");
                c.generations.put(member, generation == null ? -1 : generation.asInt());
            });
            return c;
        }

        boolean identicalSubscriptions() {
            return new HashSet<>(subscriptions.values()).size() <= 1;
        }

        int totalPartitions() {
            Set<String> subscribed = new HashSet<>();
            subscriptions.values().forEach(subscribed::addAll);
            return subscribed.stream().mapToInt(t -> topics.getOrDefault(t, 0)).sum();
        }
    }

    /** One assignor bound to one case. */
    interface Trial {
        /** Untimed: build fresh inputs for the next call. */
        void prepare();

        /** Timed: one assign call on the prepared inputs. */
        Object call();

        /** Untimed: the call's result in the shared shape. */
        Plan toPlan(Object result);
    }

    static Trial create(String name, BenchCase c) {
        switch (name) {
            case "range":
                return new ClientTrial(c, RangeAssignor::new, false);
            case "roundrobin":
                return new ClientTrial(c, RoundRobinAssignor::new, false);
            case "cooperative-sticky":
                return new ClientTrial(c, CooperativeStickyAssignor::new, false);
            case "sticky":
                return new ClientTrial(c, StickyAssignor::new, true);
            case "uniform":
                return new UniformTrial(c);
            default:
                throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    // ----------------------------------------------------------------------------- client side

    interface AssignorFactory {
        ConsumerPartitionAssignor create();
    }

    /**
     * The classic-protocol assignors through their public entry point, {@code assign(Cluster,
     * GroupSubscription)}. Owned partitions reach CooperativeSticky as protocol fields (owned list
     * plus generation) and the eager StickyAssignor as encoded user data, as on the wire.
     */
    static final class ClientTrial implements Trial {
        private final BenchCase c;
        private final AssignorFactory factory;
        private final Cluster cluster;
        private final Map<String, ByteBuffer> userData = new HashMap<>();
        private GroupSubscription prepared;
        private ConsumerPartitionAssignor assignor;

        ClientTrial(BenchCase c, AssignorFactory factory, boolean ownedAsUserData) {
            this.c = c;
            this.factory = factory;
            Node node = new Node(0, "localhost", 9092);
            Node[] replicas = {node};
            List<PartitionInfo> partitions = new ArrayList<>();
            c.topics.forEach((topic, count) -> {
                for (int p = 0; p < count; p++) {
                    partitions.add(new PartitionInfo(topic, p, node, replicas, replicas));
                }
            });
            this.cluster = new Cluster("bench", List.of(node), partitions, Set.of(), Set.of());
            if (ownedAsUserData) {
                c.subscriptions.forEach((member, topics) -> {
                    StickyAssignor encoder = new StickyAssignor();
                    int generation = c.generations.get(member);
                    encoder.onAssignment(
                        new ConsumerPartitionAssignor.Assignment(c.owned.get(member)),
                        new ConsumerGroupMetadata("bench", generation, member, Optional.empty()));
                    userData.put(member, encoder.subscriptionUserData(new HashSet<>(topics)));
                });
            }
        }

        @Override
        public void prepare() {
            Map<String, Subscription> subscriptions = new HashMap<>();
            c.subscriptions.forEach((member, topics) -> {
                Subscription s;
                if (!userData.isEmpty()) {
                    // Decoding advances the buffer's position: hand every call its own view.
                    s = new Subscription(topics, userData.get(member).duplicate());
                } else {
                    s = new Subscription(topics, null, c.owned.get(member), c.generations.get(member),
                        Optional.empty());
                }
                subscriptions.put(member, s);
            });
            prepared = new GroupSubscription(subscriptions);
            assignor = factory.create(); // the sticky assignors keep per-call state
        }

        @Override
        public Object call() {
            return assignor.assign(cluster, prepared);
        }

        @Override
        public Plan toPlan(Object result) {
            Plan plan = new Plan();
            for (String member : c.subscriptions.keySet()) {
                plan.put(member, new TreeMap<>());
            }
            ((ConsumerPartitionAssignor.GroupAssignment) result).groupAssignment().forEach((member, a) -> {
                Map<String, List<Integer>> topics = plan.computeIfAbsent(member, m -> new TreeMap<>());
                for (TopicPartition tp : a.partitions()) {
                    topics.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
                }
            });
            plan.values().forEach(t -> t.values().forEach(Collections::sort));
            return plan;
        }

        /** The case with owned partitions replaced by {@code plan} and generations raised by one. */
        static BenchCase followUp(BenchCase c, Plan plan) {
            BenchCase next = new BenchCase();
            next.topics.putAll(c.topics);
            next.subscriptions.putAll(c.subscriptions);
            plan.forEach((member, topics) -> {
                List<TopicPartition> owned = new ArrayList<>();
                topics.forEach((topic, ps) -> ps.forEach(p -> owned.add(new TopicPartition(topic, p))));
                next.owned.put(member, owned);
                next.generations.put(member, c.generations.get(member) + 1);
            });
            return next;
        }
    }

    // ----------------------------------------------------------------------------- server side

    /**
     * The KIP-848 {@code UniformAssignor}. The group spec is the coordinator's own implementation;
     * the topic describer is a small map because the coordinator's needs a metadata image. Members
     * are listed in sorted order, as the results depend on it.
     */
    static final class UniformTrial implements Trial {
        private final Map<String, Uuid> ids = new HashMap<>();
        private final Map<Uuid, String> names = new HashMap<>();
        private final GroupSpec spec;
        private final SubscribedTopicDescriber describer;
        private final UniformAssignor assignor = new UniformAssignor();

        UniformTrial(BenchCase c) {
            long next = 1;
            Map<Uuid, Integer> partitionCounts = new HashMap<>();
            for (Map.Entry<String, Integer> topic : c.topics.entrySet()) {
                Uuid id = new Uuid(0x6b61666b61L, next++);
                ids.put(topic.getKey(), id);
                names.put(id, topic.getKey());
                partitionCounts.put(id, topic.getValue());
            }
            Map<String, MemberSubscriptionAndAssignmentImpl> members = new LinkedHashMap<>();
            Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
            for (Map.Entry<String, List<String>> member : c.subscriptions.entrySet()) {
                Set<Uuid> topics = new HashSet<>();
                member.getValue().forEach(t -> {
                    if (ids.containsKey(t)) {
                        topics.add(ids.get(t));
                    }
                });
                Map<Uuid, Set<Integer>> owned = new HashMap<>();
                for (TopicPartition tp : c.owned.get(member.getKey())) {
                    Uuid id = ids.get(tp.topic());
                    owned.computeIfAbsent(id, k -> new HashSet<>()).add(tp.partition());
                    inverted.computeIfAbsent(id, k -> new HashMap<>()).put(tp.partition(), member.getKey());
                }
                Assignment target = owned.isEmpty() ? Assignment.EMPTY : new Assignment(owned);
                members.put(member.getKey(), new MemberSubscriptionAndAssignmentImpl(
                    Optional.empty(), Optional.empty(), Collections.unmodifiableSet(topics), target));
            }
            SubscriptionType type = c.identicalSubscriptions()
                ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
            spec = new GroupSpecImpl(Collections.unmodifiableMap(members), type, inverted);
            describer = new SubscribedTopicDescriber() {
                @Override
                public int numPartitions(Uuid topicId) {
                    return partitionCounts.getOrDefault(topicId, -1);
                }

                @Override
                public Set<String> racksForPartition(Uuid topicId, int partition) {
                    return Set.of();
                }
            };
        }

        @Override
        public void prepare() {
            // The assignor is copy-on-write and never mutates its inputs: nothing to rebuild.
        }

        @Override
        public Object call() {
            return assignor.assign(spec, describer);
        }

        @Override
        public Plan toPlan(Object result) {
            Plan plan = new Plan();
            Map<String, MemberAssignment> members =
                ((org.apache.kafka.coordinator.group.api.assignor.GroupAssignment) result).members();
            for (String member : spec.memberIds()) {
                Map<String, List<Integer>> topics = new TreeMap<>();
                MemberAssignment a = members.get(member);
                if (a != null) {
                    a.partitions().forEach((id, ps) -> {
                        List<Integer> sorted = new ArrayList<>(ps);
                        Collections.sort(sorted);
                        if (!sorted.isEmpty()) {
                            topics.put(names.get(id), sorted);
                        }
                    });
                }
                plan.put(member, topics);
            }
            return plan;
        }
    }

    static int count(Plan plan) {
        int n = 0;
        for (Map<String, List<Integer>> topics : plan.values()) {
            for (Collection<Integer> ps : topics.values()) {
                n += ps.size();
            }
        }
        return n;
    }

    private KafkaAssignors() {}
}
