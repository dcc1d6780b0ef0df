package dev.kafkarebalance.broker;

/** A plan record the plug-in cannot follow; the message is one line naming the field. */
public class PlanFormatException extends Exception {
    public PlanFormatException(String message) {
        super(message);
    }
}
