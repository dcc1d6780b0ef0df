package dev.kafkarebalance.broker;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import javax.management.ObjectName;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One plan store and one topic reader per broker JVM and plug-in configuration. A broker
 * instantiates and configures its assignors several times (nine instances were seen on a 4.3.1
 * broker at start-up); each reading the plan topic on its own would mean as many consumers and
 * admin clients, and instances whose stores lag each other. Counted: the reader stops when the
 * last instance using it is closed.
 */
final class SharedPlans {
    private static final Logger LOG = LoggerFactory.getLogger(SharedPlans.class);
    private static final Map<PluginConfig, Shared> SHARED = new HashMap<>();

    private static final class Shared {
        final PlanStore store;
        final PlanTopicReader reader;
        final ObjectName metrics;
        int users;

        Shared(PluginConfig config) {
            store = new PlanStore(config.maxAgeMs(), config.maxGroups(), config.maxTotalPartitions());
            metrics = PlanStoreMetrics.register(store, config.topic());
            PlanKeys keys = config.keysFile().isEmpty() ? PlanKeys.none() : PlanKeys.fromFile(Path.of(config.keysFile()));
            reader = new PlanTopicReader(config, store, keys);
            if (keys.required()) {
                LOG.info("{}: plan records must be signed by one of the {} keys in {}", PlanFollowingAssignor.NAME,
                    keys.count(), config.keysFile());
            } else {
                LOG.warn("{}: {} is not set: plan records are NOT authenticated, so any principal that may write "
                    + "topic '{}' can steer groups (docs/kip848.md)", PlanFollowingAssignor.NAME, PluginConfig.KEYS_FILE,
                    config.topic());
            }
        }
    }

    private SharedPlans() {
    }

    /** The store filled from `config`'s topic, starting its reader on first use. */
    static synchronized PlanStore acquire(PluginConfig config) {
        Shared shared = SHARED.get(config);
        if (shared == null) {
            shared = new Shared(config);
            SHARED.put(config, shared);
            shared.reader.start();
            LOG.info("{}: reading plans from topic '{}' via {}", PlanFollowingAssignor.NAME,
                config.topic(), config.bootstrapServers());
        }
        shared.users++;
        return shared.store;
    }

    /** One user of `config`'s store is done; the last one stops the reader. */
    static synchronized void release(PluginConfig config) {
        Shared shared = SHARED.get(config);
        if (shared == null) {
            return;
        }
        shared.users--;
        if (shared.users <= 0) {
            SHARED.remove(config);
            shared.reader.close();
            PlanStoreMetrics.unregister(shared.metrics);
        }
    }

    /** How many readers run (for tests). */
    static synchronized int readers() {
        return SHARED.size();
    }
}
