/*
 * A stand-in for a Kafka broker's JMX surface, for rollguard's tests, demo and benchmarks.
 *
 * How the peer follows a real broker. It was first written from a reading of Kafka's code; a
 * real Kafka 4.4 broker, measured, behaves as follows, and so does this peer:
 * - Log loading (and the log recovery within it after an unclean stop) runs in BrokerState
 *   STARTING (1) in most restarts (6 of 8 measured) and in RECOVERY (2) in the others: the
 *   state depends on whether the broker's registration was acknowledged by the controller
 *   before log loading began (--recovery-state, default 1). After loading, RECOVERY lasts
 *   ~0.1 s, then RUNNING (3).
 * - The dir key of the gauges is QUOTED in the ObjectName: dir="/path/data".
 *   remainingLogsToRecover counts the logs of that dir not yet loaded (e.g. 14 -> 0).
 *   remainingSegmentsToRecover (per dir and threadNum 0..threads-1) is, per recovery thread,
 *   the segments left in the log that thread is on now: it restarts high when the thread moves
 *   to its next log (measured on one thread: 52, 0, 56, 39, 0, 42, 8, 51, 0), and it is null
 *   (the attribute Value returns null) for a thread that has not started recovering anything.
 * - After a CLEAN stop there is no recovery, but the gauges still exist for the 0.3-2.6 s of
 *   log loading (--loading-ms), remainingLogsToRecover counting down and every
 *   remainingSegmentsToRecover null throughout. The gauges are unregistered when loading ends.
 * - A clean restart then sits in STARTING ~12-16 s (the controller rejects the registration
 *   with DUPLICATE_BROKER_REGISTRATION until the old session times out; --registration-ms),
 *   then RECOVERY -> RUNNING within 0.1 s.
 *
 * It registers the MBeans a Kafka broker registers for its state and log recovery, with the
 * same object names, attribute and value types, and serves them over remote JMX (RMI) on
 * 127.0.0.1:
 *
 *   kafka.server:type=KafkaServer,name=BrokerState                             Value: java.lang.Byte
 *   kafka.log:type=LogManager,name=remainingLogsToRecover,dir="D"              Value: java.lang.Integer
 *   kafka.log:type=LogManager,name=remainingSegmentsToRecover,dir="D",threadNum=N  Value: Integer or null
 *   kafka.server:type=app-info,id=0                                            StartTimeMs: java.lang.Long
 *
 * The last is what KafkaRaftServer registers as the last step of its start (AppInfoParser),
 * just before it logs "Kafka Server started": here when the broker reaches RUNNING, or at once
 * with --state (a server that has started). A controller-only node (--no-broker-state) has
 * only that one.
 *
 * Kafka exposes Yammer gauges through com.yammer.metrics.reporting.JmxReporter, whose
 * GaugeMBean interface declares `Object getValue()`; GaugeMBean below mirrors it. The loading
 * gauges exist only while logs are being loaded: one per log dir and one per dir and recovery
 * thread, registered when loading starts and unregistered once it ends, as Kafka does.
 *
 * The model of a recovery: each dir's L logs are dealt round robin to its N threads (thread t
 * gets logs t, t+N, ...); every log takes the same time, recovery-ms / ceil(L/N). A thread
 * spends the first tenth of a log opening it (its gauge stays null before its first log, 0
 * after a finished one), then counts that log's segments down to 0; a thread with no log (L < N)
 * stays null. A dir's remainingLogsToRecover drops as its logs are finished.
 *
 * The life of the broker is driven by flags (times in milliseconds):
 *   --port P             registry port on 127.0.0.1 (0 = ephemeral; the chosen one is printed)
 *   --starting-ms T      time spent in STARTING (1) before the log loading
 *   --recovery-ms T      duration of the log recovery after an unclean stop; 0 = no recovery
 *   --loading-ms T       without --recovery-ms: duration of the log loading of a clean start
 *                        (gauges registered, every segment gauge null); default 0 = none
 *   --recovery-state S   the state the loading runs in: 1 (STARTING, default, as most restarts
 *                        of a real 4.x broker) or 2 (RECOVERY: registration acked first)
 *   --registration-ms T  with --recovery-state 1: time in STARTING after the loading until the
 *                        registration is acknowledged (a real clean restart: 12-16 s); default 0
 *   --dirs D --threads N log dirs, and recovery threads per dir
 *   --logs L             logs to load per dir
 *   --segments S         segments to recover per dir and thread, shared among that thread's logs
 *                        (each of its logs starts at ceil(S / its logs))
 *   --stall-at F         the loading stops making progress at fraction F of the way (0..1)
 *   --running-ms T       time in RUNNING (3) before a controlled shutdown (6, 7, then exit); default: forever
 *   --state V            skip the life cycle: BrokerState is V forever
 *   --malformed-state    BrokerState holds a String instead of a Byte
 *   --no-broker-state    register no BrokerState (like a KRaft controller-only node)
 *   --jmx-user U --jmx-password P   require these JMX credentials
 *
 * On start it prints one line `JMX_PORT=<port> JMX_URL=<service url>` to stdout, then one line
 * `STATE <value>` on every broker state change, `LOADING recovery` or `LOADING clean` once all
 * the loading gauges are registered, and `LOADED` once they are unregistered.
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

    /** Mirrors org.apache.kafka.common.utils.AppInfoParser.AppInfoMBean. */
    public interface AppInfoMBean {
        String getVersion();

        String getCommitId();

        Long getStartTimeMs();
    }

    static final class AppInfo implements AppInfoMBean {
        private final long startTimeMs = System.currentTimeMillis();

        @Override
        public String getVersion() {
            return "4.4.0";
        }

        @Override
        public String getCommitId() {
            return "rollguard-test-broker";
        }

        @Override
        public Long getStartTimeMs() {
            return startTimeMs;
        }
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
            started();
            Thread.sleep(Long.MAX_VALUE);
        }
        lifeCycle();
        connector.stop();
    }

    private void lifeCycle() throws Exception {
        long recoveryState = longFlag("--recovery-state", STARTING);
        if (recoveryState != STARTING && recoveryState != RECOVERY) {
            fail("--recovery-state must be 1 (STARTING) or 2 (RECOVERY), not " + recoveryState);
        }
        setState(STARTING);
        Thread.sleep(longFlag("--starting-ms", 0));
        long recoveryMs = longFlag("--recovery-ms", 0);
        long loadingMs = longFlag("--loading-ms", 0);
        if (recoveryState == RECOVERY) {
            setState(RECOVERY); // the registration was acknowledged before the loading began
        }
        if (recoveryMs > 0) {
            load(recoveryMs, true);
        } else if (loadingMs > 0) {
            load(loadingMs, false);
        }
        if (state == STARTING) {
            Thread.sleep(longFlag("--registration-ms", 0));
            setState(RECOVERY);
        }
        Thread.sleep(100); // a real broker: RECOVERY for ~0.1 s after the loading, then RUNNING
        setState(RUNNING);
        started();
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

    /** The share of its log a thread spends opening it, before it counts segments down. */
    static final double OPENING = 0.1;

    /**
     * Log loading for `durationMs`: a recovery (unclean stop: the threads count segments) or the
     * loading of a clean start (every segment gauge stays null). See the class comment.
     */
    private void load(long durationMs, boolean recovery) throws Exception {
        int dirs = (int) longFlag("--dirs", 1);
        int threads = Math.max(1, (int) longFlag("--threads", 1));
        int logs = (int) longFlag("--logs", 10);
        int segments = (int) longFlag("--segments", 100);
        double stallAt = Double.parseDouble(flags.getOrDefault("--stall-at", "1.0"));
        int slots = Math.max(1, (logs + threads - 1) / threads); // logs per thread, at most
        long start = System.nanoTime();
        java.util.function.DoubleSupplier position = () -> {
            double done = (System.nanoTime() - start) / 1e6 / durationMs;
            return Math.min(Math.min(done, stallAt), 1.0) * slots;
        };
        List<ObjectName> gauges = new ArrayList<>();
        // Kafka adds all loading gauges in one call once every dir's logs are submitted
        // (LogManager.addLogRecoveryMetrics), one after the other, as here.
        for (int d = 0; d < dirs; d++) {
            String dir = ObjectName.quote("/var/lib/kafka/data-" + d + "/kafka-log0");
            gauges.add(register("kafka.log:type=LogManager,name=remainingLogsToRecover,dir=" + dir,
                    () -> {
                        double at = position.getAsDouble();
                        int loaded = 0;
                        for (int t = 0; t < threads; t++) {
                            loaded += Math.min(logsOf(t, logs, threads), (int) Math.floor(at));
                        }
                        return Integer.valueOf(logs - loaded);
                    }));
            for (int t = 0; t < threads; t++) {
                int own = logsOf(t, logs, threads);
                int perLog = own == 0 ? 0 : Math.max(1, (segments + own - 1) / own);
                gauges.add(register("kafka.log:type=LogManager,name=remainingSegmentsToRecover,dir="
                        + dir + ",threadNum=" + t,
                        () -> recovery ? segmentsLeft(position.getAsDouble(), own, perLog) : null));
            }
        }
        System.out.println(recovery ? "LOADING recovery" : "LOADING clean");
        System.out.flush();
        while (position.getAsDouble() < slots) {
            Thread.sleep(20);
        }
        for (ObjectName name : gauges) {
            server.unregisterMBean(name);
        }
        System.out.println("LOADED");
        System.out.flush();
    }

    /** How many of a dir's `logs` thread `t` of `threads` recovers (round robin). */
    static int logsOf(int t, int logs, int threads) {
        return logs / threads + (t < logs % threads ? 1 : 0);
    }

    /**
     * A thread's remainingSegmentsToRecover at `position` (in logs per thread): null before it
     * starts its first log, 0 between logs and at the end, else the segments left in its log.
     */
    static Integer segmentsLeft(double position, int own, int perLog) {
        int slot = (int) Math.floor(position);
        if (slot >= own) {
            return own == 0 ? null : Integer.valueOf(0);
        }
        double within = position - slot;
        if (within < OPENING) {
            return slot == 0 ? null : Integer.valueOf(0);
        }
        double left = 1.0 - (within - OPENING) / (1.0 - OPENING);
        return Integer.valueOf((int) Math.ceil(perLog * left));
    }

    private ObjectName register(String name, java.util.function.Supplier<Object> value) throws Exception {
        ObjectName objectName = new ObjectName(name);
        server.registerMBean(new StandardMBean(new Gauge(value), GaugeMBean.class), objectName);
        return objectName;
    }

    /** The server's start is over: its app-info MBean, as KafkaRaftServer.startup's last step. */
    private void started() throws Exception {
        server.registerMBean(new AppInfo(), new ObjectName("kafka.server:type=app-info,id=0"));
    }

    private void setState(byte value) {
        state = value;
        System.out.println("STATE " + value);
        System.out.flush();
    }
}
