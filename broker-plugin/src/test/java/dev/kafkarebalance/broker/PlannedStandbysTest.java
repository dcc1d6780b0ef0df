package dev.kafkarebalance.broker;

import static dev.kafkarebalance.broker.PlanFollowingTaskAssignorTest.active;
import static dev.kafkarebalance.broker.PlanFollowingTaskAssignorTest.assertValid;
import static dev.kafkarebalance.broker.PlanFollowingTaskAssignorTest.assignor;
import static dev.kafkarebalance.broker.PlanFollowingTaskAssignorTest.plan;
import static dev.kafkarebalance.broker.PlanFollowingTaskAssignorTest.standby;
import static dev.kafkarebalance.broker.PlanFollowingTaskAssignorTest.threeMembers;
import static dev.kafkarebalance.broker.PlanFollowingTaskAssignorTest.topology;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.junit.jupiter.api.Test;

/** Planned standbys: followed when the plan has them, validated, and the old behaviour without them. */
class PlannedStandbysTest {
    static final Map<String, Map<String, Set<Integer>>> ACTIVE = Map.of(
        "m-a", Map.of("1", Set.of(0, 1)), "m-b", Map.of("1", Set.of(2)), "m-c", Map.of("1", Set.of(3)));

    static TaskPlacement.Outcome follow(PlanFollowingTaskAssignorTest.Spec spec, TopologyDescriber topology, Plan plan) {
        List<String> members = new ArrayList<>(new TreeSet<>(spec.memberIds()));
        PlannedTasks planned = PlannedTasks.of(plan, members, topology);
        GroupAssignment hinted = new StickyTaskAssignor().assign(new PlanHintedGroupSpec(spec, members, planned), topology);
        return TaskPlacement.follow(spec, members, topology, planned, hinted);
    }

    @Test
    void theGroupGetsExactlyThePlannedStandbys() {
        // sticky alone would keep the standbys where they are (m-c holds 0 and 1); the plan moves them
        PlanFollowingTaskAssignorTest.Spec spec = threeMembers().standbys(1)
            .active("m-a", "1", 0, 1).active("m-b", "1", 2).active("m-c", "1", 3)
            .standby("m-c", "1", 0, 1).standby("m-a", "1", 2, 3);
        TopologyDescriber topology = topology(Map.of("1", 4), Set.of("1"));
        PlanStore store = new PlanStore();
        store.put(plan("app", Set.of("m-a", "m-b", "m-c"), ACTIVE).withStandbys(Map.of(
            "m-b", Map.of("1", Set.of(0, 3)), "m-c", Map.of("1", Set.of(1, 2)))));
        GroupAssignment result = assignor(store).assign(spec, topology);
        assertEquals(Set.of(), standby(result, "m-a", "1"));
        assertEquals(Set.of(0, 3), standby(result, "m-b", "1"));
        assertEquals(Set.of(1, 2), standby(result, "m-c", "1"));
        assertEquals(Set.of(0, 1), active(result, "m-a", "1"));
        assertValid(result, spec, topology);
        TaskPlacement.Outcome outcome = follow(spec, topology, store.selectStreams(spec.memberIds()).plan().get());
        assertEquals(4, outcome.standbysFollowed());
        assertEquals(Map.of(), outcome.standbyRefusals());
        assertEquals(0, outcome.standbysPlaced());
    }

    @Test
    void plannedStandbysThatCannotBeFollowedAreDroppedByReasonAndTheTaskStillGetsOne() {
        // m-a1 and m-a2 are one process (p-a), which runs 1_0 and 1_1 as active
        PlanFollowingTaskAssignorTest.Spec spec = new PlanFollowingTaskAssignorTest.Spec()
            .member("m-a1", "p-a").member("m-a2", "p-a").member("m-b", "p-b").member("m-c", "p-c").standbys(1);
        TopologyDescriber topology = topology(Map.of("0", 2, "1", 4), Set.of("1"));
        Plan plan = plan("app", Set.of("m-a1", "m-a2", "m-b", "m-c"), Map.of(
            "m-a1", Map.of("1", Set.of(0, 1)), "m-b", Map.of("1", Set.of(2), "0", Set.of(0, 1)),
            "m-c", Map.of("1", Set.of(3))))
            .withStandbys(Map.of(
                "m-a2", Map.of("1", Set.of(0)),             // on its active's process
                "m-b", Map.of("1", Set.of(1, 3), "0", Set.of(0), "9", Set.of(0)),  // 0_0 stateless, 9_0 unknown
                "m-c", Map.of("1", Set.of(1, 2, 7)),          // 1_1 a second replica (count 1), 1_7 unknown
                "m-gone", Map.of("1", Set.of(0))));           // not in the group
        TaskPlacement.Outcome outcome = follow(spec, topology, plan);
        assertEquals(Map.of(
            TaskPlacement.ON_ACTIVE, 1, TaskPlacement.OVER_COUNT, 1, PlannedTasks.STATELESS_TASK, 1,
            PlannedTasks.UNKNOWN_TASK, 2, PlannedTasks.ABSENT_MEMBER, 1), outcome.standbyRefusals());
        assertEquals(3, outcome.standbysFollowed());  // 1_1 and 1_3 on m-b, 1_2 on m-c
        GroupAssignment result = outcome.assignment();
        Set<Integer> onB = standby(result, "m-b", "1");
        Set<Integer> onC = standby(result, "m-c", "1");
        onB.remove(0);
        onC.remove(0);
        assertEquals(Set.of(1, 3), onB);
        assertEquals(Set.of(2), onC);
        // 1_0 lost its planned standby: the assignor places one itself, off process p-a
        assertEquals(1, outcome.standbysPlaced());
        assertTrue(standby(result, "m-b", "1").contains(0) != standby(result, "m-c", "1").contains(0), result.toString());
        assertEquals(Set.of(), standby(result, "m-a1", "1"));
        assertEquals(Set.of(), standby(result, "m-a2", "1"));
        assertValid(result, spec, topology);
    }

