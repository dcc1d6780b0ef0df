package dev.kafkarebalance.client;

import java.util.HashSet;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one document a member acts on, moving forward only (the Python sidecar's
 * {@code AssignmentTracker}, same rules). A mounted file can deliver stale, half-written or foreign
 * content, so a malformed text, a document for another group or member, a lower epoch, or a
 * rewrite of the same epoch with a different plan is refused with one log line and the last good
 * document stays in force. Epochs count within one incarnation of the policy ({@code policyUid}):
 * a new incarnation is accepted whatever its epoch, and the one it replaced is never accepted
 * again. Thread-safe: the file poller offers, the consumer's thread reads {@link #current}.
 */
public final class DocumentTracker {
    private static final Logger LOG = LoggerFactory.getLogger(DocumentTracker.class);

    /** What became of one offer. */
    public enum Outcome { ACCEPTED, UNCHANGED, REJECTED }

    private final String group;
    private final String member;
    private final Set<String> retired = new HashSet<>();
    private AssignmentDocument current;
    private long rejected;
    private String lastRejection = "";

    /** {@code group}/{@code member} null: not checked. */
    public DocumentTracker(String group, String member) {
        this.group = group;
        this.member = member;
    }

    public synchronized AssignmentDocument current() {
        return current;
    }

    /** Offers refused so far (malformed, foreign, stale). */
    public synchronized long rejected() {
        return rejected;
    }

    /** Why the last offer was refused ("" before any refusal). */
    public synchronized String lastRejection() {
        return lastRejection;
    }

    /** Consider a newly read document text from {@code source} (a file path). */
    public synchronized Outcome offer(String text, String source) {
        AssignmentDocument document;
        try {
            document = AssignmentDocument.decode(text);
            if (group != null && !document.group().equals(group)) {
                throw new DocumentException("group",
                    "'" + document.group() + "' is not this consumer's group '" + group + "'");
            }
            if (member != null && !document.member().equals(member)) {
                throw new DocumentException("member",
                    "'" + document.member() + "' is not this consumer's member '" + member + "'");
            }
        } catch (DocumentException e) {
            return reject(source, e.getMessage());
        }
        if (retired.contains(document.policyUid())) {
            return reject(source, "policyUid: " + document.policyUid() + " is a deleted incarnation of the policy");
        }
        AssignmentDocument before = current;
        if (before != null && !document.sameIncarnation(before)) {
            LOG.warn("assignment from {} is a new incarnation of the policy (policyUid {} replaces {}): "
                + "its epochs start again at {}", source, document.policyUid(), before.policyUid(), document.epoch());
            retired.add(before.policyUid());
            before = null;
        }
        if (before != null) {
            if (document.epoch() < before.epoch()) {
                return reject(source, "epoch: " + document.epoch() + " is lower than the current " + before.epoch());
            }
            if (document.epoch() == before.epoch()) {
                if (document.samePlan(before)) {
                    if (!document.policyUid().isEmpty() && before.policyUid().isEmpty()) {
                        current = document;
                    }
                    return Outcome.UNCHANGED;
                }
                return reject(source, "epoch: " + document.epoch() + " rewritten with different content");
            }
        }
        current = document;
        LOG.info("accepted assignment from {}: group {} member {} epoch {}, {} partitions", source,
            document.group(), document.member(), document.epoch(), document.partitionCount());
        return Outcome.ACCEPTED;
    }

    private Outcome reject(String source, String reason) {
        rejected++;
        lastRejection = reason;
        String kept = current != null ? "keeping epoch " + current.epoch() : "no document yet";
        LOG.warn("rejected assignment from {}: {} ({})", source, WireException.oneLine(reason), kept);
        return Outcome.REJECTED;
    }
}
