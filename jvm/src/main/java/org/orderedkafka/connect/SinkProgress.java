package org.orderedkafka.connect;

import java.util.Collection;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;

/**
 * What the sink's gates read of Kafka: the group's committed offsets (the progress the gate
 * rule reads), the partitions' log start offsets, and their end offsets (the fetch check's
 * marks). Behind an interface so that the unit test runs the gates without a cluster; {@link
 * AdminProgress} is the real one.
 */
interface SinkProgress extends AutoCloseable {
  /**
   * The group's committed offsets on {@code partitions} of {@code topic}; a partition absent
   * from the answer has none.
   *
   * @throws RuntimeException Kafka did not answer (the gates being decided stay closed)
   */
  Map<Integer, Long> committed(String group, String topic, Set<Integer> partitions);

  /** The log start offsets of {@code partitions} of {@code topic}. */
  Map<Integer, Long> logStarts(String topic, Set<Integer> partitions);

  /** The end offsets (high watermarks) of {@code partitions}. */
  Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions);

  @Override
  void close();
}
