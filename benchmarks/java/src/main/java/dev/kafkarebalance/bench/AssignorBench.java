package dev.kafkarebalance.bench;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Times Kafka's own assignors on cases written by {@code benchmarks/run.py}.
 *
 * <p>Usage: {@code AssignorBench --assignors range,sticky,cooperative-sticky,uniform --warmup 3
 * --iterations 5 [--max-seconds 60] [--call-timeout 120] case.json:result.json ...}. Cases run one after another in one
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
        double callTimeout = 120;
        List<String> jobs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--assignors" -> assignors = Arrays.asList(args[++i].split(","));
                case "--warmup" -> warmup = Integer.parseInt(args[++i]);
                case "--iterations" -> iterations = Integer.parseInt(args[++i]);
                case "--max-seconds" -> maxSeconds = Double.parseDouble(args[++i]);
                case "--call-timeout" -> callTimeout = Double.parseDouble(args[++i]);
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
                results.put(name, run(name, c, warmup, iterations, maxSeconds, callTimeout));
            }
            Map<String, Object> output = new LinkedHashMap<>();
            output.put("case", in.getPath());
            output.put("java", System.getProperty("java.version"));
            output.put("results", results);
            mapper.writeValue(out, output);
            System.out.println("done " + in.getName());
        }
    }

    private static Map<String, Object> run(String name, KafkaAssignors.BenchCase c, int warmup,
            int iterations, double maxSeconds, double callTimeout) {
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            KafkaAssignors.Trial trial = KafkaAssignors.create(name, c);
            Object last = null;
            double spent = 0;
            List<Double> times = new ArrayList<>();
            List<Double> cpuTimes = new ArrayList<>();
            // Warm-up calls. When one call alone takes half the time allowance, the JIT has long
            // compiled the hot loops inside it: that call becomes the only measurement, and the
            // result says so, rather than paying for the same slow call twice.
            for (int i = 0; i < warmup; i++) {
                trial.prepare();
                long gcStart = gcMillis();
                long[] threadCpu = new long[1];
                long start = System.nanoTime();
                last = callWithTimeout(trial, callTimeout, threadCpu);
                long elapsed = System.nanoTime() - start;
                spent += elapsed / 1e9;
                if (elapsed / 1e9 >= maxSeconds / 2) {
                    times.add(elapsed / 1e6);
                    cpuTimes.add(threadCpu[0] / 1e6 + (gcMillis() - gcStart));
                    result.put("note", "one slow call measured, no separate warm-up");
                    break;
                }
                if (spent >= maxSeconds / 2) {
                    break;
                }
            }
            spent = 0;
            for (int i = 0; times.isEmpty() && i < iterations && (i == 0 || spent < maxSeconds); i++) {
                trial.prepare();
                System.gc(); // outside the timed region: keep one call's garbage out of the next
                long gcStart = gcMillis();
                long[] threadCpu = new long[1];
                long start = System.nanoTime();
                last = callWithTimeout(trial, callTimeout, threadCpu);
                long elapsed = System.nanoTime() - start;
                cpuTimes.add(threadCpu[0] / 1e6 + (gcMillis() - gcStart));
                spent += elapsed / 1e9;
                times.add(elapsed / 1e6);
            }
            KafkaAssignors.Plan plan = trial.toPlan(last);
            result.put("times_ms", times);
            result.put("median_ms", median(times));
            if (!cpuTimes.isEmpty()) {
                result.put("cpu_times_ms", cpuTimes);
                result.put("cpu_median_ms", median(cpuTimes));
            }
            result.put("assignment", plan);
            result.put("assigned", KafkaAssignors.count(plan));
            if (name.equals("cooperative-sticky")) {
                converge(c, plan, result);
            }
        } catch (CallTimeout e) {
            result.put("timeout_ms", callTimeout * 1000);
            result.put("error", "one call took longer than " + callTimeout + " s");
        } catch (RuntimeException e) {
            result.put("error", e.toString());
        }
        return result;
    }

    private static final class CallTimeout extends RuntimeException {
        CallTimeout() {
            super(null, null, false, false);
        }
    }

    /**
     * One call on a worker thread, abandoned after {@code seconds}: some of Kafka's general-path
     * cases take minutes, and a benchmark must report that rather than stall. The worker is stopped
     * (Java 17 still honours Thread.stop) so it does not steal CPU from the next measurement.
     */
    @SuppressWarnings({"deprecation", "removal"})
    private static Object callWithTimeout(
            KafkaAssignors.Trial trial, double seconds, long[] cpuNanos) {
        Object[] box = new Object[1];
        RuntimeException[] failure = new RuntimeException[1];
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        Thread worker = new Thread(() -> {
            long cpuStart = threads.getCurrentThreadCpuTime();
            try {
                box[0] = trial.call();
            } catch (RuntimeException e) {
                failure[0] = e;
            }
            cpuNanos[0] = threads.getCurrentThreadCpuTime() - cpuStart;
        }, "assign");
        worker.setDaemon(true);
        worker.start();
        try {
            worker.join((long) (seconds * 1000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (worker.isAlive()) {
            try {
                worker.stop();
            } catch (UnsupportedOperationException ignored) {
                // newer JVMs: the daemon thread runs on until the JVM exits
            }
            throw new CallTimeout();
        }
        if (failure[0] != null) {
            throw failure[0];
        }
        return box[0];
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

    /**
     * Milliseconds the collectors have spent so far. Added to the assigning thread's CPU time it
     * gives the call's cost without the neighbours' load: on a shared, loaded machine wall time
     * measures them as much as the assignor. (The JVM's process CPU counter ticks in 10 ms steps,
     * too coarse for small cases; thread CPU time is exact but leaves out GC, done on other
     * threads.) Python's process_time on the other side includes its collector too.
     */
    private static long gcMillis() {
        long total = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, gc.getCollectionTime());
        }
        return total;
    }

    private static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        sorted.sort(Double::compare);
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    private AssignorBench() {}
}
