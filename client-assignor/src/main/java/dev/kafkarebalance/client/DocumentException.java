package dev.kafkarebalance.client;

/** An assignment document ({@code assignment.json}) that cannot be acted on. */
public final class DocumentException extends WireException {
    private static final long serialVersionUID = 1L;

    public DocumentException(String field, String problem) {
        super(field, problem);
    }
}
