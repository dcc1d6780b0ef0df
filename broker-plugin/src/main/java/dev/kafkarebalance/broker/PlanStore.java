package dev.kafkarebalance.broker;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.Uuid;

/**
 * The in-memory plans, keyed by group id: written only by the background reader, read by the
 * assignor on the coordinator thread. Reads never block and never do I/O.
 *
 * <p>Binding: each group is bound to one policy incarnation (the publishing policy's uid). Within
 * it a plan of a lower epoch never replaces a higher one. A plan of another incarnation is refused
 * while the bound one holds the group: it replaces it only after the bound incarnation's signed
 * tombstone ({@link #retire}), or once the bound plan is older than the max age by the newcomer's
 * own generation time (a policy deleted while its tombstone could not be written must not hold
 * its group for ever). A retired incarnation's records are refused from then on, so neither a
 * replayed plan nor a replayed tombstone of it changes anything.
 *
 * <p>Selection: the coordinator does not tell an assignor which group it is assigning
 * ({@code GroupSpec} carries no group id, up to Kafka 4.4), and instance ids are unique only
 * within a group. So a plan carries the group's KIP-848 member ids as the operator last saw them
 * (client-generated UUIDs: no two groups share one), and a plan is followed for a group only when
 * it names the group's instance ids and shares a member id with it: a plan without member ids is
 * never followed.
 *
 * <p>Bounds, in every mode (signed or not): at most {@code maxGroups} plans and
 * {@code maxPartitions} planned partitions (or tasks) in all are kept; a plan that would pass
 * either evicts the other plans generated longest ago (counted), whose groups fall back until
 * their next plan.
 *
 * <p>Kinds: {@link #select} considers consumer-group plans only and {@link #selectStreams}
 * streams plans only ({@link PlanKind}); a plan of the other kind sharing a member id with the
 * group is named in the reason, which is then marked to be logged once, not at every assignment.
 */
public final class PlanStore {
    /** Retired incarnations remembered per group (a policy recreated this often is unusual). */
    static final int RETIRED_PER_GROUP = 16;

    private final ConcurrentMap<String, Plan> plans = new ConcurrentHashMap<>();
    private final Map<String, Set<String>> retired = new LinkedHashMap<>(16, 0.75f, true);
    private final long maxAgeMs;
    private final int maxGroups;
    private final long maxPartitions;
    private long partitions;
    private final AtomicLong evictions = new AtomicLong();
    private final RefusalCounts refusals = new RefusalCounts();

    /** A store without bounds or expiry (tests). */
    public PlanStore() {
        this(0, Integer.MAX_VALUE, Long.MAX_VALUE);
    }

    /**
     * @param maxAgeMs      a bound plan older than this (by the newcomer's generatedAt) no longer
     *                      holds its group against another incarnation; 0: no expiry
     * @param maxGroups     how many groups' plans are kept at most
     * @param maxPartitions how many planned partitions (or tasks) all plans hold at most
     */
    public PlanStore(long maxAgeMs, int maxGroups, long maxPartitions) {
        if (maxGroups < 1 || maxPartitions < 1) {
            throw new IllegalArgumentException("the bounds must be at least 1, got " + maxGroups + " groups and "
                + maxPartitions + " partitions");
        }
        this.maxAgeMs = maxAgeMs;
        this.maxGroups = maxGroups;
        this.maxPartitions = maxPartitions;
    }

    /** Planned partitions of a consumer plan, tasks of a streams plan: what its memory grows with. */
    static long size(Plan plan) {
        long count = 0;
        for (Map<Uuid, Set<Integer>> topics : plan.members().values()) {
            for (Set<Integer> owned : topics.values()) {
                count += owned.size();
            }
        }
        for (Map<String, Set<Integer>> subtopologies : plan.tasks().values()) {
            for (Set<Integer> owned : subtopologies.values()) {
                count += owned.size();
            }
        }
        return count;
    }

    /** Why a plan or tombstone was refused: a counter's name and a line for the log. */
    public record Refusal(String reason, String text) {
        static final String STALE_EPOCH = "stale-epoch";
        static final String OTHER_INCARNATION = "other-incarnation";
        static final String RETIRED_INCARNATION = "retired-incarnation";
    }

