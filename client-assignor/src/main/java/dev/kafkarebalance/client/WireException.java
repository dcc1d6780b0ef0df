package dev.kafkarebalance.client;

/**
 * A text is not a usable message of its format (the assignment document, the assignor's
 * user_data). The message is one line naming the field ({@code epoch},
 * {@code partitions.orders[2]}, {@code input} for the text as a whole), as the Python wire module
 * ({@code kafka_rebalance_common.wire.errors}) words it.
 */
public class WireException extends Exception {
    private static final long serialVersionUID = 1L;
    private final String field;
    private final String problem;

    public WireException(String field, String problem) {
        super(oneLine(field) + ": " + oneLine(problem));
        this.field = field;
        this.problem = problem;
    }

    public String field() {
        return field;
    }

    public String problem() {
        return problem;
    }

    /** {@code text} with line breaks escaped, so a name cannot split a log line. */
    static String oneLine(String text) {
        return text.replace("\r", "\\r").replace("\n", "\\n");
    }
}
