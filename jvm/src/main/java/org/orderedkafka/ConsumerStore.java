package org.orderedkafka;

import java.util.Collection;
import java.util.Map;

/**
 * What {@link OrderedKafkaConsumer} asks of the layout store (ZooKeeper), behind one
 * interface so the conformance scenarios can run the consumer against a fake store.
 *
 * <p>Public so that the other readers that judge records by the gate rule (the Kafka Connect
 * sink task, {@code org.orderedkafka.connect.OrderedSinkTask}) use the same store, the same
 * fetch check and the same group registration instead of copies of them.
 */
public interface ConsumerStore extends AutoCloseable {
  /**
   * The store on the JVM's shared ZooKeeper session for {@code settings} (checked with {@link
   * OrderedSettings#parseConsumer}).
   *
   * @throws org.apache.kafka.common.KafkaException ZooKeeper could not be reached
   */
  static ConsumerStore open(OrderedSettings settings) {
    return new ZkConsumerStore(settings);
  }

  /** Whether the session is connected now (no request). */
  boolean connected();

  /**
   * The history of {@code topic}: its topic znode's {@code mzxid} read first, then a
   * {@code sync}, then the record and epochs (C-COPY-2).
   *
   * @throws RuntimeException ZooKeeper failed or a record is corrupt
   */
  LayoutHistories.History read(String topic);

  /** The answers of one fetch check: topic -> topic znode mzxid, topic -> rewind marker mzxid. */
  record Check(Map<String, Long> topics, Map<String, Long> markers) {}

  /**
   * A fetch check (C-CHECK-2): a {@code sync}, then an {@code exists} of every topic node and,
   * with a group, of the group's rewind marker of every topic in {@code markers}.
   *
   * @throws RuntimeException not connected, an answer later than {@code timeoutMs}, or an error
   */
  Check check(Collection<String> topics, String group, Collection<String> markers, long timeoutMs);

  /** Write the group's rewind marker of {@code topic}; the marker's new mzxid. */
  long markRewound(String group, String topic);

  /** Register the group on {@code topic} once (C-TRIM-1); failures are logged. */
  void registerGroup(String group, String topic);

  /**
   * Write this member's {@code GroupMemberRecord} (ephemeral: written again after a new session)
   * once; what {@code ordered describe --group} names the member by. Failures are logged.
   */
  default void registerMember(String group, String member, String clientId) {}

  /** Replace (or, with {@code waits} empty, delete) this member's interest; asynchronous. */
  void declareInterest(String group, String topic, String member, Map<Integer, Long> waits);

  /** Publish a boundary commit if some member's interest lists the partition; asynchronous. */
  void publishProgress(String group, String topic, int partition, long offset);

  @Override
  void close();
}
