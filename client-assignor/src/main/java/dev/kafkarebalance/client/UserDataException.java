package dev.kafkarebalance.client;

/** Assignor user_data that is not the plan-following assignor's. */
public final class UserDataException extends WireException {
    private static final long serialVersionUID = 1L;

    public UserDataException(String field, String problem) {
        super(field, problem);
    }
}
