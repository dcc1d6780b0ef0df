package dev.kafkarebalance.broker;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.common.Uuid;

/**
 * Places the partitions the plan does not cover, uniform-style and sticky: a partition stays with
 * its current owner while that owner subscribes to its topic and holds fewer than the group's
 * quota ({@code ceil(all partitions / members)}); the rest go, one by one, to the subscriber
 * holding the fewest partitions (ties to the smallest member id, so the result is deterministic).
 * Planned partitions count towards each member's load, so fallback partitions fill the members
 * the plan left light. Pure: no I/O, no state.
 */
final class StickyFallback {
    private StickyFallback() {
    }

    /**
     * @param assignment   member id -> topic id -> partitions; holds the planned partitions on
     *                     entry and receives the placed ones
     * @param leftover     (topic id, partition) pairs to place, each subscribed by some member
     * @param subscriptions member id -> subscribed topic ids
     * @param current      member id -> its current assignment (topic id -> partitions)
     */
    static void place(
        Map<String, Map<Uuid, Set<Integer>>> assignment,
        List<TopicPartitionId> leftover,
        Map<String, Set<Uuid>> subscriptions,
        Map<String, Map<Uuid, Set<Integer>>> current
    ) {
        if (assignment.isEmpty()) {
            return;
        }
        Map<String, Integer> load = new java.util.HashMap<>();
        int total = leftover.size();
        for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : assignment.entrySet()) {
            int n = e.getValue().values().stream().mapToInt(Set::size).sum();
            load.put(e.getKey(), n);
            total += n;
        }
        int quota = (total + assignment.size() - 1) / assignment.size();
        List<TopicPartitionId> rest = new ArrayList<>();
        Map<TopicPartitionId, String> owner = new java.util.HashMap<>();
        for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : current.entrySet()) {
            for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().entrySet()) {
                for (int p : t.getValue()) {
                    owner.put(new TopicPartitionId(t.getKey(), p), e.getKey());
                }
            }
        }
        for (TopicPartitionId tp : leftover) {
            String keeper = owner.get(tp);
            if (keeper != null && assignment.containsKey(keeper)
                && subscriptions.getOrDefault(keeper, Set.of()).contains(tp.topicId())
                && load.get(keeper) < quota) {
                give(assignment, load, keeper, tp);
            } else {
                rest.add(tp);
            }
        }
        Comparator<String> lightest = Comparator.<String>comparingInt(load::get).thenComparing(m -> m);
        for (TopicPartitionId tp : rest) {
            String best = null;
            for (String member : new TreeSet<>(assignment.keySet())) {
                if (subscriptions.getOrDefault(member, Set.of()).contains(tp.topicId())
                    && (best == null || lightest.compare(member, best) < 0)) {
                    best = member;
                }
            }
            if (best != null) {
                give(assignment, load, best, tp);
            }
        }
    }

    private static void give(
        Map<String, Map<Uuid, Set<Integer>>> assignment,
        Map<String, Integer> load,
        String member,
        TopicPartitionId tp
    ) {
        assignment.get(member).computeIfAbsent(tp.topicId(), t -> new TreeSet<>()).add(tp.partition());
        load.merge(member, 1, Integer::sum);
    }

    /** A partition by topic id, ordered by topic id then partition. */
    record TopicPartitionId(Uuid topicId, int partition) implements Comparable<TopicPartitionId> {
        @Override
        public int compareTo(TopicPartitionId other) {
            int byTopic = topicId.toString().compareTo(other.topicId.toString());
            return byTopic != 0 ? byTopic : Integer.compare(partition, other.partition);
        }
    }
}
