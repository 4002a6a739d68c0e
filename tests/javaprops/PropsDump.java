// Java's own reading of properties files, for tests/sim/test_javaprops.py: for each file given, a
// line "== <file>", then each key and value as the hex of its UTF-8 bytes, one pair a line,
// sorted by key, or "error <message>" if Java refuses the file. One JVM for every file.
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Properties;
import java.util.TreeSet;

public class PropsDump {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        for (String file : args) {
            System.out.println("== " + file);
            Properties props = new Properties();
            try (Reader reader =
                    new InputStreamReader(new FileInputStream(file), StandardCharsets.UTF_8)) {
                props.load(reader);
            } catch (IllegalArgumentException e) {
                System.out.println("error " + e.getMessage());
                continue;
            }
            for (String key : new TreeSet<>(props.stringPropertyNames())) {
                String value = props.getProperty(key);
                System.out.println(hex.formatHex(key.getBytes(StandardCharsets.UTF_8)) + " "
                    + hex.formatHex(value.getBytes(StandardCharsets.UTF_8)));
            }
        }
    }
}