    /** Stores `plan` unless a rule above refuses it; returns why it was not stored. */
    public synchronized Optional<Refusal> put(Plan plan) {
        Set<String> gone = retired.get(plan.group());
        if (gone != null && gone.contains(plan.incarnation())) {
            return Optional.of(new Refusal(Refusal.RETIRED_INCARNATION,
                "its policy incarnation '" + plan.incarnation() + "' was retired (tombstone)"));
        }
        Plan current = plans.get(plan.group());
        Refusal refusal = refusal(plan, current);
        if (refusal != null) {
            return Optional.of(refusal);
        }
        plans.put(plan.group(), plan);
        partitions += size(plan) - (current == null ? 0 : size(current));
        while (plans.size() > maxGroups || (partitions > maxPartitions && plans.size() > 1)) {
            evictOldestBut(plan.group());
        }
        return Optional.empty();
    }

    private Refusal refusal(Plan plan, Plan current) {
        if (current == null) {
            return null;
        }
        if (plan.incarnation().equals(current.incarnation())) {
            return plan.epoch() < current.epoch() ? new Refusal(Refusal.STALE_EPOCH, "epoch " + plan.epoch()
                + " is below epoch " + current.epoch() + " already held for this policy") : null;
        }
        boolean expired = maxAgeMs > 0 && plan.generatedAtMs() - current.generatedAtMs() > maxAgeMs;
        return expired ? null : new Refusal(Refusal.OTHER_INCARNATION, "the group is bound to policy incarnation '"
            + current.incarnation() + "' (epoch " + current.epoch() + ") until that incarnation's tombstone");
    }

    private void evictOldestBut(String kept) {
        plans.values().stream()
            .filter(p -> !p.group().equals(kept))
            .min(Comparator.comparingLong(Plan::generatedAtMs).thenComparing(Plan::group))
            .ifPresent(oldest -> {
                dropPlan(oldest.group());
                evictions.incrementAndGet();
            });
    }

    private void dropPlan(String group) {
        Plan gone = plans.remove(group);
        if (gone != null) {
            partitions -= size(gone);
        }
    }

    /** Planned partitions (and tasks) all plans hold now. */
    public synchronized long partitions() {
        return partitions;
    }

    /**
     * The signed tombstone of (group, incarnation, epoch): removes the group's plan if it is that
     * incarnation's at an epoch no higher, and retires the incarnation for the group either way.
     * Returns why the plan held was kept, or empty when the tombstone took effect.
     */
    public synchronized Optional<Refusal> retire(String group, String incarnation, long epoch) {
        Plan current = plans.get(group);
        if (current != null && current.incarnation().equals(incarnation) && epoch < current.epoch()) {
            return Optional.of(new Refusal(Refusal.STALE_EPOCH,
                "its epoch " + epoch + " is below the plan's epoch " + current.epoch()));
        }
        Set<String> gone = retired.computeIfAbsent(group, g -> new LinkedHashSet<>());
        gone.add(incarnation);
        if (gone.size() > RETIRED_PER_GROUP) {
            gone.remove(gone.iterator().next());
        }
        if (retired.size() > maxGroups) {
            retired.remove(retired.keySet().iterator().next());
        }
        if (current != null && current.incarnation().equals(incarnation)) {
            dropPlan(group);
            return Optional.empty();
        }
        return current == null ? Optional.empty() : Optional.of(new Refusal(Refusal.OTHER_INCARNATION,
            "the group is bound to another incarnation '" + current.incarnation() + "'"));
    }

    /** Records refused for this store, per reason (counted by its reader; JMX: {@link PlanStoreMetrics}). */
    public RefusalCounts refusals() {
        return refusals;
    }

    /** Plans evicted to stay within the bound on groups. */
    public long evictions() {
        return evictions.get();
    }

    public synchronized void remove(String group) {
        dropPlan(group);
    }

    public Optional<Plan> get(String group) {
        return Optional.ofNullable(plans.get(group));
    }

    public int size() {
        return plans.size();
    }

    /** The plan to follow for a group with these instance ids and member ids, or why none. */
    public Selection select(Collection<String> instanceIds, Collection<String> memberIds) {
        List<Plan> named = new ArrayList<>();
        for (Plan plan : plans.values()) {
            if (plan.kind() != PlanKind.CONSUMER) {
                continue;
            }
            for (String instance : instanceIds) {
                if (plan.members().containsKey(instance)) {
                    named.add(plan);
                    break;
                }
            }
        }
        if (named.isEmpty()) {
            Optional<Selection> other = otherKind(PlanKind.CONSUMER, memberIds);
            if (other.isPresent()) {
                return other.get();
            }
            return new Selection(Optional.empty(), instanceIds.isEmpty()
                ? "no member has a group.instance.id (static membership is how plans name members)"
                : "no plan names any of the members' instance ids");
        }
        Set<String> members = Set.copyOf(memberIds);
        List<Plan> own = named.stream().filter(p -> p.memberIds().stream().anyMatch(members::contains)).toList();
        if (own.size() == 1) {
            return new Selection(Optional.of(own.get(0)), "");
        }
        if (own.size() > 1) {
            return ambiguous(own, "share member ids with this group");
        }
        List<String> groups = named.stream().map(Plan::group).sorted().toList();
        return new Selection(Optional.empty(), "the plans naming the members' instance ids " + groups
            + " were made for other members (no member id in common): plans of other groups, or this "
            + "group's members all restarted since its plan; the operator publishes it again");
    }

