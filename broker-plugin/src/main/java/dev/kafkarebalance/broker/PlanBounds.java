package dev.kafkarebalance.broker;

/**
 * What one plan record may hold. {@link PlanCodec} checks every bound before it allocates for
 * what it checks (a range is measured before it is expanded, a record before it is parsed), so
 * one record costs at most memory proportional to these figures, whatever its text says.
 *
 * @param maxRecordBytes         a record value longer than this is refused unparsed
 * @param maxPartitions          partitions one record may plan, over all its members
 * @param maxPartitionsPerMember partitions one member may be planned
 * @param maxPartition           the highest partition number a plan may name (so also the widest
 *                               range and the longest bitmap)
 */
public record PlanBounds(int maxRecordBytes, int maxPartitions, int maxPartitionsPerMember, int maxPartition) {
    /** 8 MiB: a plan of 500,000 scattered partitions is about 3.5 MB as ranges (docs/kip848.md). */
    public static final int DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024;
    public static final int DEFAULT_MAX_PARTITIONS = 1_000_000;
    public static final int DEFAULT_MAX_PARTITIONS_PER_MEMBER = 500_000;
    public static final int DEFAULT_MAX_PARTITION = 999_999;
    public static final PlanBounds DEFAULT = new PlanBounds(
        DEFAULT_MAX_RECORD_BYTES, DEFAULT_MAX_PARTITIONS, DEFAULT_MAX_PARTITIONS_PER_MEMBER, DEFAULT_MAX_PARTITION);

    public PlanBounds {
        if (maxRecordBytes <= 0 || maxPartitions <= 0 || maxPartitionsPerMember <= 0 || maxPartition < 0) {
            throw new IllegalArgumentException("plan bounds must be positive: " + maxRecordBytes + ", "
                + maxPartitions + ", " + maxPartitionsPerMember + ", " + maxPartition);
        }
    }
}
