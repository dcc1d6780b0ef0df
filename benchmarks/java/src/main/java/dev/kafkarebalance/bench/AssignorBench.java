package dev.kafkarebalance.bench;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Times Kafka's own assignors on cases written by {@code benchmarks/run.py}.
 *
 * <p>Usage: {@code AssignorBench --assignors range,sticky,cooperative-sticky,uniform --warmup 3
 * --iterations 5 [--max-seconds 60] case.json:result.json ...}. Cases run one after another in one
 * JVM (each with its own warm-up), so the JIT is warm as in Kafka's JMH runs while no case's memory
 * outlives it. For every case and assignor the result file holds the timed iterations in
 * milliseconds, their median, and the assignment of the last call, which the Python runner checks
 * with the same validity and balance rules it applies to its own strategies. For
 * CooperativeStickyAssignor the first call's output omits partitions that change owner, so the
 * result also holds the assignment reached by feeding the output back (generation + 1) until
 * nothing is withheld, as Kafka's own tests do; only the first call is timed.
 */
public final class AssignorBench {
    private static final int MAX_COOPERATIVE_ROUNDS = 6;

    public static void main(String[] args) throws IOException {
        List<String> assignors = List.of("range", "sticky", "cooperative-sticky", "uniform");
        int warmup = 3;
        int iterations = 5;
        double maxSeconds = 60;
        List<String> jobs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--assignors" -> assignors = Arrays.asList(args[++i].split(","));
                case "--warmup" -> warmup = Integer.parseInt(args[++i]);
                case "--iterations" -> iterations = Integer.parseInt(args[++i]);
                case "--max-seconds" -> maxSeconds = Double.parseDouble(args[++i]);
                default -> jobs.add(args[i]);
            }
        }
        ObjectMapper mapper = new ObjectMapper();
        mapper.disable(JsonGenerator.Feature.AUTO_CLOSE_TARGET);
        for (String job : jobs) {
            int split = job.lastIndexOf(':');
            File in = new File(job.substring(0, split));
            File out = new File(job.substring(split + 1));
            JsonNode document = mapper.readTree(in);
            KafkaAssignors.BenchCase c = KafkaAssignors.BenchCase.parse(document);
            Map<String, Object> results = new LinkedHashMap<>();
            for (String name : assignors) {
                results.put(name, run(name, c, warmup, iterations, maxSeconds));
            }
            Map<String, Object> output = new LinkedHashMap<>();
            output.put("case", in.getPath());
            output.put("java", System.getProperty("java.version"));
            output.put("results", results);
            mapper.writeValue(out, output);
            System.out.println("done " + in.getName());
        }
    }

    private static Map<String, Object> run(
            String name, KafkaAssignors.BenchCase c, int warmup, int iterations, double maxSeconds) {
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            KafkaAssignors.Trial trial = KafkaAssignors.create(name, c);
            Object last = null;
            double spent = 0;
            // Warm-up calls, cut short when a single call already takes long (the JIT is warm by then).
            for (int i = 0; i < warmup && spent < maxSeconds / 2; i++) {
                trial.prepare();
                long start = System.nanoTime();
                last = trial.call();
                spent += (System.nanoTime() - start) / 1e9;
            }
            List<Double> times = new ArrayList<>();
            spent = 0;
            for (int i = 0; i < iterations && (i == 0 || spent < maxSeconds); i++) {
                trial.prepare();
                System.gc(); // outside the timed region: keep one call's garbage out of the next
                long start = System.nanoTime();
                last = trial.call();
                long elapsed = System.nanoTime() - start;
                spent += elapsed / 1e9;
                times.add(elapsed / 1e6);
            }
            KafkaAssignors.Plan plan = trial.toPlan(last);
            result.put("times_ms", times);
            result.put("median_ms", median(times));
            result.put("assignment", plan);
            result.put("assigned", KafkaAssignors.count(plan));
            if (name.equals("cooperative-sticky")) {
                converge(c, plan, result);
            }
        } catch (RuntimeException e) {
            result.put("error", e.toString());
        }
        return result;
    }

    /** Feed the cooperative output back until a round assigns everything it kept. */
    private static void converge(KafkaAssignors.BenchCase c, KafkaAssignors.Plan first, Map<String, Object> result) {
        int total = c.totalPartitions();
        result.put("withheld_first_round", total - KafkaAssignors.count(first));
        KafkaAssignors.BenchCase current = c;
        KafkaAssignors.Plan plan = first;
        int rounds = 1;
        while (KafkaAssignors.count(plan) < total && rounds < MAX_COOPERATIVE_ROUNDS) {
            current = KafkaAssignors.ClientTrial.followUp(current, plan);
            KafkaAssignors.Trial next = KafkaAssignors.create("cooperative-sticky", current);
            next.prepare();
            plan = next.toPlan(next.call());
            rounds++;
        }
        result.put("rounds", rounds);
        result.put("converged_assignment", plan);
    }

    private static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        sorted.sort(Double::compare);
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    private AssignorBench() {}
}