    @Test
    void aPlanWithoutStandbysLeavesTheirPlacementToTheAssignorAsBefore() {
        PlanFollowingTaskAssignorTest.Spec spec = threeMembers().standbys(1)
            .active("m-a", "1", 0, 1).active("m-b", "1", 2).active("m-c", "1", 3)
            .standby("m-c", "1", 0, 1).standby("m-a", "1", 2, 3);
        TopologyDescriber topology = topology(Map.of("1", 4), Set.of("1"));
        Plan plan = plan("app", Set.of("m-a", "m-b", "m-c"), ACTIVE);
        TaskPlacement.Outcome outcome = follow(spec, topology, plan);
        assertEquals(0, outcome.standbysFollowed());
        assertEquals(Map.of(), outcome.standbyRefusals());
        // the plan runs the tasks where they run now: the standbys are the sticky fallback's, untouched
        List<String> members = new ArrayList<>(new TreeSet<>(spec.memberIds()));
        GroupAssignment sticky = new StickyTaskAssignor().assign(
            new PlanHintedGroupSpec(spec, members, PlannedTasks.of(plan, members, topology)), topology);
        for (String m : members) {
            assertEquals(standby(sticky, m, "1"), standby(outcome.assignment(), m, "1"), m);
        }
        assertEquals(0, outcome.standbysDropped());
    }

    @Test
    void theCodecReadsStandbysOfStreamsRecordsAndOldRecordsHaveNone() throws Exception {
        String old = "{\"version\":2,\"kind\":\"streams\",\"group\":\"g\",\"epoch\":1,\"members\":{\"a\":{\"0\":\"0-1\"}}}";
        assertNull(PlanCodec.decode("g", old.getBytes(StandardCharsets.UTF_8)).standbys());
        String withStandbys = "{\"version\":2,\"kind\":\"streams\",\"group\":\"g\",\"epoch\":1,"
            + "\"members\":{\"a\":{\"0\":\"0-1\"}},\"standbys\":{\"b\":{\"0\":\"0-1\"},\"c\":{\"0\":[1]}}}";
        PlanDocument document = PlanCodec.decode("g", withStandbys.getBytes(StandardCharsets.UTF_8));
        assertEquals(Set.of(0, 1), document.standbys().get("b").get("0"));
        assertEquals(Set.of(1), document.standbys().get("c").get("0"));
        String consumer = "{\"version\":2,\"group\":\"g\",\"epoch\":1,\"members\":{},\"standbys\":{}}";
        PlanFormatException e = assertThrows(PlanFormatException.class,
            () -> PlanCodec.decode("g", consumer.getBytes(StandardCharsets.UTF_8)));
        assertTrue(e.getMessage().startsWith("standbys: only a streams plan has standbys"), e.getMessage());
        // standbys count against the record's bounds like planned tasks
        String big = "{\"version\":2,\"kind\":\"streams\",\"group\":\"g\",\"epoch\":1,\"members\":{},"
            + "\"standbys\":{\"b\":{\"0\":\"0-99\"}}}";
        PlanFormatException bounded = assertThrows(PlanFormatException.class,
            () -> PlanCodec.decode("g", big.getBytes(StandardCharsets.UTF_8), new PlanBounds(1 << 20, 10, 50, 1000)));
        assertTrue(bounded.getMessage().startsWith("standbys.b.0: "), bounded.getMessage());
    }
}
