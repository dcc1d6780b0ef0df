package dev.kafkarebalance.broker;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.Uuid;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the plan reader does with one record of the plan topic, apart from fetching it: check its
 * signature ({@link PlanKeys}), decode it within the bounds ({@link PlanCodec}), resolve its
 * topic names to ids, and replace the group's plan in the {@link PlanStore}, which keeps a
 * group from rolling back to a lower epoch.
 *
 * <ul>
 *   <li>A record whose signature fails (when keys are configured) is ignored and counted: the
 *       group keeps its plan, since anyone who can write the topic could have written it.</li>
 *   <li>An authentic tombstone names the incarnation and epoch it retires ({@link PlanKeys});
 *       it removes that incarnation's plan and its later records are refused
 *       ({@link PlanStore#retire}). A tombstone naming none is refused.</li>
 *   <li>An authentic record that is refused (malformed, over a bound) removes the plan too (the
 *       group falls back rather than follow a plan the operator has since replaced).</li>
 * </ul>
 * Every refusal leaves one line in the broker log. Runs on the reader thread only (the resolver
 * may do I/O).
 */
final class PlanRecords {
    private static final Logger LOG = LoggerFactory.getLogger(PlanRecords.class);

    /** Topic name to id, asking the cluster when needed; empty while the topic is unknown. */
    interface TopicResolver {
        Optional<Uuid> resolve(String topic);
    }

    private final PlanStore store;
    private final PlanKeys keys;
    private final PlanBounds bounds;
    private final TopicResolver resolver;
    private final Map<String, PlanDocument> unresolved = new HashMap<>();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong unauthenticated = new AtomicLong();
    private final AtomicLong stale = new AtomicLong();

    PlanRecords(PlanStore store, PlanBounds bounds, TopicResolver resolver) {
        this(store, PlanKeys.none(), bounds, resolver);
    }

    PlanRecords(PlanStore store, PlanKeys keys, PlanBounds bounds, TopicResolver resolver) {
        this.store = store;
        this.keys = keys;
        this.bounds = bounds;
        this.resolver = resolver;
    }

    /** Records refused so far (malformed, over a bound, failed while handled). */
    long refused() {
        return refused.get();
    }

    /** Records ignored because their signature failed. */
    long unauthenticated() {
        return unauthenticated.get();
    }

    /** Records ignored because the store's binding refused them (a lower epoch, another or a
     *  retired incarnation). */
    long stale() {
        return stale.get();
    }

    /** Records refused so far, by reason (logged with each refusal; for operators and tests). */
    Map<String, Long> refusedByReason() {
        return store.refusals().counted();
    }

    private long count(String reason) {
        return store.refusals().increment(reason);
    }

    /** Re-reads the key file if it changed (reader thread). */
    void reloadKeys() {
        String change = keys.reloadIfChanged(System.currentTimeMillis());
        if (change != null) {
            LOG.warn("{}: {}", PlanFollowingAssignor.NAME, change);
        }
    }

    void handle(String key, byte[] value, String where) {
        handle(key, value, null, where);
    }

    /**
     * Handles one record; {@code signature} is its {@value PlanKeys#HEADER} header (or null). {@code where} names it in the log ({@code topic-partition@offset}).
     * Never throws for a bad record: whatever one record does, the next one is read.
     */
    void handle(String key, byte[] value, byte[] signature, String where) {
        handle(key, value, signature, null, null, where);
    }

    /**
     * Handles one record with its {@value PlanKeys#INCARNATION_HEADER} and
     * {@value PlanKeys#EPOCH_HEADER} headers (a tombstone's; null when absent).
     */
    void handle(String key, byte[] value, byte[] signature, byte[] incarnation, byte[] epoch, String where) {
        try {
            apply(key, value, signature, incarnation, epoch, where);
        } catch (Throwable t) {  // an Error too: one record must never stop plan reading
            refused.incrementAndGet();
            count("failed");
            if (key != null) {
                store.remove(key);
                unresolved.remove(key);
            }
            LOG.error("{}: refused the plan record at {} ({}): {}; plan reading goes on",
                PlanFollowingAssignor.NAME, where, key == null ? "no key" : "group '" + key + "'", oneLine(t));
        }
    }

    private void apply(String key, byte[] value, byte[] signature, byte[] incarnation, byte[] epoch,
                       String where) {
        if (key == null) {
            refused.incrementAndGet();
            count("no-key");
            LOG.warn("{}: ignored a plan record with no key at {}", PlanFollowingAssignor.NAME, where);
            return;
        }
        if (value == null) {
            tombstone(key, signature, incarnation, epoch, where);
            return;
        }
        if (keys.required()) {
            String failure = keys.verify(key, value, signature);
            if (failure != null) {
                unauthenticated(key, where, failure);
                return;
            }
        }
        unresolved.remove(key);
        PlanDocument document;
        try {
            document = PlanCodec.decode(key, value, bounds);
        } catch (PlanFormatException e) {
            refused.incrementAndGet();
            count("malformed");
            store.remove(key);
            LOG.warn("{}: refused the plan record for group '{}' at {}: {}; the group gets the fallback until "
                + "a valid plan is published", PlanFollowingAssignor.NAME, key, where, e.getMessage());
            return;
        }
        resolve(document);
    }

    private void unauthenticated(String key, String where, String failure) {
        long total = unauthenticated.incrementAndGet();
        count("unauthenticated");
        LOG.warn("{}: ignored an unauthenticated plan record for group '{}' at {}: {} ({} so far); "
            + "the group keeps the plan it has", PlanFollowingAssignor.NAME, key, where, failure, total);
    }

    /** A tombstone retires one incarnation of the group's policy, named and signed in its headers. */
    private void tombstone(String key, byte[] signature, byte[] incarnationHeader, byte[] epochHeader,
                           String where) {
        String incarnation = incarnationHeader == null ? null : new String(incarnationHeader, StandardCharsets.UTF_8);
        Long epoch = epochHeader == null ? null : parseEpoch(epochHeader);
        if (incarnation == null || epoch == null) {
            refused.incrementAndGet();
            long total = count("tombstone-unnamed");
            LOG.warn("{}: ignored a tombstone for group '{}' at {} that names no incarnation and epoch ({} and {} "
                + "headers; {} so far); the group keeps the plan it has", PlanFollowingAssignor.NAME, key, where,
                PlanKeys.INCARNATION_HEADER, PlanKeys.EPOCH_HEADER, total);
            return;
        }
        if (keys.required()) {
            String failure = keys.verifyTombstone(key, incarnation, epoch, signature);
            if (failure != null) {
                unauthenticated(key, where, failure);
                return;
            }
        }
        PlanDocument pending = unresolved.get(key);
        if (pending != null && pending.incarnation().equals(incarnation)) {
            unresolved.remove(key);
        }
        Optional<PlanStore.Refusal> kept = store.retire(key, incarnation, epoch);
        if (kept.isPresent()) {
            stale.incrementAndGet();
            long total = count(kept.get().reason());
            LOG.warn("{}: the tombstone of incarnation '{}' epoch {} for group '{}' at {} retired that incarnation; "
                + "the plan held stays: {} ({} so far)", PlanFollowingAssignor.NAME, incarnation, epoch, key, where,
                kept.get().text(), total);
            return;
        }
        LOG.info("{}: plan for group '{}' (incarnation '{}') deleted; the group gets the fallback from its next "
            + "rebalance", PlanFollowingAssignor.NAME, key, incarnation);
    }

    private static Long parseEpoch(byte[] header) {
        try {
            long epoch = Long.parseLong(new String(header, StandardCharsets.US_ASCII));
            return epoch < 0 ? null : epoch;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** Tries again the documents whose topics the cluster did not know. */
    void retryUnresolved() {
        for (PlanDocument document : List.copyOf(unresolved.values())) {
            try {
                resolve(document);
            } catch (Throwable t) {
                LOG.warn("{}: resolving the topics of {}'s plan failed: {}", PlanFollowingAssignor.NAME,
                    document.group(), oneLine(t));
            }
        }
    }

    boolean hasUnresolved() {
        return !unresolved.isEmpty();
    }

    /** Resolves the document's topic names and stores it (a streams plan names no topics). */
    private void resolve(PlanDocument document) {
        if (document.kind() == PlanKind.STREAMS) {
            Map<String, Map<String, Set<Integer>>> tasks = new HashMap<>();
            document.members().forEach((member, subtopologies) -> {
                Map<String, Set<Integer>> copy = new HashMap<>();
                subtopologies.forEach((subtopology, partitions) -> copy.put(subtopology, Set.copyOf(partitions)));
                tasks.put(member, Map.copyOf(copy));
            });
            store(Plan.streams(document.group(), document.incarnation(), document.epoch(), document.planHash(),
                document.generatedAtMs(), document.memberIds(), tasks).withStandbys(document.standbys()), null);
            return;
        }
        Map<String, Uuid> ids = new HashMap<>();
        Set<String> missing = new HashSet<>();
        document.members().values().forEach(topics -> topics.keySet().forEach(name -> {
            if (!ids.containsKey(name) && !missing.contains(name)) {
                resolver.resolve(name).ifPresentOrElse(id -> ids.put(name, id), () -> missing.add(name));
            }
        }));
        Map<String, Map<Uuid, Set<Integer>>> members = new HashMap<>();
        document.members().forEach((instance, topics) -> {
            Map<Uuid, Set<Integer>> byId = new HashMap<>();
            topics.forEach((name, partitions) -> {
                Uuid id = ids.get(name);
                if (id != null) {
                    byId.put(id, Set.copyOf(partitions));
                }
            });
            members.put(instance, byId);
        });
        Plan plan = document.kind() == PlanKind.SHARE
            ? Plan.share(document.group(), document.incarnation(), document.epoch(), document.planHash(),
                document.generatedAtMs(), document.memberIds(), members, missing)
            : new Plan(document.group(), document.incarnation(), document.epoch(), document.planHash(),
                document.generatedAtMs(), document.memberIds(), members, missing);
        store(plan, missing.isEmpty() ? null : document);
    }

    /** Stores `plan`; `pending` is its document while some of its topics are unknown (else null). */
    private void store(Plan plan, PlanDocument pending) {
        Set<String> missing = plan.unresolved();
        Optional<PlanStore.Refusal> refusal = store.put(plan);
        if (refusal.isPresent()) {
            stale.incrementAndGet();
            long total = count(refusal.get().reason());
            LOG.warn("{}: ignored {}: {} ({} {} so far)", PlanFollowingAssignor.NAME, plan.describe(),
                refusal.get().text(), total, refusal.get().reason());
            unresolved.remove(plan.group());
            return;
        }
        if (pending == null) {
            unresolved.remove(plan.group());
        } else {
            unresolved.put(plan.group(), pending);
        }
        int size = plan.kind() == PlanKind.STREAMS ? plan.tasks().size() : plan.members().size();
        LOG.info("{}: cached {} ({} members){}", PlanFollowingAssignor.NAME, plan.describe(), size,
            missing.isEmpty() ? "" : "; unknown topics " + missing + " fall back until they exist");
    }

    static String oneLine(Throwable t) {
        String text = t.toString();
        int newline = text.indexOf('\n');
        text = newline < 0 ? text : text.substring(0, newline);
        return text.length() <= 300 ? text : text.substring(0, 297) + "...";
    }
}
