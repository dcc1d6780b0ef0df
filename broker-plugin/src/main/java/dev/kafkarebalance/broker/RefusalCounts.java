package dev.kafkarebalance.broker;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Plan records refused, per reason: incremented by the plan reader's thread, read by anyone (the
 * JMX view {@link PlanStoreMetrics}, tests). Counts only grow. The reasons in {@link #KNOWN}
 * always show, at 0 until the first refusal, so a dashboard can name them before they happen.
 */
public final class RefusalCounts {
    /** Every reason the plug-in refuses a record for (docs/security.md lists them). */
    public static final List<String> KNOWN = List.of(
        PlanStore.Refusal.STALE_EPOCH,
        PlanStore.Refusal.OTHER_INCARNATION,
        PlanStore.Refusal.RETIRED_INCARNATION,
        "tombstone-unnamed",
        "unauthenticated",
        "malformed",
        "no-key",
        "failed");

    private final ConcurrentMap<String, AtomicLong> counts = new ConcurrentHashMap<>();

    /** Counts one refusal for `reason`; returns the count for it so far. */
    public long increment(String reason) {
        return counts.computeIfAbsent(reason, r -> new AtomicLong()).incrementAndGet();
    }

    /** The count for `reason` (0 when none yet). */
    public long get(String reason) {
        AtomicLong count = counts.get(reason);
        return count == null ? 0 : count.get();
    }

    /** Every refusal so far, whatever its reason. */
    public long total() {
        long total = 0;
        for (AtomicLong count : counts.values()) {
            total += count.get();
        }
        return total;
    }

    /** The reasons counted so far with their counts (no zeros). */
    public Map<String, Long> counted() {
        Map<String, Long> result = new TreeMap<>();
        counts.forEach((reason, count) -> result.put(reason, count.get()));
        return result;
    }

    /** The known reasons (0 when not seen) and any other counted so far. */
    public Map<String, Long> all() {
        Map<String, Long> result = new TreeMap<>();
        KNOWN.forEach(reason -> result.put(reason, 0L));
        result.putAll(counted());
        return result;
    }
}
