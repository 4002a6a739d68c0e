import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.ConnectException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.management.InstanceNotFoundException;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * rollguard's persistent JMX reader: one JVM for the agent's whole life, one JMX connection held
 * open between reads (the `persistent` backend, rollguard.agent.jmx_persistent).
 *
 * <pre>java RollguardJmx SERVICE_URL PATTERN ATTRIBUTE [PATTERN ATTRIBUTE]...</pre>
 *
 * The first line of stdin holds the credentials, `USER PASSWORD`, or is empty (never argv: other
 * users of the host can read a command line). Then every line `read` on stdin is answered by one
 * JSON line on stdout: {"values":[{"mBeanName":N,"attribute":A,"value":V},...]} with each
 * pattern's attribute of every MBean it matches (e.g. Kafka's gauges' Value, and the JVM's own
 * java.lang:type=Runtime StartTime, which tells one run of the broker from the next), or {"error":E,"message":M} with E one of connection-error, auth-failed,
 * jmx-error. A connection that fails is closed and opened again once within the same read (the
 * broker restarted); otherwise the next read connects again. The agent kills this JVM when a read
 * outlasts its time limit, and starts another. EOF on stdin ends it.
 */
public final class RollguardJmx {
    private final JMXServiceURL url;
    private final List<ObjectName> patterns = new ArrayList<>();
    private final List<String> attributes = new ArrayList<>();
    private final Map<String, Object> environment = new HashMap<>();
    private JMXConnector connector;
    private MBeanServerConnection connection;

    private RollguardJmx(String url, String[] queries, String credentials) throws Exception {
        this.url = new JMXServiceURL(url);
        for (int i = 0; i + 1 < queries.length; i += 2) {
            this.patterns.add(new ObjectName(queries[i]));
            this.attributes.add(queries[i + 1]);
        }
        String[] fields = credentials.trim().split("\\s+", 2);
        if (fields.length == 2) {
            environment.put(JMXConnector.CREDENTIALS, fields);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3 || args.length % 2 == 0) {
            System.err.println("usage: RollguardJmx SERVICE_URL PATTERN ATTRIBUTE [PATTERN ATTRIBUTE]...");
            System.exit(2);
        }
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String credentials = in.readLine();
        String[] queries = new String[args.length - 1];
        System.arraycopy(args, 1, queries, 0, queries.length);
        RollguardJmx reader =
                new RollguardJmx(args[0], queries, credentials == null ? "" : credentials);
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        out.println("{\"ready\":true}");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("read")) {
                out.println(reader.read());
            } else {
                out.println(error("jmx-error", "unknown command " + line));
            }
            out.flush();
        }
        reader.close();
    }

    private String read() {
        // A connection held from an earlier read may be gone (the broker restarted): then once
        // more, on a new one. A connection opened by this read is not tried twice.
        int attempts = connection == null ? 1 : 2;
        for (int attempt = 1; ; attempt++) {
            try {
                return values();
            } catch (SecurityException e) {
                close();
                return error("auth-failed", cause(e));
            } catch (IOException e) {
                close();
                if (attempt == attempts) {
                    return error("connection-error", cause(e));
                }
            } catch (Exception e) {
                return error("jmx-error", cause(e));
            }
        }
    }

    private String values() throws Exception {
        if (connection == null) {
            connector = JMXConnectorFactory.connect(url, environment);
            connection = connector.getMBeanServerConnection();
        }
        StringBuilder json = new StringBuilder("{\"values\":[");
        boolean first = true;
        for (int q = 0; q < patterns.size(); q++) {
            ObjectName pattern = patterns.get(q);
            String attribute = attributes.get(q);
            // An exact name is read at once (one round trip); a missing one is left out, as
            // jmxquery does. A pattern is listed first.
            boolean exact = !pattern.isPattern();
            Set<ObjectName> names = exact ? Set.of(pattern) : connection.queryNames(pattern, null);
            for (ObjectName name : names) {
                Object value;
                try {
                    value = connection.getAttribute(name, attribute);
                } catch (InstanceNotFoundException e) {
                    if (exact) {
                        continue;
                    }
                    // Unregistered between the listing and the read (a recovery ending): the
                    // sum would be partial, so the whole read fails and the agent retries it.
                    throw new Exception(name + " was unregistered during the read", e);
                }
                if (!first) {
                    json.append(',');
                }
                first = false;
                json.append("{\"mBeanName\":").append(quote(name.getCanonicalName()));
                json.append(",\"attribute\":").append(quote(attribute));
                json.append(",\"value\":").append(value(value)).append('}');
            }
        }
        return json.append("]}").toString();
    }

    private void close() {
        if (connector != null) {
            try {
                connector.close();
            } catch (Exception ignored) {
                // closing a dead connection: nothing to do
            }
        }
        connector = null;
        connection = null;
    }

    private static String value(Object value) {
        if (value instanceof Number && !(value instanceof Double || value instanceof Float)) {
            return value.toString();
        }
        return value == null ? "null" : quote(value.toString());
    }

    private static String cause(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String message = root.getMessage();
        String text = root.getClass().getName() + (message == null ? "" : ": " + message);
        if (root instanceof ConnectException) {
            text = "connection refused (" + text + ")";
        }
        return text;
    }

    private static String error(String kind, String message) {
        return "{\"error\":" + quote(kind) + ",\"message\":" + quote(message) + "}";
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
