// Consumer throughput, for benchmarks/bench_jvm_consumer.py: one consumer, Kafka's
// KafkaConsumer (--impl kafka) or org.orderedkafka.OrderedKafkaConsumer (--impl ordered),
// configured only by --property (the same on both sides but the ordered.* keys), reads a
// topic from the beginning in a fresh group until it has every record below the end offsets
// it read at start, and prints one JSON line: {"records", "seconds" (from the first non-empty
// poll to the last record), "records_per_s", "seconds_from_subscribe" and
// "records_per_s_from_subscribe" (from subscribe(): the group's join and every gate's wait
// included), "timed_cpu_us_per_record" (the whole JVM's CPU time over the first span, per
// record), "bytes"}.

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.orderedkafka.OrderedKafkaConsumer;

public class ConsumePerf {
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    public static void main(String[] args) throws Exception {
        String topic = null, impl = "kafka";
        Properties props = new Properties();
        for (int i = 0; i < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--topic": topic = value; break;
                case "--impl": impl = value; break;
                case "--property": {
                    int eq = value.indexOf('=');
                    props.put(value.substring(0, eq), value.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.putIfAbsent("auto.offset.reset", "earliest");
        Consumer<byte[], byte[]> consumer = impl.equals("ordered")
                ? new OrderedKafkaConsumer<>(props) : new KafkaConsumer<>(props);
        long want = 0;
        List<TopicPartition> partitions = new ArrayList<>();
        for (PartitionInfo p : consumer.partitionsFor(topic)) {
            partitions.add(new TopicPartition(topic, p.partition()));
        }
        Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
        Map<TopicPartition, Long> starts = consumer.beginningOffsets(partitions);
        for (TopicPartition tp : partitions) want += ends.get(tp) - starts.get(tp);
        long subscribed = System.nanoTime();
        consumer.subscribe(List.of(topic));
        long got = 0, bytes = 0, started = 0, cpu0 = 0, last = 0;
        while (got < want) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
            if (started == 0 && !records.isEmpty()) {
                started = System.nanoTime();
                cpu0 = cpuNanos();
            }
            for (ConsumerRecord<byte[], byte[]> r : records) {
                got++;
                bytes += r.serializedValueSize() + Math.max(0, r.serializedKeySize());
            }
            last = System.nanoTime();
        }
        long cpu = cpuNanos() - cpu0;
        consumer.close();
        double seconds = (last - started) / 1e9;
        double all = (last - subscribed) / 1e9;
        System.out.println("{\"records\":" + got + ",\"seconds\":" + seconds + ",\"records_per_s\":"
                + (got / seconds) + ",\"seconds_from_subscribe\":" + all
                + ",\"records_per_s_from_subscribe\":" + (got / all)
                + ",\"timed_cpu_us_per_record\":" + (cpu / 1e3 / got)
                + ",\"bytes\":" + bytes + "}");
    }
}
