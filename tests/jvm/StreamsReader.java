// A stateless Kafka Streams application that reads a topic and appends every record its
// tasks process to a history file in the JSON-lines format of ordered.verify, so that the
// test can count keys out of order and records lost. With --supplier ordered it runs with
// default.client.supplier=org.orderedkafka.OrderedKafkaClientSupplier (and the ordered.*
// keys given as --property); with --supplier kafka, with Kafka's own clients.
//
// Run (compiled once with javac):
//   java -cp "classes:$(ordered jvm-jar):$KAFKA_STREAMS_DIR/*" StreamsReader \
//     --supplier ordered|kafka --topic T --application-id A --reader-id r --history h.jsonl \
//     --stop-file F [--delay-ms N (after each record)] --property k=v ...
//
// History lines: {"ev":"dlv","g","r","n":1,"p","k","s","tp","o","e":-1,"ts"} per record
// processed (r: the reader id and the stream thread). stdout: "RUNNING" once Streams runs;
// it closes Streams when the stop file exists.

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;

public class StreamsReader {
    static FileOutputStream out;

    static String q(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static synchronized void write(String line) {
        try {
            out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        String supplier = "ordered", topic = null, app = null, reader = "s", history = null;
        String stopFile = null;
        long delayMs = 0;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--supplier": supplier = args[i + 1]; break;
                case "--topic": topic = args[i + 1]; break;
                case "--application-id": app = args[i + 1]; break;
                case "--reader-id": reader = args[i + 1]; break;
                case "--history": history = args[i + 1]; break;
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
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        props.putIfAbsent("consumer.auto.offset.reset", "earliest");
        if (supplier.equals("ordered")) {
            props.put("default.client.supplier", "org.orderedkafka.OrderedKafkaClientSupplier");
        } else {
            props.keySet().removeIf(k -> String.valueOf(k).startsWith("ordered."));
        }
        out = new FileOutputStream(history, true);
        final String group = app, rid = reader;
        final long delay = delayMs;
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(topic, Consumed.with(Serdes.String(), Serdes.String()))
                .process(() -> new Processor<String, String, Void, Void>() {
                    ProcessorContext<Void, Void> context;

                    @Override
                    public void init(ProcessorContext<Void, Void> context) {
                        this.context = context;
                    }

                    @Override
                    public void process(Record<String, String> r) {
                        String[] parts = r.value() == null ? new String[0] : r.value().split("\\|", 3);
                        if (parts.length < 3) return;
                        RecordMetadata m = context.recordMetadata().orElseThrow();
                        write("{\"ev\":\"dlv\",\"g\":" + q(group) + ",\"r\":"
                                + q(rid + "/" + Thread.currentThread().getName()) + ",\"n\":1"
                                + ",\"p\":" + q(parts[0]) + ",\"k\":" + q(r.key()) + ",\"s\":" + parts[1]
                                + ",\"tp\":" + m.partition() + ",\"o\":" + m.offset()
                                + ",\"e\":-1,\"ts\":" + System.nanoTime() + "}");
                        if (delay > 0) {
                            try {
                                Thread.sleep(delay); // a slow processor: every task reads at once
                            } catch (InterruptedException e) {
                                Thread.currentThread().interrupt();
                            }
                        }
                    }
                });
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        long until = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (streams.state() != KafkaStreams.State.RUNNING && System.nanoTime() < until) {
            Thread.sleep(50);
        }
        System.out.println(streams.state() == KafkaStreams.State.RUNNING ? "RUNNING" : "NOT RUNNING");
        System.out.flush();
        Path stop = Path.of(stopFile);
        while (!Files.exists(stop) && streams.state().isRunningOrRebalancing()) {
            Thread.sleep(100);
        }
        streams.close(Duration.ofSeconds(30));
        out.close();
        System.out.println("DONE " + streams.state());
    }
}
