// The verifiable reader of ordered/verify, in Java: reads a topic with Kafka's KafkaConsumer
// or with org.orderedkafka.OrderedKafkaConsumer (the same program, the same settings) and
// appends every record it returns to a history file in the JSON-lines format of
// ordered.verify.VerifiableReader, so `ordered.verify.check` judges order and loss.
//
// Run (Java 17 single-source launch, or compiled once with javac):
//   java -cp "$(ordered jvm-jar):$KAFKA_CLIENTS_DIR/*" tests/jvm/VerifiableReader.java \
//     --impl ordered|kafka --topic T --group G --reader-id r1 --history h.jsonl \
//     --commit auto|sync --stop-file F [--delay-ms N] --property k=v ...
//
// History lines: {"ev":"pass","g","r","n","why"} at start and at each assignment change;
// {"ev":"dlv","g","r","n","p","k","s","tp","o","e":-1,"ts"} per record returned, written
// (one write() per poll) before any commit of them; with --commit sync, {"ev":"cmt",...,
// "why":"commit"} after each commitSync() of the positions; with --impl ordered,
// {"ev":"held","r","tp","o","ts"} whenever the partitions a gate holds change.
// stdout: "READY" once subscribed; it stops (closing the consumer) when the stop file exists.

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.orderedkafka.OrderedKafkaConsumer;

public class VerifiableReader {
    static String group;
    static String reader;
    static int pass = 0;
    static FileOutputStream out;
    static final StringBuilder pending = new StringBuilder();

    static void event(String json) {
        pending.append(json).append('\n');
    }

    static void flush() throws IOException {
        if (pending.length() > 0) {
            out.write(pending.toString().getBytes(StandardCharsets.UTF_8));
            pending.setLength(0);
        }
    }

    static String q(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static void newPass(String why) {
        pass++;
        event("{\"ev\":\"pass\",\"g\":" + q(group) + ",\"r\":" + q(reader) + ",\"n\":" + pass
                + ",\"why\":" + q(why) + ",\"ts\":" + System.nanoTime() + "}");
    }

    public static void main(String[] args) throws Exception {
        String impl = "ordered", topic = null, history = null, commit = "auto", stopFile = null;
        long delayMs = 0;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--impl": impl = args[i + 1]; break;
                case "--topic": topic = args[i + 1]; break;
                case "--group": group = args[i + 1]; break;
                case "--reader-id": reader = args[i + 1]; break;
                case "--history": history = args[i + 1]; break;
                case "--commit": commit = args[i + 1]; break;
                case "--stop-file": stopFile = args[i + 1]; break;
                case "--delay-ms": delayMs = Long.parseLong(args[i + 1]); break;
                case "--property": {
                    String kv = args[i + 1];
                    int eq = kv.indexOf('=');
                    props.put(kv.substring(0, eq), kv.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        props.put("group.id", group);
        props.put("enable.auto.commit", String.valueOf(commit.equals("auto")));
        props.putIfAbsent("auto.offset.reset", "earliest");
        out = new FileOutputStream(history, true);
        Consumer<String, String> consumer = impl.equals("kafka")
                ? new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())
                : new OrderedKafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
        newPass("start");
        flush();
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                if (!partitions.isEmpty()) newPass("revoke");
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                if (!partitions.isEmpty()) newPass("assign");
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                newPass("lost");
            }
        });
        System.out.println("READY");
        System.out.flush();
        Map<TopicPartition, Long> lastHeld = new HashMap<>();
        Path stop = Path.of(stopFile);
        while (!Files.exists(stop)) {
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
            for (ConsumerRecord<String, String> r : records) {
                String[] parts = r.value() == null ? new String[0] : r.value().split("\\|", 3);
                if (parts.length < 3) continue;
                event("{\"ev\":\"dlv\",\"g\":" + q(group) + ",\"r\":" + q(reader) + ",\"n\":" + pass
                        + ",\"p\":" + q(parts[0]) + ",\"k\":" + q(r.key()) + ",\"s\":" + parts[1]
                        + ",\"tp\":" + r.partition() + ",\"o\":" + r.offset()
                        + ",\"e\":-1,\"ts\":" + System.nanoTime() + "}");
            }
            if (consumer instanceof OrderedKafkaConsumer) {
                Map<TopicPartition, Long> held =
                        new TreeMap<>(java.util.Comparator.comparingInt(TopicPartition::partition));
                held.putAll(((OrderedKafkaConsumer<String, String>) consumer).heldPartitions());
                if (!held.equals(lastHeld)) {
                    StringBuilder h = new StringBuilder();
                    for (Map.Entry<TopicPartition, Long> e : held.entrySet()) {
                        if (h.length() > 0) h.append(',');
                        h.append('[').append(e.getKey().partition()).append(',').append(e.getValue()).append(']');
                    }
                    event("{\"ev\":\"held\",\"r\":" + q(reader) + ",\"held\":[" + h + "],\"ts\":"
                            + System.nanoTime() + "}");
                    lastHeld = new HashMap<>(held);
                }
            }
            flush();
            if (commit.equals("sync") && !records.isEmpty()) {
                consumer.commitSync();
                // What commitSync() wrote, read back (the layer may write less than positions).
                Map<TopicPartition, Long> positions = new TreeMap<>(
                        java.util.Comparator.comparingInt(TopicPartition::partition));
                consumer.committed(consumer.assignment()).forEach((tp, om) -> {
                    if (om != null) positions.put(tp, om.offset());
                });
                long ts = System.nanoTime();
                for (Map.Entry<TopicPartition, Long> e : positions.entrySet()) {
                    event("{\"ev\":\"cmt\",\"g\":" + q(group) + ",\"r\":" + q(reader) + ",\"t\":" + q(topic)
                            + ",\"tp\":" + e.getKey().partition() + ",\"o\":" + e.getValue()
                            + ",\"why\":\"commit\",\"ts\":" + ts + "}");
                }
                flush();
            }
            if (delayMs > 0 && !records.isEmpty()) Thread.sleep(delayMs);
        }
        consumer.close();
        flush();
        out.close();
        System.out.println("DONE");
    }
}