    /**
     * The streams plan to follow for a streams group with these member ids, or why none: the one
     * streams plan that names one of them (in its {@code memberIds} or as a planned member).
     * Streams member ids are client-generated UUIDs, so no two groups share one.
     */
    public Selection selectStreams(Collection<String> memberIds) {
        Set<String> members = Set.copyOf(memberIds);
        List<Plan> own = new ArrayList<>();
        for (Plan plan : plans.values()) {
            if (plan.kind() == PlanKind.STREAMS && sharesMember(plan, members)) {
                own.add(plan);
            }
        }
        if (own.size() == 1) {
            return new Selection(Optional.of(own.get(0)), "");
        }
        if (own.size() > 1) {
            return ambiguous(own, "name member ids of this group");
        }
        return otherKind(PlanKind.STREAMS, memberIds).orElse(new Selection(Optional.empty(),
            "no streams plan names any of the group's member ids (no plan yet, a plan of another group, or the "
                + "members all restarted since the plan; the operator publishes it again)"));
    }

    /**
     * The share plan to follow for a share group with these member ids, or why none: the one share
     * plan that names one of them (in its {@code memberIds} or as a planned member). Share member
     * ids are client-generated UUIDs, so no two groups share one.
     */
    public Selection selectShare(Collection<String> memberIds) {
        Set<String> members = Set.copyOf(memberIds);
        List<Plan> own = new ArrayList<>();
        for (Plan plan : plans.values()) {
            if (plan.kind() == PlanKind.SHARE && sharesMember(plan, members)) {
                own.add(plan);
            }
        }
        if (own.size() == 1) {
            return new Selection(Optional.of(own.get(0)), "");
        }
        if (own.size() > 1) {
            return ambiguous(own, "name member ids of this group");
        }
        return otherKind(PlanKind.SHARE, memberIds).orElse(new Selection(Optional.empty(),
            "no share plan names any of the group's member ids (no plan yet, a plan of another group, or the "
                + "members all restarted since the plan; the operator publishes it again)"));
    }

    private static boolean sharesMember(Plan plan, Set<String> members) {
        for (String id : plan.memberIds()) {
            if (members.contains(id)) {
                return true;
            }
        }
        for (String id : plan.tasks().keySet()) {
            if (members.contains(id)) {
                return true;
            }
        }
        if (plan.kind() == PlanKind.SHARE) {
            for (String id : plan.members().keySet()) {
                if (members.contains(id)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** A reason naming the plans of kinds other than `wanted` that share a member id with the group, if any. */
    private Optional<Selection> otherKind(PlanKind wanted, Collection<String> memberIds) {
        Set<String> members = Set.copyOf(memberIds);
        List<Plan> others = plans.values().stream()
            .filter(p -> p.kind() != wanted && sharesMember(p, members)).toList();
        if (others.isEmpty()) {
            return Optional.empty();
        }
        List<String> groups = others.stream().map(p -> p.group() + "@" + p.epoch()).sorted().toList();
        String kinds = String.join("', '", others.stream().map(p -> p.kind().wire()).distinct().sorted().toList());
        return Optional.of(new Selection(Optional.empty(), "the plans " + groups + " naming this group's member ids "
            + "are of kind '" + kinds + "'; this assignor follows only '" + wanted.wire() + "' plans "
            + "(is the policy's groupType right?)", true));
    }

    private static Selection ambiguous(List<Plan> plans, String how) {
        List<String> groups = plans.stream().map(Plan::group).sorted().toList();
        return new Selection(Optional.empty(), "the plans of several groups " + groups + " " + how);
    }

    /**
     * A selected plan, or the reason no plan applies (for the broker log); `logOnce` marks a reason
     * that holds until the operator changes something (a plan of the other kind), logged once.
     */
    public record Selection(Optional<Plan> plan, String reason, boolean logOnce) {
        public Selection(Optional<Plan> plan, String reason) {
            this(plan, reason, false);
        }
    }
}
