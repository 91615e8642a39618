package org.orderedkafka.connect;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * {@link SinkProgress} through an admin client of its own: a sink task cannot reach the
 * worker's consumer, and the group's committed offsets of partitions other tasks own are the
 * progress its gates wait for.
 */
final class AdminProgress implements SinkProgress {
  private static final long TIMEOUT_MS = 10_000;

  private final Admin admin;

  AdminProgress(Map<String, Object> config) {
    Map<String, Object> c = new HashMap<>(config);
    c.putIfAbsent("client.id", "ordered-sink-gates");
    admin = Admin.create(c);
  }

  @Override
  public Map<Integer, Long> committed(String group, String topic, Set<Integer> partitions) {
    Map<TopicPartition, OffsetAndMetadata> all =
        get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
    Map<Integer, Long> out = new HashMap<>();
    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : all.entrySet()) {
      TopicPartition tp = e.getKey();
      if (e.getValue() != null && tp.topic().equals(topic) && partitions.contains(tp.partition())) {
        out.put(tp.partition(), e.getValue().offset());
      }
    }
    return out;
  }

  @Override
  public Map<Integer, Long> logStarts(String topic, Set<Integer> partitions) {
    Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
    for (int p : partitions) {
      ask.put(new TopicPartition(topic, p), OffsetSpec.earliest());
    }
    Map<Integer, Long> out = new HashMap<>();
    for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e :
        get(admin.listOffsets(ask).all()).entrySet()) {
      out.put(e.getKey().partition(), e.getValue().offset());
    }
    return out;
  }

  @Override
  public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) {
    Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
    for (TopicPartition tp : partitions) {
      ask.put(tp, OffsetSpec.latest());
    }
    Map<TopicPartition, Long> out = new HashMap<>();
    for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e :
        get(admin.listOffsets(ask).all()).entrySet()) {
      out.put(e.getKey(), e.getValue().offset());
    }
    return out;
  }

  private static <T> T get(org.apache.kafka.common.KafkaFuture<T> future) {
    try {
      return future.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KafkaException("interrupted reading offsets", e);
    } catch (ExecutionException e) {
      throw new KafkaException("reading offsets: " + e.getCause(), e.getCause());
    } catch (TimeoutException e) {
      throw new KafkaException("reading offsets took longer than " + TIMEOUT_MS + " ms", e);
    }
  }

  @Override
  public void close() {
    admin.close(java.time.Duration.ofSeconds(5));
  }
}
