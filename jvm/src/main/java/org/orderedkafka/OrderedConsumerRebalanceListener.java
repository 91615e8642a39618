package org.orderedkafka;

import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.common.TopicPartition;

/**
 * A {@link ConsumerRebalanceListener} that also hears KIP-253's key-state callbacks from an
 * {@link OrderedKafkaConsumer}: when keys may leave a partition, and when keys that moved into
 * a partition are handed to this member. Both run on the thread that calls the consumer
 * ({@code poll}, {@code commitSync}, {@code close}, or a call inside which Kafka rebalances).
 */
public interface OrderedConsumerRebalanceListener extends ConsumerRebalanceListener {
  /**
   * Every record of each partition below its offset was returned by {@code poll}, and the
   * offset is about to be committed: keys of the partition's tail may now be read elsewhere.
   * Throwing commits nothing; the callback runs again at the next call.
   *
   * @param partitions partition -> the offset about to be committed (at or past a boundary)
   */
  default void onPartitionKeyMaybeRevoked(Map<TopicPartition, Long> partitions) {}

  /**
   * Keys that moved into each partition at its offset (a receiving boundary) are this member's
   * now; called before the first record at or past the boundary is returned. Throwing returns
   * none of the records judged with it; they come again, after the callback, at a later call.
   *
   * @param partitions partition -> the receiving boundary crossed
   */
  default void onPartitionKeyAssigned(Map<TopicPartition, Long> partitions) {}
}
