/*
 * A stand-in for a Kafka broker's JMX surface, for rollguard's tests, demo and benchmarks.
 *
 * It registers exactly the MBeans a Kafka broker registers for its state and log recovery,
 * with the same object names, attribute and value types, and serves them over remote JMX
 * (RMI) on 127.0.0.1:
 *
 *   kafka.server:type=KafkaServer,name=BrokerState                           Value: java.lang.Byte
 *   kafka.log:type=LogManager,name=remainingLogsToRecover,dir=D              Value: java.lang.Integer
 *   kafka.log:type=LogManager,name=remainingSegmentsToRecover,dir=D,threadNum=N  Value: java.lang.Integer
 *
 * Kafka exposes Yammer gauges through com.yammer.metrics.reporting.JmxReporter, whose
 * GaugeMBean interface declares `Object getValue()`; GaugeMBean below mirrors it. The recovery
 * gauges exist only while logs are being loaded: registered when recovery starts, one per log
 * dir and one per dir and recovery thread, and unregistered once recovery ends, as Kafka does.
 *
 * The life of the broker is driven by flags (times in milliseconds):
 *   --port P             registry port on 127.0.0.1 (0 = ephemeral; the chosen one is printed)
 *   --starting-ms T      time spent in STARTING (1) before recovery
 *   --recovery-ms T      duration of log recovery (2); 0 = no recovery
 *   --dirs D --threads N log dirs, and recovery threads per dir
 *   --logs L             logs to recover per dir
 *   --segments S         segments to recover per dir and thread
 *   --stall-at F         recovery stops making progress at fraction F of the way (0..1)
 *   --running-ms T       time in RUNNING (3) before a controlled shutdown (6, 7, then exit); default: forever
 *   --state V            skip the life cycle: BrokerState is V forever
 *   --malformed-state    BrokerState holds a String instead of a Byte
 *   --no-broker-state    register no BrokerState (like a KRaft controller-only node)
 *   --jmx-user U --jmx-password P   require these JMX credentials
 *
 * On start it prints one line `JMX_PORT=<port> JMX_URL=<service url>` to stdout, then one line
 * `STATE <value>` on every broker state change.
 */
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.rmi.registry.LocateRegistry;
import java.rmi.server.RMIServerSocketFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.StandardMBean;
import javax.management.remote.JMXAuthenticator;
import javax.management.remote.JMXConnectorServer;
import javax.management.remote.JMXConnectorServerFactory;
import javax.management.remote.JMXPrincipal;
import javax.management.remote.JMXServiceURL;
import javax.management.remote.rmi.RMIConnectorServer;
import javax.security.auth.Subject;

public final class TestBroker {

    /** Mirrors com.yammer.metrics.reporting.JmxReporter.GaugeMBean. */
    public interface GaugeMBean {
        Object getValue();
    }

    /** A gauge whose value is read from a supplier on every JMX read, like a Yammer gauge. */
    static final class Gauge implements GaugeMBean {
        private final java.util.function.Supplier<Object> supplier;

        Gauge(java.util.function.Supplier<Object> supplier) {
            this.supplier = supplier;
        }

        @Override
        public Object getValue() {
            return supplier.get();
        }
    }

    /** Binds RMI listeners to the loopback address only, and remembers the last port bound. */
    static final class LoopbackSocketFactory implements RMIServerSocketFactory {
        volatile int lastPort;

        @Override
        public ServerSocket createServerSocket(int port) throws IOException {
            ServerSocket socket = new ServerSocket();
            socket.setReuseAddress(true);
            socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 50);
            lastPort = socket.getLocalPort();
            return socket;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof LoopbackSocketFactory;
        }

