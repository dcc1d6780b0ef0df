package dev.kafkarebalance.broker;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

/**
 * The in-memory plans, keyed by group id: written only by the background reader, read by the
 * assignor on the coordinator thread. Reads never block and never do I/O.
 *
 * <p>Order: within one incarnation (the publishing policy's uid) a plan of a lower epoch never
 * replaces a higher one; a plan of another incarnation replaces the current one only if it was
 * generated no earlier. So a replayed or reordered record cannot roll a group back.
 *
 * <p>Selection: the coordinator does not tell an assignor which group it is assigning
 * ({@code GroupSpec} carries no group id, up to Kafka 4.4), and instance ids are unique only
 * within a group. So a plan carries the group's KIP-848 member ids as the operator last saw them
 * (client-generated UUIDs: no two groups share one), and a plan is followed for a group when it
 * names the group's instance ids and shares a member id with it. A plan without member ids
 * (version 1) is followed only if it is the only one naming those instance ids.
 *
 * <p>Kinds: {@link #select} considers consumer-group plans only and {@link #selectStreams}
 * streams plans only ({@link PlanKind}); a plan of the other kind sharing a member id with the
 * group is named in the reason, which is then marked to be logged once, not at every assignment.
 */
public final class PlanStore {
    private final ConcurrentMap<String, Plan> plans = new ConcurrentHashMap<>();

    /** Stores `plan` unless it would roll its group back; returns why it was not stored. */
    public Optional<String> put(Plan plan) {
        String[] refusal = new String[1];
        plans.compute(plan.group(), (group, current) -> {
            refusal[0] = older(plan, current);
            return refusal[0] == null ? plan : current;
        });
        return Optional.ofNullable(refusal[0]);
    }

    private static String older(Plan plan, Plan current) {
        if (current == null) {
            return null;
        }
        if (plan.incarnation().equals(current.incarnation())) {
            return plan.epoch() < current.epoch()
                ? "epoch " + plan.epoch() + " is below epoch " + current.epoch() + " already held for this policy"
                : null;
        }
        return plan.generatedAtMs() < current.generatedAtMs()
            ? "it is from another policy incarnation and older than the plan held (epoch " + current.epoch() + ")"
            : null;
    }

    public void remove(String group) {
        plans.remove(group);
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
            Optional<Selection> other = otherKind(PlanKind.STREAMS, memberIds);
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
        List<Plan> unqualified = named.stream().filter(p -> p.memberIds().isEmpty()).toList();
        if (unqualified.size() == 1 && named.size() == 1) {
            return new Selection(Optional.of(unqualified.get(0)), "");
        }
        if (named.size() > 1 && unqualified.size() == named.size()) {
            return ambiguous(named, "name the members' instance ids and carry no member ids");
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
        return otherKind(PlanKind.CONSUMER, memberIds).orElse(new Selection(Optional.empty(),
            "no streams plan names any of the group's member ids (no plan yet, a plan of another group, or the "
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
        return false;
    }

    /** A reason naming the plans of kind `other` that share a member id with the group, if any. */
    private Optional<Selection> otherKind(PlanKind other, Collection<String> memberIds) {
        Set<String> members = Set.copyOf(memberIds);
        List<String> groups = plans.values().stream()
            .filter(p -> p.kind() == other && sharesMember(p, members))
            .map(p -> p.group() + "@" + p.epoch()).sorted().toList();
        if (groups.isEmpty()) {
            return Optional.empty();
        }
        PlanKind wanted = other == PlanKind.STREAMS ? PlanKind.CONSUMER : PlanKind.STREAMS;
        return Optional.of(new Selection(Optional.empty(), "the plans " + groups + " naming this group's member ids "
            + "are of kind '" + other.wire() + "'; this assignor follows only '" + wanted.wire() + "' plans "
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
