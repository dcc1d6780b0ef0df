package dev.kafkarebalance.client;

import dev.kafkarebalance.client.Composer.Composition;
import dev.kafkarebalance.client.Composer.MemberView;
import java.io.Closeable;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code kafka-rebalance-plan} for Java consumers on the classic protocol: follows the operator's
 * plan from the pod's mounted assignment document, with no sidecar. One setting turns it on:
 *
 * <pre>partition.assignment.strategy=dev.kafkarebalance.client.PlanFollowingAssignor</pre>
 *
 * <p>Each member advertises its own document's claim in its subscription user_data; the elected
 * leader composes the group assignment from all claims ({@link Composer}), giving out what no claim
 * covers with Kafka's cooperative-sticky assignor. It speaks the Python sidecar's user_data byte
 * for byte ({@link UserData}), so one group may mix Java members and sidecars. Cooperative
 * (KIP-429): a partition moves in two rounds, revoked by its old owner first.
 *
 * <p>Settings (consumer properties, all optional):
 * <ul>
 * <li>{@value #DOCUMENT_PATH}: the mounted {@code assignment.json}; default
 * {@code /etc/kafka-rebalance/<member>/assignment.json};</li>
 * <li>{@value #MEMBER}: the document's member (the pod name); default {@code group.instance.id},
 * else {@code $POD_NAME}; a document for another member is refused;</li>
 * <li>{@value #POLL_MS} (1000), {@value #REJOIN} (true), {@value #REJOIN_MIN_MS} (5000),
 * {@value #REJOIN_MAX_MS} (120000): see {@link PlanFollower}.</li>
 * </ul>
 *
 * <p>Nothing here does I/O on the consumer's thread: {@code subscriptionUserData}, {@code assign}
 * and {@code onAssignment} run inside the JoinGroup handling, where a blocking call would stall
 * the whole consumer; the document is read by a background thread.
 */
public class PlanFollowingAssignor implements ConsumerPartitionAssignor, Configurable, Closeable {
    public static final String PREFIX = "kafka-rebalance.";
    public static final String DOCUMENT_PATH = PREFIX + "document.path";
    public static final String MEMBER = PREFIX + "member";
    public static final String POLL_MS = PREFIX + "document.poll.ms";
    public static final String REJOIN = PREFIX + "rejoin";
    public static final String REJOIN_MIN_MS = PREFIX + "rejoin.min.ms";
    public static final String REJOIN_MAX_MS = PREFIX + "rejoin.max.ms";
    static final String ROLE = PREFIX + "role";
    static final String ROLE_NUDGE = "nudge";
    public static final String DEFAULT_MOUNT = "/etc/kafka-rebalance";

    private static final Logger LOG = LoggerFactory.getLogger(PlanFollowingAssignor.class);

    private DocumentTracker tracker = new DocumentTracker(null, null);
    private PlanFollower follower;
    private Thread thread;
    private String member;
    // what this member last sent and was told; written on the consumer's thread
    private volatile Long sentEpoch;
    private volatile String sentPolicy;
    private volatile Long composedEpoch;
    private volatile Long claimEpochSeen;
    private volatile Integer generation;
    private volatile Set<TopicPartition> lastAssignment;
    private volatile Composition lastComposition;

    /** For tests and embedding: follow {@code tracker}'s document, with no file and no thread. */
    public static PlanFollowingAssignor following(DocumentTracker tracker) {
        PlanFollowingAssignor assignor = new PlanFollowingAssignor();
        assignor.tracker = tracker;
        return assignor;
    }

    @Override
    public void configure(Map<String, ?> configs) {
        if (ROLE_NUDGE.equals(string(configs, ROLE))) {
            return; // the nudge member: no document, no thread
        }
        String group = string(configs, "group.id");
        member = string(configs, MEMBER);
        if (member == null) {
            member = string(configs, "group.instance.id");
        }
        if (member == null) {
            member = System.getenv("POD_NAME");
        }
        String pathSetting = string(configs, DOCUMENT_PATH);
        if (pathSetting == null && member == null) {
            throw new org.apache.kafka.common.config.ConfigException(DOCUMENT_PATH
                + ": not set, and no member name to find the default path by (set " + MEMBER
                + ", group.instance.id or $POD_NAME)");
        }
        Path path = Path.of(pathSetting != null ? pathSetting : DEFAULT_MOUNT + "/" + member + "/assignment.json");
        tracker = new DocumentTracker(group, member);
        follower = new PlanFollower(this, tracker, path, number(configs, POLL_MS, 1000),
            !"false".equalsIgnoreCase(String.valueOf(configs.get(REJOIN))),
            number(configs, REJOIN_MIN_MS, 5000), number(configs, REJOIN_MAX_MS, 120_000), configs);
        follower.readOnce(); // a document already mounted goes into the first JoinGroup
        thread = new Thread(follower, "kafka-rebalance-plan-" + (member != null ? member : group));
        thread.setDaemon(true);
        thread.start();
        LOG.info("following the plan in {} (group {}, member {})", path, group, member);
    }

    private static String string(Map<String, ?> configs, String key) {
        Object value = configs.get(key);
        return value == null || value.toString().isEmpty() ? null : value.toString();
    }

    private static long number(Map<String, ?> configs, String key, long fallback) {
        Object value = configs.get(key);
        if (value == null) {
            return fallback;
        }
        try {
            long parsed = Long.parseLong(value.toString().trim());
            if (parsed <= 0) {
                throw new NumberFormatException();
            }
            return parsed;
        } catch (NumberFormatException e) {
            throw new org.apache.kafka.common.config.ConfigException(key, value, "not a positive number of milliseconds");
        }
    }

    @Override
    public void close() {
        if (follower != null) {
            follower.stop();
            thread.interrupt();
        }
    }

    @Override
    public String name() {
        return UserData.ASSIGNOR_NAME;
    }

    @Override
    public List<RebalanceProtocol> supportedProtocols() {
        return List.of(RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER);
    }

    // -- the member's side -----------------------------------------------------------------

    @Override
    public ByteBuffer subscriptionUserData(Set<String> topics) {
        AssignmentDocument document = tracker.current();
        sentEpoch = document != null ? document.epoch() : null;
        sentPolicy = document != null ? document.policyUid() : null;
        return ByteBuffer.wrap(UserData.encodeClaim(document));
    }

    @Override
    public void onAssignment(Assignment assignment, ConsumerGroupMetadata metadata) {
        byte[] raw = UserData.bytes(assignment.userData());
        composedEpoch = UserData.decodeComposed(raw);
        claimEpochSeen = UserData.decodeClaimEpoch(raw);
        generation = metadata != null ? metadata.generationId() : null;
        lastAssignment = Set.copyOf(assignment.partitions());
        LOG.info("assignment at generation {} from epoch {}: {} partitions", generation, composedEpoch,
            assignment.partitions().size());
    }

    /**
     * Why the group should rebalance for this member's document, or null when the assignment in
     * force follows it (or nothing can be said yet: no document, never joined, a leader that is not
     * plan-following).
     */
    String rebalanceReason() {
        AssignmentDocument document = tracker.current();
        if (document == null || generation == null) {
            return null;
        }
        long epoch = document.epoch();
        Long sent = sentEpoch;
        if (sent == null || sent < epoch) {
            return "new document epoch " + epoch + " (the group has the claim of "
                + (sent == null ? "no document" : "epoch " + sent) + ")";
        }
        String policy = document.policyUid();
        String sentIn = sentPolicy;
        if (!policy.isEmpty() && !policy.equals(sentIn)) {
            // a recreated policy's epochs start again: its document's epoch may be below the one sent
            return "new policy incarnation " + policy + " (the group has the claim of "
                + (sentIn == null || sentIn.isEmpty() ? "no named incarnation" : "incarnation " + sentIn) + ")";
        }
        return staleReason(epoch, composedEpoch, claimEpochSeen);
    }

    /** The Python sidecar's {@code stale_reason}: why the last assignment does not follow the document. */
    static String staleReason(long documentEpoch, Long composed, Long claimSeen) {
        if (composed != null && composed < documentEpoch) {
            return "assignment composed from epoch " + composed + ", document is at " + documentEpoch;
        }
        if (claimSeen != null && claimSeen < documentEpoch) {
            String seen = claimSeen < 0 ? "no claim" : "the claim of epoch " + claimSeen;
            return "the leader saw " + seen + " from this member, document is at " + documentEpoch;
        }
        return null;
    }

    // -- the leader's side -----------------------------------------------------------------

    /**
     * The leader trusts the plan, not the claims ({@link Composer#trust}): a claim above the epoch
     * of the document this leader read itself (or any claim, when it has none), or naming another
     * policy incarnation than that document, is treated as no claim, so a member that sends a
     * huge epoch wins nothing, and after a policy is recreated (a new incarnation starting at
     * epoch 1) claims of the old incarnation, at any epoch, no longer compete with the new plan.
     * Owned partitions count (for stickiness and the KIP-429 hold-back) only from members of the
     * group's current generation, as Kafka's cooperative-sticky assignor does, or from members
     * that report no generation at all.
     */
    @Override
    public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
        Map<String, Subscription> subscriptions = groupSubscription.groupSubscription();
        List<MemberView> views = new ArrayList<>();
        Set<String> topics = new TreeSet<>();
        Map<String, Long> claimEpochs = new HashMap<>();
        int withoutClaim = 0;
        int untrusted = 0;
        int otherIncarnation = 0;
        Set<Long> epochs = new TreeSet<>();
        AssignmentDocument own = tracker.current();
        long bound = own != null ? own.epoch() : UserData.NO_EPOCH;
        String ownPolicy = own != null ? own.policyUid() : "";
        int generation = subscriptions.values().stream()
            .mapToInt(s -> s.generationId().orElse(-1)).max().orElse(-1);
        for (Map.Entry<String, Subscription> e : new TreeMap<>(subscriptions).entrySet()) {
            Subscription s = e.getValue();
            topics.addAll(s.topics());
            Map<String, List<Integer>> owned = new HashMap<>();
            // a member that reports no generation (an older protocol version, kafka-python) keeps
            // its owned partitions: withholding them is the safe side of the KIP-429 hold-back
            int memberGeneration = s.generationId().orElse(-1);
            if (memberGeneration < 0 || memberGeneration == generation) {
                for (TopicPartition tp : s.ownedPartitions()) {
                    owned.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
                }
            }
            UserData.Claim claim = UserData.decodeClaim(UserData.bytes(s.userData()));
            Composer.Trust trust = Composer.trust(claim, bound, ownPolicy);
            if (trust == Composer.Trust.OTHER_INCARNATION) {
                otherIncarnation++;
                LOG.warn("ignored the claim of epoch {} from member {}: policy incarnation {}, not {} of the plan"
                    + " this leader read", claim.epoch(), e.getKey(), claim.policy(), ownPolicy);
                claim = null;
            } else if (trust == Composer.Trust.ABOVE_EPOCH) {
                untrusted++;
                LOG.warn("ignored the claim of epoch {} from member {}: above epoch {} of the plan this leader read",
                    claim.epoch(), e.getKey(), bound);
                claim = null;
            }
            claimEpochs.put(e.getKey(), claim != null ? claim.epoch() : UserData.NO_EPOCH);
            if (claim == null) {
                withoutClaim++;
            } else {
                epochs.add(claim.epoch());
            }
            views.add(new MemberView(e.getKey(), s.groupInstanceId().orElse(null),
                new LinkedHashSet<>(s.topics()), claim, owned));
        }
        Map<String, Integer> counts = new TreeMap<>();
        for (String topic : topics) {
            Integer count = metadata.partitionCountForTopic(topic);
            if (count == null) {
                LOG.warn("no partition metadata for topic {}: assigning none of it", topic);
                continue;
            }
            counts.put(topic, count);
        }
        Composition composition = Composer.compose(views, counts);
        lastComposition = composition;
        LOG.info("composed assignment for {} members from epoch {} (claim epochs {}, members without a claim {},"
            + " claims above the leader's plan {}, claims of another policy incarnation {}): {} claimed,"
            + " {} by fallback, {} withheld, {} claims ignored",
            views.size(), composition.epoch(), epochs, withoutClaim, untrusted, otherIncarnation,
            composition.claimedPartitions(),
            composition.fallbackPartitions(),
            composition.withheld().size(), composition.ignoredClaims());
        Map<String, Assignment> result = new HashMap<>();
        composition.assignment().forEach((memberId, byTopic) -> {
            List<TopicPartition> partitions = new ArrayList<>();
            byTopic.forEach((topic, parts) -> parts.forEach(p -> partitions.add(new TopicPartition(topic, p))));
            byte[] userData = UserData.encodeComposed(composition.epoch(), claimEpochs.get(memberId));
            result.put(memberId, new Assignment(partitions, ByteBuffer.wrap(userData)));
        });
        return new GroupAssignment(result);
    }

    // -- what tests and applications may read back -----------------------------------------

    /** The document in force (null: none yet). */
    public AssignmentDocument document() {
        return tracker.current();
    }

    /** The claim epoch the last assignment was composed from (-1: none; null: not told). */
    public Long composedEpoch() {
        return composedEpoch;
    }

    /** The partitions of the last assignment (null before the first). */
    public Set<TopicPartition> lastAssignment() {
        return lastAssignment;
    }

    /** The last composition this member made as the leader (null if it never led). */
    public Composition lastComposition() {
        return lastComposition;
    }

    /** Rebalances this member asked the group for. */
    public long nudges() {
        return follower != null ? follower.nudges() : 0;
    }
}
