package org.orderedkafka;

import java.util.Map;
import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;

/**
 * A kafka-clients {@link Partitioner} that routes keyed records by the topic's linear-hashing
 * layout in ZooKeeper and takes part in the layout barrier, the same protocol as the Python
 * {@code OrderedProducer} (docs/protocol.md). Use it together with
 * {@link OrderedProducerInterceptor}:
 *
 * <pre>
 *   partitioner.class=org.orderedkafka.OrderedPartitioner
 *   interceptor.classes=org.orderedkafka.OrderedProducerInterceptor
 *   ordered.zookeeper.connect=zk1:2181
 *   # optional: ordered.zookeeper.root, ordered.zookeeper.auth=digest:USER:PASSWORD,
 *   #           ordered.zookeeper.session.timeout.ms
 * </pre>
 *
 * <p>Protocol steps ({@link ProducerState} and {@link TopicState} hold them):
 *
 * <ol>
 *   <li>{@code configure()}: check the {@code ordered.*} settings with Python's rules and
 *       messages, that the interceptor is configured too, and that the producer is
 *       idempotent ({@code ConfigException}, one line); join the JVM's shared ZooKeeper
 *       session ({@link ZkSession}), connecting it if it is the first.
 *   <li>First record to a topic: check the topic id, register ({@code ProducerRecord} v2,
 *       {@code "language": "java"}), read and watch the topic record.
 *   <li>Keyed records: {@code Layout.partitionFor(serialized key)} (murmur3 x86_32 seed 0
 *       unsigned, or murmur2/crc32 when the topic's algorithm says so; byte-identical to
 *       {@code linear_hash}, proven by the golden vectors). Unkeyed: a sticky partition
 *       among the ACTIVE partitions (never a retired one). Not adopted, or
 *       {@code ordered: false}: Kafka's own routing ({@code murmur2 % n}, sticky).
 *   <li>A pending epoch: the route switches at once, and the switch drains in <b>pause
 *       mode</b>: {@code partition()} blocks the sending thread (at most
 *       {@code max.block.ms}; then the send fails with a {@code TimeoutException}) until
 *       every record sent before the switch is acknowledged; a send from the producer's I/O
 *       thread (inside a callback) is refused instead. This is the safe side of what
 *       kafka-clients allows: {@code onSend} cannot refuse a record, and before 4.1 an
 *       acknowledgement cannot be matched to its record, so records are not tracked across
 *       a switch as Python's track mode does. {@code ordered.switch.mode} is accepted
 *       (track or pause) and both pause here.
 *   <li>Session suspended or lost: keyed records to ordered topics fail with
 *       {@link LayoutUnavailableException} (a {@code RetriableException}: {@code send()}
 *       returns a failed future and calls the callback with it, on kafka-clients 3.9 and
 *       4.x; nothing is appended), never routed by a stale layout.
 *   <li>{@code close()}: ack every open switch and pending epoch, unregister.
 * </ol>
 *
 * <p>Limits: a record with an explicit partition bypasses every partitioner; a compacted
 * topic gets no tombstone copies (KIP-253 section 9) from the JVM; {@code ordered.epoch.header}
 * is not available (a partitioner cannot add headers).
 */
public class OrderedPartitioner implements Partitioner {
  private ProducerState state;

  @Override
  public void configure(Map<String, ?> configs) {
    state = ProducerState.pair(configs, OrderedSettings.PARTITIONER);
  }

  @Override
  public int partition(
      String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes, Cluster cluster) {
    return state.partition(topic, keyBytes, valueBytes == null ? 0 : valueBytes.length, cluster);
  }

  /**
   * kafka-clients 3.x calls this when a new batch is about to start (gone in 4.0): the
   * sticky partition of unkeyed records moves on, as Kafka's own sticky partitioner does.
   * Declared without {@code @Override} so that it compiles against 4.x and overrides on 3.x.
   */
  public void onNewBatch(String topic, Cluster cluster, int prevPartition) {
    if (state != null) {
      state.newBatch(topic, prevPartition);
    }
  }

  @Override
  public void close() {
    if (state != null) {
      state.close();
    }
  }

  /** The shared state of this producer's plugins (tests and the interceptor). */
  ProducerState state() {
    return state;
  }
}
