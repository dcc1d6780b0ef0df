package dev.kafkarebalance.broker;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Remembers which messages were logged, so a condition that lasts (a plan of the wrong kind) is
 * logged once rather than at every assignment. Thread-safe; bounded: past {@value #MAX} distinct
 * messages it forgets them all, so memory stays small and a lasting condition is logged again.
 */
final class OnceLog {
    static final int MAX = 10_000;
    private final Set<String> seen = ConcurrentHashMap.newKeySet();

    /** True the first time `message` is offered (since the last reset). */
    boolean first(String message) {
        if (seen.size() >= MAX) {
            seen.clear();
        }
        return seen.add(message);
    }
}