        @Override
        public int hashCode() {
            return LoopbackSocketFactory.class.hashCode();
        }
    }

    static final byte NOT_RUNNING = 0;
    static final byte STARTING = 1;
    static final byte RECOVERY = 2;
    static final byte RUNNING = 3;
    static final byte PENDING_CONTROLLED_SHUTDOWN = 6;
    static final byte SHUTTING_DOWN = 7;

    private final MBeanServer server = ManagementFactory.getPlatformMBeanServer();
    private volatile byte state = NOT_RUNNING;
    private final Map<String, String> flags;

    private TestBroker(Map<String, String> flags) {
        this.flags = flags;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String name = args[i];
            if (!name.startsWith("--")) {
                fail("unexpected argument: " + name);
            }
            if (name.equals("--malformed-state") || name.equals("--no-broker-state")) {
                flags.put(name, "true");
            } else if (i + 1 < args.length) {
                flags.put(name, args[++i]);
            } else {
                fail("flag " + name + " needs a value");
            }
        }
        new TestBroker(flags).run();
    }

    private static void fail(String message) {
        System.err.println("TestBroker: " + message);
        System.exit(2);
    }

    private long longFlag(String name, long fallback) {
        String value = flags.get(name);
        return value == null ? fallback : Long.parseLong(value);
    }

    private void run() throws Exception {
        System.setProperty("java.rmi.server.hostname", "127.0.0.1");
        String user = flags.get("--jmx-user");
        String password = flags.get("--jmx-password");

        if (flags.containsKey("--malformed-state")) {
            register("kafka.server:type=KafkaServer,name=BrokerState", () -> "banana");
        } else if (!flags.containsKey("--no-broker-state")) {
            register("kafka.server:type=KafkaServer,name=BrokerState", () -> Byte.valueOf(state));
        }

        LoopbackSocketFactory sockets = new LoopbackSocketFactory();
        LocateRegistry.createRegistry((int) longFlag("--port", 0), null, sockets);
        int port = sockets.lastPort;
        Map<String, Object> env = new HashMap<>();
        env.put(RMIConnectorServer.RMI_SERVER_SOCKET_FACTORY_ATTRIBUTE, sockets);
        if (user != null) {
            JMXAuthenticator authenticator = credentials -> {
                if (credentials instanceof String[] pair && pair.length == 2
                        && user.equals(pair[0]) && password != null && password.equals(pair[1])) {
                    return new Subject(true, java.util.Set.of(new JMXPrincipal(user)),
                            java.util.Set.of(), java.util.Set.of());
                }
                throw new SecurityException("Authentication failed");
            };
            env.put(JMXConnectorServer.AUTHENTICATOR, authenticator);
        }
        String url = "service:jmx:rmi:///jndi/rmi://127.0.0.1:" + port + "/jmxrmi";
        JMXConnectorServer connector =
                JMXConnectorServerFactory.newJMXConnectorServer(new JMXServiceURL(url), env, server);
        connector.start();
        System.out.println("JMX_PORT=" + port + " JMX_URL=" + url);
        System.out.flush();

        if (flags.containsKey("--state")) {
            setState((byte) longFlag("--state", RUNNING));
            Thread.sleep(Long.MAX_VALUE);
        }
        lifeCycle();
        connector.stop();
    }

    private void lifeCycle() throws Exception {
        setState(STARTING);
        Thread.sleep(longFlag("--starting-ms", 0));
        long recoveryMs = longFlag("--recovery-ms", 0);
        if (recoveryMs > 0) {
            recover(recoveryMs);
        }
        setState(RUNNING);
        long runningMs = longFlag("--running-ms", -1);
        if (runningMs < 0) {
            Thread.sleep(Long.MAX_VALUE);
        }
        Thread.sleep(runningMs);
        setState(PENDING_CONTROLLED_SHUTDOWN);
        Thread.sleep(500);
        setState(SHUTTING_DOWN);
        Thread.sleep(500);
        setState(NOT_RUNNING);
    }

    /** Log recovery: every gauge counts down linearly from its initial value to zero. */
    private void recover(long recoveryMs) throws Exception {
        int dirs = (int) longFlag("--dirs", 1);
        int threads = (int) longFlag("--threads", 1);
        int logs = (int) longFlag("--logs", 10);
        int segments = (int) longFlag("--segments", 100);
        double stallAt = Double.parseDouble(flags.getOrDefault("--stall-at", "1.0"));
        long start = System.nanoTime();
        java.util.function.DoubleSupplier progress = () -> {
            double done = (System.nanoTime() - start) / 1e6 / recoveryMs;
            return Math.min(Math.min(done, stallAt), 1.0);
        };
        List<ObjectName> gauges = new ArrayList<>();
        // Kafka counts every dir first and then adds all recovery gauges in one call
        // (LogManager.addLogRecoveryMetrics); registering them all before RECOVERY is announced
        // keeps a reader from summing a half-registered set.
        for (int d = 0; d < dirs; d++) {
            String dir = "/var/lib/kafka/data-" + d + "/kafka-log0";
            gauges.add(register("kafka.log:type=LogManager,name=remainingLogsToRecover,dir=" + dir,
                    () -> Integer.valueOf((int) Math.ceil(logs * (1.0 - progress.getAsDouble())))));
            for (int t = 0; t < threads; t++) {
                gauges.add(register("kafka.log:type=LogManager,name=remainingSegmentsToRecover,dir="
                        + dir + ",threadNum=" + t,
                        () -> Integer.valueOf((int) Math.ceil(segments * (1.0 - progress.getAsDouble())))));
            }
        }
        setState(RECOVERY);
        while (progress.getAsDouble() < 1.0) {
            Thread.sleep(20);
        }
        for (ObjectName name : gauges) {
            server.unregisterMBean(name);
        }
    }

    private ObjectName register(String name, java.util.function.Supplier<Object> value) throws Exception {
        ObjectName objectName = new ObjectName(name);
        server.registerMBean(new StandardMBean(new Gauge(value), GaugeMBean.class), objectName);
        return objectName;
    }

    private void setState(byte value) {
        state = value;
        System.out.println("STATE " + value);
        System.out.flush();
    }
}
