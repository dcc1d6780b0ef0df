package dev.kafkarebalance.broker;

import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;

import org.apache.kafka.common.Configurable;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignor;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A KIP-1357 streams task assignor ({@code group.streams.assignors}, chosen per group with the
 * group config {@code streams.assignor.name=kafka-rebalance-plan}) that follows the operator's
 * plans of active tasks per streams member (records of {@code kind:"streams"}, {@link PlanCodec}).
 *
 * <p>The group's plan is the one streams plan naming one of its member ids
 * ({@link PlanStore#selectStreams}). Everything the plan does not decide is Kafka's own: the
 * broker's built-in streams {@link StickyTaskAssignor} assigns the group with the plan presented
 * as the members' previous tasks ({@link PlanHintedGroupSpec}), and {@link TaskPlacement} then
 * moves each planned task to its planned member and re-places the standbys so that no process
 * holds a task twice: the plan's standbys when it places them (dropping, counted by reason, those
 * on their active's process or for tasks the group does not have), else the fallback's. Without a
 * usable plan (none, another group's, another kind, stale) the group gets exactly the sticky assignor's result, and the broker log says why. Whatever the plan says,
 * every task of every subtopology is assigned exactly once as active: a planned task of an unknown
 * subtopology or partition is ignored, an unplanned one goes to the fallback.
 *
 * <p>The recompute trigger is the reserved rack-aware tag key {@link TriggerTag#KEY}, which this
 * assignor removes from the group's configs before anything else sees them.
 *
 * <p>Standby replicas follow the group's {@code streams.num.standby.replicas} (in
 * {@code GroupSpec.configs()}); warm-up tasks are not the assignor's output in Kafka 4.4: members'
 * warm-up tasks count as state they hold (the sticky assignor and the standby re-placement prefer
 * them), and the coordinator derives warm-ups from the target assignment itself.
 *
 * <p>{@link #assign} may run on the coordinator thread (or its assignment offload thread): it only
 * reads the in-memory {@link PlanStore}, which the one shared background {@link PlanTopicReader}
 * fills for this assignor and {@link PlanFollowingAssignor} alike. Thread-safe: no mutable state
 * is shared between calls but the concurrent store and the once-only log memo.
 */
public class PlanFollowingTaskAssignor implements TaskAssignor, Configurable, AutoCloseable {
    public static final String NAME = "kafka-rebalance-plan";
    private static final Logger LOG = LoggerFactory.getLogger(PlanFollowingTaskAssignor.class);

    private final TaskAssignor fallback = new StickyTaskAssignor();
    private final OnceLog once = new OnceLog();
    private final Clock clock;
    private final PlanSource source;

    /** What the broker instantiates (public no-argument constructor). */
    public PlanFollowingTaskAssignor() {
        this(new PlanStore(), Clock.systemUTC(), PluginConfig.DEFAULT_MAX_AGE_MS);
    }

    /** For tests and embedding: plans come from `store`, which the caller fills. */
    public PlanFollowingTaskAssignor(PlanStore store, Clock clock, long maxAgeMs) {
        this.source = new PlanSource(store, maxAgeMs);
        this.clock = clock;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public void configure(Map<String, ?> configs) {
        source.configure(configs, name(), "Kafka's sticky task assignment");
    }

    @Override
    public void close() {
        source.close();
    }

    @Override
    public GroupAssignment assign(GroupSpec group, TopologyDescriber topology) throws TaskAssignorException {
        GroupSpec groupSpec = TriggerTag.neutral(group);
        List<String> members = new ArrayList<>(new TreeSet<>(groupSpec.memberIds()));
        Optional<Plan> plan = usablePlan(members);
        if (plan.isEmpty()) {
            return fallback.assign(groupSpec, topology);
        }
        PlannedTasks planned = PlannedTasks.of(plan.get(), members, topology);
        if (planned.planned() == 0) {
            LOG.warn("{}: sticky task assignment: {} places no task of this group's topology ({} planned tasks "
                + "ignored, {} planned members absent)", name(), plan.get().describe(), planned.ignored(),
                planned.absentMembers());
            return fallback.assign(groupSpec, topology);
        }
        GroupAssignment hinted = fallback.assign(new PlanHintedGroupSpec(groupSpec, members, planned), topology);
        TaskPlacement.Outcome outcome = TaskPlacement.follow(groupSpec, members, topology, planned, hinted);
        long total = 0;
        for (String subtopology : topology.subtopologies()) {
            total += Math.max(0, topology.maxNumInputPartitions(subtopology));
        }
        long active = TaskPlacement.activeCount(outcome.assignment());
        if (active != total) {  // cannot happen (TaskPlacement's invariant); never hand out a broken assignment
            LOG.error("{}: following {} gave {} active tasks for {} tasks; using the sticky assignment instead",
                name(), plan.get().describe(), active, total);
            return fallback.assign(groupSpec, topology);
        }
        String summary = "{}: following {}: {} of {} tasks planned ({} moved from where sticky put them), {} by "
            + "sticky fallback; standbys: {} from the plan, {} dropped, {} re-placed, {} short{}";
        String refused = outcome.standbyRefusals().isEmpty() ? ""
            : "; planned standbys not followed: " + outcome.standbyRefusals();
        Object[] args = {name(), plan.get().describe(), planned.planned(), total, outcome.movedByPlan(),
            total - planned.planned(), planned.hasStandbys() ? String.valueOf(outcome.standbysFollowed()) : "none",
            outcome.standbysDropped(), outcome.standbysPlaced(), outcome.standbysMissing(), refused};
        if (planned.ignored() > 0 || planned.absentMembers() > 0 || !outcome.standbyRefusals().isEmpty()) {
            LOG.warn(summary + "; {} planned tasks ignored (unknown subtopology or partition), {} planned members "
                + "not in the group", append(args, planned.ignored(), planned.absentMembers()));
        } else {
            LOG.info(summary, args);
        }
        return outcome.assignment();
    }

    private static Object[] append(Object[] args, Object... more) {
        Object[] out = new Object[args.length + more.length];
        System.arraycopy(args, 0, out, 0, args.length);
        System.arraycopy(more, 0, out, args.length, more.length);
        return out;
    }

    /** The plan to follow, or empty (and a broker-log line saying why) if there is none. */
    private Optional<Plan> usablePlan(List<String> members) {
        PlanStore.Selection selection = source.store().selectStreams(members);
        if (selection.plan().isEmpty()) {
            if (!selection.logOnce() || once.first(selection.reason())) {
                LOG.warn("{}: sticky task assignment for {} members: {}", name(), members.size(), selection.reason());
            }
            return Optional.empty();
        }
        Plan plan = selection.plan().get();
        long limit = source.maxAgeMs();
        if (limit > 0 && plan.generatedAtMs() > 0) {
            long age = clock.millis() - plan.generatedAtMs();
            if (age > limit) {
                LOG.warn("{}: sticky task assignment: {} is stale ({} ms old, {} allows {} ms)",
                    name(), plan.describe(), age, PluginConfig.MAX_AGE, limit);
                return Optional.empty();
            }
        }
        return Optional.of(plan);
    }
}
