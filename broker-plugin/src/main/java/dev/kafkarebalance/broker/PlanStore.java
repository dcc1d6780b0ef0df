package dev.kafkarebalance.broker;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

/**
 * The in-memory plans, keyed by group id: written only by the background reader, read by the
 * assignor on the coordinator thread. Reads never block and never do I/O.
 *
 * <p>The coordinator does not tell an assignor which group it is assigning ({@code GroupSpec}
 * carries no group id), so a plan is found through the members' instance ids: the plan that
 * names any of them. Instance ids are unique only within a group, so if two groups' plans name
 * the group's instance ids, neither is followed (see {@link Selection}).
 */
public final class PlanStore {
    private final ConcurrentMap<String, Plan> plans = new ConcurrentHashMap<>();

    public void put(Plan plan) {
        plans.put(plan.group(), plan);
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

    /** The plan to follow for members with these instance ids, or why there is none. */
    public Selection select(Collection<String> instanceIds) {
        List<Plan> candidates = new ArrayList<>();
        for (Plan plan : plans.values()) {
            for (String instance : instanceIds) {
                if (plan.members().containsKey(instance)) {
                    candidates.add(plan);
                    break;
                }
            }
        }
        if (candidates.size() == 1) {
            return new Selection(Optional.of(candidates.get(0)), "");
        }
        if (candidates.isEmpty()) {
            return new Selection(Optional.empty(), instanceIds.isEmpty()
                ? "no member has a group.instance.id (static membership is how plans name members)"
                : "no plan names any of the members' instance ids");
        }
        List<String> groups = candidates.stream().map(Plan::group).sorted().toList();
        return new Selection(Optional.empty(),
            "the members' instance ids appear in the plans of several groups " + groups
                + " (instance ids must be unique across planned groups)");
    }

    /** A selected plan, or the reason no plan applies (for the broker log). */
    public record Selection(Optional<Plan> plan, String reason) {
    }
}
