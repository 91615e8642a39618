// The verifiable producer of ordered/verify, in Java: a plain KafkaProducer (with the
// ordered plugins when the properties name them) writes numbered keyed records and appends
// every delivery report to a history file in the same JSON-lines format as
// ordered.verify.VerifiableProducer, so `ordered.verify.check` reads both languages.
//
// Run (Java 11+ single-source launch, nothing to build):
//   java -cp "$(ordered jvm-jar):$KAFKA_CLIENTS_DIR/*" tests/jvm/VerifiableProducer.java \
//     --topic T --producer-id p-java --history h.jsonl --keys 20 --rate 500 \
//     --property bootstrap.servers=... --property ordered.zookeeper.connect=... \
//     --property partitioner.class=org.orderedkafka.OrderedPartitioner \
//     --property interceptor.classes=org.orderedkafka.OrderedProducerInterceptor
//
// Value of record s: "{producer id}|{s}|" plus --padding bytes of 'x' (encode_value).
// Keys: "k0".."k{n-1}", chosen at random (seeded). History lines: {"ev":"ack","p","k","s",
// "tp","o","ts"} or {"ev":"nack","p","k","s","err","ts"}, ts = System.nanoTime(), which is
// CLOCK_MONOTONIC on Linux: the clock of Python's time.monotonic_ns(), one per machine.
// Each line is one write() on an O_APPEND file as soon as the report arrives, so a SIGKILL
// loses no line that was written (at most a torn last line, which the reader skips).
//
// stdout: "READY" after the first record was handed to send(), then on stdin EOF or a
// line "stop": flush, close, and "DONE {json counts}". A record that send() refuses with
// an exception (the layout unavailable, say) is retried after 20 ms with the same
// sequence; it counts as "refused".

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class VerifiableProducer {
    static final AtomicBoolean stop = new AtomicBoolean(false);
    static final AtomicLong acked = new AtomicLong();
    static final AtomicLong nacked = new AtomicLong();

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static final class History {
        private final FileOutputStream out;

        History(String path) throws IOException {
            out = new FileOutputStream(path, true);
        }

        // One write() per line: the callbacks of one producer run on its I/O thread, but
        // the lock keeps the file whole whatever thread writes.
        synchronized void write(String line) {
            try {
                out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }

        synchronized void close() throws IOException {
            out.close();
        }
    }

    public static void main(String[] args) throws Exception {
        String topic = null, producerId = null, historyPath = null;
        int keys = 20, padding = 0;
        long seed = 0, maxRecords = -1;
        double rate = 0;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--topic": topic = value; break;
                case "--producer-id": producerId = value; break;
                case "--history": historyPath = value; break;
                case "--keys": keys = Integer.parseInt(value); break;
                case "--padding": padding = Integer.parseInt(value); break;
                case "--seed": seed = Long.parseLong(value); break;
                case "--rate": rate = Double.parseDouble(value); break;
                case "--max-records": maxRecords = Long.parseLong(value); break;
                case "--property": {
                    int eq = value.indexOf('=');
                    props.put(value.substring(0, eq), value.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (topic == null || producerId == null || historyPath == null) {
            throw new IllegalArgumentException("--topic, --producer-id and --history are required");
        }
        props.putIfAbsent("key.serializer", StringSerializer.class.getName());
        props.putIfAbsent("value.serializer", ByteArraySerializer.class.getName());
        History history = new History(historyPath);
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (IOException ignored) { }
            stop.set(true);
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();

        Random random = new Random(seed);
        byte[] pad = "x".repeat(padding).getBytes(StandardCharsets.UTF_8);
        long sent = 0, refused = 0;
        String nextKey = null;
        long started = System.nanoTime();
        final String pid = producerId;
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(props)) {
            boolean ready = false;
            while (!stop.get() && (maxRecords < 0 || sent < maxRecords)) {
                if (rate > 0) {
                    long due = started + (long) (sent * 1e9 / rate);
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                        continue;
                    }
                    // At most one second of catching up (after a SIGSTOP), never a flood.
                    if (-wait > 1_000_000_000L) started += -wait - 1_000_000_000L;
                }
                final long seq = sent;
                // A refused record is tried again with the same key and sequence.
                if (nextKey == null) nextKey = "k" + random.nextInt(keys);
                final String key = nextKey;
                byte[] head = (pid + "|" + seq + "|").getBytes(StandardCharsets.UTF_8);
                byte[] value = new byte[head.length + pad.length];
                System.arraycopy(head, 0, value, 0, head.length);
                System.arraycopy(pad, 0, value, head.length, pad.length);
                try {
                    producer.send(new ProducerRecord<>(topic, key, value), (md, err) -> {
                        if (err == null) {
                            acked.incrementAndGet();
                            history.write("{\"ev\":\"ack\",\"p\":" + json(pid) + ",\"k\":" + json(key)
                                    + ",\"s\":" + seq + ",\"tp\":" + md.partition() + ",\"o\":" + md.offset()
                                    + ",\"ts\":" + System.nanoTime() + "}");
                        } else {
                            nacked.incrementAndGet();
                            history.write("{\"ev\":\"nack\",\"p\":" + json(pid) + ",\"k\":" + json(key)
                                    + ",\"s\":" + seq + ",\"err\":" + json(String.valueOf(err))
                                    + ",\"ts\":" + System.nanoTime() + "}");
                        }
                    });
                } catch (RuntimeException e) {
                    // Refused before it was queued: same sequence again, a little later.
                    refused++;
                    if (refused == 1 || refused % 100 == 0) {
                        System.err.println("send refused (" + refused + "): " + e);
                    }
                    Thread.sleep(20);
                    continue;
                }
                sent++;
                nextKey = null;
                if (!ready) {
                    ready = true;
                    System.out.println("READY");
                    System.out.flush();
                }
            }
            producer.flush();
        }
        history.close();
        System.out.println("DONE {\"sent\":" + sent + ",\"acked\":" + acked.get() + ",\"nacked\":"
                + nacked.get() + ",\"refused\":" + refused + "}");
        System.out.flush();
    }
}
