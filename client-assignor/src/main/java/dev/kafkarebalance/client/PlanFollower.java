package dev.kafkarebalance.client;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.ref.WeakReference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import javax.management.MalformedObjectNameException;
import javax.management.ObjectName;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One member's side of following the plan, off the consumer's thread: polls the mounted document
 * (by content, so the kubelet's atomic {@code ..data} swap is never half-read and never missed),
 * feeds the {@link DocumentTracker}, and makes the group rebalance when the plan in force is not
 * this member's document (the Python sidecar's group-mode rules):
 *
 * <ul>
 * <li>a new document epoch, or a new policy incarnation (whose epochs start again), whose claim
 * the group has not seen yet: a rebalance soon (after a short random delay, so members whose
 * documents changed together usually share one);</li>
 * <li>an assignment composed from an older epoch than the document, or in which the leader saw an
 * older claim of this member (a rejoin raced a JoinGroup already in flight; a static member's
 * restart got its old assignment back without a rebalance, KAFKA-12759): a rebalance at most every
 * {@code rejoin.min.ms}, backing off to every {@code rejoin.max.ms} while the condition lasts.</li>
 * </ul>
 *
 * <p>The thread ends when its consumer is closed (Kafka does not close assignors, so it watches the
 * consumer's {@code kafka.consumer:type=app-info} MBean, which the consumer registers while it is
 * open) or once the assignor is garbage (it holds the assignor weakly).
 */
final class PlanFollower implements Runnable {
    private static final Logger LOG = LoggerFactory.getLogger(PlanFollower.class);
    private static final long NEW_EPOCH_JITTER_MS = 1500;

    private final WeakReference<PlanFollowingAssignor> owner;
    private final DocumentTracker tracker;
    private final Path path;
    private final long pollMs;
    private final long rejoinMinMs;
    private final long rejoinMaxMs;
    private final boolean rejoin;
    private final Map<String, ?> consumerSettings;
    private final ObjectName appInfo;
    private boolean appInfoSeen;
    private volatile boolean stopped;
    private String lastText;
    private boolean warnedMissing;
    private long nudgedEpoch = -1;
    private String nudgedPolicy = ""; // the incarnation of that epoch: a recreated policy's epochs restart
    private long nextNudgeAt;
    private long interval;
    private long nudges;

    PlanFollower(PlanFollowingAssignor owner, DocumentTracker tracker, Path path, long pollMs,
                 boolean rejoin, long rejoinMinMs, long rejoinMaxMs, Map<String, ?> consumerSettings) {
        this.owner = new WeakReference<>(owner);
        this.tracker = tracker;
        this.path = path;
        this.pollMs = pollMs;
        this.rejoin = rejoin;
        this.rejoinMinMs = rejoinMinMs;
        this.rejoinMaxMs = rejoinMaxMs;
        this.interval = rejoinMinMs;
        this.consumerSettings = consumerSettings;
        this.appInfo = appInfo(consumerSettings.get("client.id"));
    }

    private static ObjectName appInfo(Object clientId) {
        if (clientId == null) {
            return null;
        }
        try {
            // the name Kafka's AppInfoParser registers for the consumer
            return new ObjectName("kafka.consumer:type=app-info,id=" + jmxValue(clientId.toString()));
        } catch (MalformedObjectNameException e) {
            return null; // a client id JMX cannot name: the weak reference alone ends the thread
        }
    }

    /**
     * A client id as Kafka writes it into an MBean name: as it is when it holds only word
     * characters, '-', '%', '.' and spaces, otherwise JMX-quoted. Written out because Kafka keeps
     * its own helper in an internal package that moved in 4.4.
     */
    static String jmxValue(String clientId) {
        return clientId.matches("[\\w\\-%. ]*") ? clientId : ObjectName.quote(clientId);
    }

    /** True once the consumer's app-info MBean, seen before, is gone: the consumer was closed. */
    boolean consumerClosed() {
        if (appInfo == null) {
            return false;
        }
        boolean registered = ManagementFactory.getPlatformMBeanServer().isRegistered(appInfo);
        if (registered) {
            appInfoSeen = true;
        }
        return appInfoSeen && !registered;
    }

    void stop() {
        stopped = true;
    }

    long nudges() {
        return nudges;
    }

    @Override
    public void run() {
        while (!stopped) {
            try {
                readOnce();
                PlanFollowingAssignor assignor = owner.get();
                if (assignor == null || consumerClosed()) {
                    LOG.info("the consumer following {} is closed: no longer following it", path);
                    return;
                }
                String reason = assignor.rebalanceReason();
                assignor = null; // do not keep it alive across the sleep
                if (rejoin) {
                    maybeNudge(reason);
                }
                Thread.sleep(pollMs);
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                LOG.warn("following {} failed: {}", path, WireException.oneLine(String.valueOf(e)));
                try {
                    Thread.sleep(pollMs);
                } catch (InterruptedException stop) {
                    return;
                }
            }
        }
    }

    /** Read the document once and offer it when its content changed. */
    void readOnce() {
        String text;
        try {
            text = Files.readString(path, StandardCharsets.UTF_8);
            warnedMissing = false;
        } catch (NoSuchFileException e) {
            if (!warnedMissing) {
                LOG.warn("assignment file {} does not exist (yet); waiting", path);
                warnedMissing = true;
            }
            return;
        } catch (IOException | RuntimeException e) {
            LOG.warn("cannot read assignment file {}: {}", path, WireException.oneLine(String.valueOf(e)));
            return;
        }
        if (!text.equals(lastText)) {
            lastText = text;
            tracker.offer(text, path.toString());
        }
    }

    private void maybeNudge(String reason) throws InterruptedException {
        if (reason == null) {
            interval = rejoinMinMs;
            return;
        }
        AssignmentDocument document = tracker.current();
        long now = System.currentTimeMillis();
        if (document != null
                && (document.epoch() != nudgedEpoch || !document.policyUid().equals(nudgedPolicy))) {
            nudgedEpoch = document.epoch();
            nudgedPolicy = document.policyUid();
            interval = rejoinMinMs;
            Thread.sleep(ThreadLocalRandom.current().nextLong(NEW_EPOCH_JITTER_MS));
            PlanFollowingAssignor assignor = owner.get();
            if (assignor == null || (reason = assignor.rebalanceReason()) == null) {
                return; // another member's rebalance carried this claim meanwhile
            }
        } else if (now < nextNudgeAt) {
            return;
        } else {
            interval = Math.min(interval * 2, rejoinMaxMs);
        }
        nextNudgeAt = System.currentTimeMillis() + interval;
        nudges++;
        LOG.info("asking the group to rebalance: {}", reason);
        GroupNudge.run(consumerSettings, Duration.ofSeconds(30));
    }
}
