package org.orderedkafka;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaClientSupplier;

/**
 * Kafka Streams by configuration: {@code
 * default.client.supplier=org.orderedkafka.OrderedKafkaClientSupplier} and {@code
 * ordered.zookeeper.connect} (and any other {@code ordered.*} consumer key) in the Streams
 * properties. Each stream thread's main consumer is an {@link OrderedKafkaConsumer}; the restore
 * and global consumers, the admin client and the producers are Kafka's own.
 *
 * <p>Streams commits what its tasks processed, so the main consumer runs with {@code
 * ordered.commit.mode=application} unless the properties say otherwise: a boundary is announced
 * (its key callbacks run) when the records below it were returned by {@code poll()}, and a
 * receiver's gate opens once Streams' own commit has passed the boundary (at most {@code
 * commit.interval.ms} later). Streams pauses, resumes and seeks its consumer itself: {@link
 * OrderedKafkaConsumer#resume} never opens a partition a gate holds, so a hold survives its
 * {@code resume(assignment())}.
 */
public class OrderedKafkaClientSupplier implements KafkaClientSupplier {
  @Override
  public Admin getAdmin(Map<String, Object> config) {
    return Admin.create(plain(config));
  }

  @Override
  public Producer<byte[], byte[]> getProducer(Map<String, Object> config) {
    // ordered.* keys stay: a producer given the ordered partitioner needs them.
    return new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
  }

  @Override
  public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
    Map<String, Object> c = new HashMap<>(config);
    c.putIfAbsent("ordered.commit.mode", "application");
    return new OrderedKafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  @Override
  public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) {
    // Reads changelogs by assign(): no group, no gate (state restores as Streams wrote it).
    return new KafkaConsumer<>(plain(config), new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  @Override
  public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) {
    // A global table reads every partition by assign(): no group to announce to; left plain.
    return new KafkaConsumer<>(plain(config), new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  private static Map<String, Object> plain(Map<String, Object> config) {
    Map<String, Object> out = new HashMap<>();
    config.forEach(
        (k, v) -> {
          if (!k.startsWith("ordered.")) {
            out.put(k, v);
          }
        });
    return out;
  }
}
