package dev.kafkarebalance.broker;

/**
 * What kind of group a plan record is for (its {@code kind} field; absent means {@link #CONSUMER},
 * so records written before streams plans existed keep their meaning). Each assignor follows only
 * its own kind: a consumer-group plan's members are instance ids with topic partitions, a streams
 * plan's are streams member ids with tasks, a share plan's are share member ids with partitions
 * that several members may share, and following one as another would be nonsense.
 */
public enum PlanKind {
    /** A KIP-848 consumer group: members by {@code group.instance.id}, partitions by topic name. */
    CONSUMER("consumer"),
    /** A KIP-1071 streams group: members by streams member id, active tasks by subtopology id. */
    STREAMS("streams"),
    /**
     * A KIP-932 share group: members by share member id, partitions by topic name; one partition
     * may be planned for several members (they all consume it).
     */
    SHARE("share");

    private final String wire;

    PlanKind(String wire) {
        this.wire = wire;
    }

    /** The value of the record's {@code kind} field. */
    public String wire() {
        return wire;
    }

    /** The kind a {@code kind} field names, or null if it names none. */
    static PlanKind fromWire(String value) {
        for (PlanKind kind : values()) {
            if (kind.wire.equals(value)) {
                return kind;
            }
        }
        return null;
    }
}
