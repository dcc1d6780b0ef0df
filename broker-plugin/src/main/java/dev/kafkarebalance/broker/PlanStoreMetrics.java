package dev.kafkarebalance.broker;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;

import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.DynamicMBean;
import javax.management.JMException;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A plan store's counters as a JMX MBean, {@code kafka.rebalance:type=PlanStore,topic=<plan topic>}
 * (read-only attributes, Kafka's kebab-case): {@code plans-held}, {@code planned-partitions},
 * {@code evictions-total}, {@code refused-total} and {@code refused-<reason>-total} for every
 * reason of {@link RefusalCounts#all()}.
 *
 * <p>Why JMX and not KIP-877's {@code Monitorable}: Kafka 4.4's group coordinator creates its
 * consumer, share and streams assignors with {@code Utils.newInstance} (GroupCoordinatorConfig),
 * not through {@code Plugin.wrapInstance}, so {@code withPluginMetrics} is never called for them.
 * The broker's JMX (and any JMX exporter already scraping it) shows this MBean as it shows
 * Kafka's own. Attributes are read live: nothing is copied, nothing polled.
 */
public final class PlanStoreMetrics implements DynamicMBean {
    static final String DOMAIN = "kafka.rebalance";
    private static final Logger LOG = LoggerFactory.getLogger(PlanStoreMetrics.class);
    private static final String PREFIX = "refused-";
    private static final String SUFFIX = "-total";

    private final PlanStore store;

    PlanStoreMetrics(PlanStore store) {
        this.store = store;
    }

    /** The attribute's value now; null for a name this MBean does not have. */
    Long value(String attribute) {
        switch (attribute) {
            case "plans-held":
                return (long) store.size();
            case "planned-partitions":
                return store.partitions();
            case "evictions-total":
                return store.evictions();
            case "refused-total":
                return store.refusals().total();
            default:
                if (attribute.startsWith(PREFIX) && attribute.endsWith(SUFFIX)
                    && attribute.length() > PREFIX.length() + SUFFIX.length()) {
                    return store.refusals().get(
                        attribute.substring(PREFIX.length(), attribute.length() - SUFFIX.length()));
                }
                return null;
        }
    }

    private List<String> names() {
        List<String> names = new ArrayList<>(List.of("plans-held", "planned-partitions", "evictions-total",
            "refused-total"));
        for (String reason : store.refusals().all().keySet()) {
            names.add(PREFIX + reason + SUFFIX);
        }
        return names;
    }

    @Override
    public Object getAttribute(String attribute) throws AttributeNotFoundException {
        Long value = value(attribute);
        if (value == null) {
            throw new AttributeNotFoundException("no attribute '" + attribute + "' (have " + names() + ")");
        }
        return value;
    }

    @Override
    public void setAttribute(Attribute attribute) throws AttributeNotFoundException {
        throw new AttributeNotFoundException("'" + attribute.getName() + "' is read-only");
    }

    @Override
    public AttributeList getAttributes(String[] attributes) {
        AttributeList list = new AttributeList();
        for (String name : attributes) {
            Long value = value(name);
            if (value != null) {
                list.add(new Attribute(name, value));
            }
        }
        return list;
    }

    @Override
    public AttributeList setAttributes(AttributeList attributes) {
        return new AttributeList();
    }

    @Override
    public Object invoke(String action, Object[] params, String[] signature) {
        throw new UnsupportedOperationException("no operations");
    }

    @Override
    public MBeanInfo getMBeanInfo() {
        List<MBeanAttributeInfo> attributes = new ArrayList<>();
        for (String name : names()) {
            attributes.add(new MBeanAttributeInfo(name, "long", describe(name), true, false, false));
        }
        return new MBeanInfo(getClass().getName(), "kafka-rebalance plan store: plans held, evictions, "
            + "records refused per reason", attributes.toArray(new MBeanAttributeInfo[0]), null, null, null);
    }

    private static String describe(String name) {
        return switch (name) {
            case "plans-held" -> "groups whose plan is held now";
            case "planned-partitions" -> "planned partitions (or tasks) all plans hold now";
            case "evictions-total" -> "plans evicted to stay within the bounds";
            case "refused-total" -> "plan records refused, every reason";
            default -> "plan records refused as " + name.substring(PREFIX.length(), name.length() - SUFFIX.length());
        };
    }

    /**
     * Registers `store`'s MBean on the platform server under {@code kafka.rebalance:type=PlanStore,
     * topic=<topic>} (with {@code ,reader=<n>} when another store of the JVM reads the same topic).
     * Returns the name, or null when JMX refused it (logged once: the plug-in works on without it).
     */
    static ObjectName register(PlanStore store, String topic) {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        try {
            // Kafka topic names ([a-zA-Z0-9._-]) need no quoting in an ObjectName
            String value = topic.matches("[a-zA-Z0-9._-]+") ? topic : ObjectName.quote(topic);
            String base = DOMAIN + ":type=PlanStore,topic=" + value;
            for (int n = 0; n < 100; n++) {
                ObjectName name = new ObjectName(n == 0 ? base : base + ",reader=" + n);
                if (!server.isRegistered(name)) {
                    server.registerMBean(new PlanStoreMetrics(store), name);
                    return name;
                }
            }
            LOG.warn("{}: no free JMX name for the plan store of topic '{}'", PlanFollowingAssignor.NAME, topic);
        } catch (JMException | RuntimeException e) {
            LOG.warn("{}: could not register the plan store's JMX MBean: {}", PlanFollowingAssignor.NAME,
                PlanRecords.oneLine(e));
        }
        return null;
    }

    /** Unregisters what {@link #register} returned (null: nothing). */
    static void unregister(ObjectName name) {
        if (name == null) {
            return;
        }
        try {
            ManagementFactory.getPlatformMBeanServer().unregisterMBean(name);
        } catch (JMException | RuntimeException e) {
            LOG.warn("{}: could not unregister {}: {}", PlanFollowingAssignor.NAME, name, PlanRecords.oneLine(e));
        }
    }
}
