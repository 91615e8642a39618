// Keyed producer throughput, for benchmarks/bench_jvm.py: one KafkaProducer, configured
// only by --property (with or without the ordered plugins), sends --records keyed records
// of --size bytes as fast as it can, after --warmup untimed ones in the same JVM, and
// prints one JSON line: {"records", "seconds", "records_per_s", "timed_cpu_us_per_record"
// (the whole JVM's CPU time over the timed records, per record), "errors"}.
//
// Kafka's ProducerPerformance sends records without a key, which no partitioner routes
// by; this is the same loop with keys ("k0".."k{keys-1}", drawn from a seeded generator,
// so both sides of a round send the same sequence).

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KeyedPerf {
    public static void main(String[] args) throws Exception {
        String topic = null;
        long records = 1_000_000, warmup = 100_000;
        int keys = 1000, size = 100;
        long seed = 1;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--topic": topic = value; break;
                case "--records": records = Long.parseLong(value); break;
                case "--warmup": warmup = Long.parseLong(value); break;
                case "--keys": keys = Integer.parseInt(value); break;
                case "--size": size = Integer.parseInt(value); break;
                case "--seed": seed = Long.parseLong(value); break;
                case "--property": {
                    int eq = value.indexOf('=');
                    props.put(value.substring(0, eq), value.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (topic == null) throw new IllegalArgumentException("--topic is required");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        byte[][] keyBytes = new byte[keys][];
        for (int k = 0; k < keys; k++) keyBytes[k] = ("k" + k).getBytes(StandardCharsets.UTF_8);
        byte[] value = new byte[size];
        java.util.Arrays.fill(value, (byte) 'x');
        AtomicLong errors = new AtomicLong();
        Callback count = (md, err) -> {
            if (err != null) errors.incrementAndGet();
        };
        SplittableRandom random = new SplittableRandom(seed);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (long i = 0; i < warmup; i++) {
                producer.send(new ProducerRecord<>(topic, keyBytes[random.nextInt(keys)], value), count);
            }
            producer.flush();
            com.sun.management.OperatingSystemMXBean os = (com.sun.management.OperatingSystemMXBean)
                    java.lang.management.ManagementFactory.getOperatingSystemMXBean();
            long cpuStart = os.getProcessCpuTime();
            long start = System.nanoTime();
            for (long i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, keyBytes[random.nextInt(keys)], value), count);
            }
            producer.flush();
            double seconds = (System.nanoTime() - start) / 1e9;
            double cpuUs = (os.getProcessCpuTime() - cpuStart) / 1e3;
            System.out.println("{\"records\":" + records + ",\"seconds\":" + seconds
                    + ",\"records_per_s\":" + (records / seconds) + ",\"timed_cpu_us_per_record\":"
                    + (cpuUs / records) + ",\"errors\":" + errors.get() + "}");
        }
    }
}
