package dev.kafkarebalance.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kafkarebalance.client.DocumentTracker.Outcome;
import org.junit.jupiter.api.Test;

/** The tracker moves forward only, per incarnation of the policy, as the sidecar's does. */
class DocumentTrackerTest {
    static String doc(String member, long epoch, String partitions, String uid) {
        return "{\"epoch\":" + epoch + ",\"group\":\"g\",\"member\":\"" + member + "\",\"partitions\":{\"t\":["
            + partitions + "]}" + (uid.isEmpty() ? "" : ",\"policyUid\":\"" + uid + "\"") + "}";
    }

    @Test
    void onlyNewerEpochsOfTheSameIncarnationAreAccepted() {
        DocumentTracker tracker = new DocumentTracker("g", "m");
        assertEquals(Outcome.ACCEPTED, tracker.offer(doc("m", 5, "0", "a"), "f"));
        assertEquals(Outcome.UNCHANGED, tracker.offer(doc("m", 5, "0", "a").replaceFirst("\\{", "{\"generatedAt\":\"x\","), "f"));
        assertEquals(Outcome.REJECTED, tracker.offer(doc("m", 4, "1", "a"), "f"));
        assertEquals(Outcome.REJECTED, tracker.offer(doc("m", 5, "1", "a"), "f"));
        assertEquals(Outcome.REJECTED, tracker.offer("{half", "f"));
        assertEquals(Outcome.REJECTED, tracker.offer(doc("other", 9, "1", "a"), "f"));
        assertEquals(5, tracker.current().epoch());
        assertEquals(Outcome.ACCEPTED, tracker.offer(doc("m", 6, "1", "a"), "f"));
        // a policy created again starts its epochs anew; the old incarnation is never taken back
        assertEquals(Outcome.ACCEPTED, tracker.offer(doc("m", 1, "2", "b"), "f"));
        assertEquals(Outcome.REJECTED, tracker.offer(doc("m", 7, "0", "a"), "f"));
        assertEquals(1, tracker.current().epoch());
        assertEquals(5, tracker.rejected());
    }
}
