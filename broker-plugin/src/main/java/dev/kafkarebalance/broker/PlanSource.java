package dev.kafkarebalance.broker;

import java.util.Map;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where an assignor instance reads plans from: the store of the one shared plan-topic reader for
 * its configuration ({@link SharedPlans}), or a store the caller fills (tests, embedding), and
 * the age past which a plan is stale. Every assignor class in the jar holds one, so the consumer
 * and the task assignors configured alike share one reader and one store.
 *
 * <p>Reconfiguring releases the previous shared reader before acquiring the new one; closing
 * releases it. The store and the age are read on the coordinator thread without a lock.
 */
final class PlanSource {
    private static final Logger LOG = LoggerFactory.getLogger(PlanSource.class);

    private volatile PlanStore store;
    private volatile long maxAgeMs;
    private PluginConfig shared; // guarded by this: the configuration whose shared store is read

    PlanSource(PlanStore store, long maxAgeMs) {
        this.store = store;
        this.maxAgeMs = maxAgeMs;
    }

    /**
     * Reads plans as {@code configs} say. Without a bootstrap address no plan is read: the
     * assignor named {@code assignor} gives every group {@code fallback}, which the log line says.
     */
    synchronized void configure(Map<String, ?> configs, String assignor, String fallback) {
        PluginConfig config = PluginConfig.from(configs);
        this.maxAgeMs = config.maxAgeMs();
        if (config.bootstrapServers().isEmpty()) {
            LOG.warn("{}: {} is not set: no plans will be read; every group using this assignor gets {}",
                assignor, PluginConfig.BOOTSTRAP, fallback);
            return;
        }
        if (shared != null) {
            SharedPlans.release(shared);
        }
        store = SharedPlans.acquire(config);
        shared = config;
    }

    synchronized void close() {
        if (shared != null) {
            SharedPlans.release(shared);
            shared = null;
        }
    }

    PlanStore store() {
        return store;
    }

    long maxAgeMs() {
        return maxAgeMs;
    }
}
