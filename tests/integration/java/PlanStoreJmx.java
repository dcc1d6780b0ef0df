// Reads the broker plug-in's plan-store MBeans (kafka.rebalance:type=PlanStore,*) from a running
// broker JVM, as a JMX console would, for tests/integration/test_plan_store_jmx.py. The broker
// is started without a remote JMX port, so this attaches to it by pid (the JDK's attach API, same
// user) and starts its local management agent, which listens on no network port.
//
// Argument: PID. Prints one line per attribute: `OBJECT_NAME ATTRIBUTE VALUE`.
import com.sun.tools.attach.VirtualMachine;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class PlanStoreJmx {
    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(args[0]);
        String address;
        try {
            address = vm.startLocalManagementAgent();
        } finally {
            vm.detach();
        }
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(address))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            for (ObjectName name : server.queryNames(new ObjectName("kafka.rebalance:type=PlanStore,*"), null)) {
                for (MBeanAttributeInfo attribute : server.getMBeanInfo(name).getAttributes()) {
                    System.out.println(name + " " + attribute.getName() + " " + server.getAttribute(name, attribute.getName()));
                }
            }
        }
    }
}
